"""Exception classes. Every error the engine raises on purpose is a MemoryLabError."""


class MemoryLabError(Exception):
    """Base class: catch this to handle any refusal from memorylab."""


class InvalidInputError(MemoryLabError, ValueError):
    """An argument is malformed: an id with control characters, a bad limit, a bad range."""


class InvalidMessageError(InvalidInputError):
    """A message dict has the wrong shape (role, parts, ids, timestamps)."""


class NotFoundError(MemoryLabError, LookupError):
    """A session, message, overlay or agent does not exist in this namespace."""


class ImportFormatError(MemoryLabError, ValueError):
    """An import file is not a valid memorylab session export; nothing was written."""


class ConflictError(MemoryLabError):
    """The write would overwrite something that exists (pass replace=True to allow it)."""


class ReadOnlyBlockError(MemoryLabError):
    """A write went to a context block whose provider has no ``set``."""


class BlockBudgetError(MemoryLabError, ValueError):
    """A write would put a context block over its ``max_tokens``; nothing was written."""


class NothingToSummarizeError(MemoryLabError):
    """A summary was asked for a memory with no messages outside its current summary."""


class AmbiguousAgentError(InvalidInputError):
    """An agent was named by a name that several agents of the tenant share; use its id or slug."""


class StoreBusyError(MemoryLabError):
    """The database file stayed locked by another writer for longer than the store's timeout."""


class DamagedRowError(MemoryLabError):
    """A stored row cannot be read: its JSON is unreadable or of the wrong kind. ``memorylab check``
    lists every such row; reads that return many rows skip it with a ``DamagedRowWarning``."""


class DamagedRowWarning(UserWarning):
    """A read skipped a stored row it could not read; the rest of the answer is complete."""
