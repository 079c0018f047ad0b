"""Exception classes. Every error the engine raises on purpose is a MemoryLabError; a failure of the
database itself is a StoreError, whose ``__cause__`` is the driver's error."""


class MemoryLabError(Exception):
    """Base class: catch this to handle any refusal from memorylab."""


class InvalidInputError(MemoryLabError, ValueError):
    """An argument is malformed: an id with control characters, a bad limit, a bad range."""


class ApiHostNotAllowedError(InvalidInputError):
    """An experiment's model call names an ``api_base`` whose host the user did not allow (``--allow-host``,
    ``allowed_hosts=`` or MEMORYLAB_ALLOWED_API_HOSTS); nothing was sent."""


class InvalidMessageError(InvalidInputError):
    """A message dict has the wrong shape (role, parts, ids, timestamps)."""


class NotFoundError(MemoryLabError, LookupError):
    """A session, message, overlay or agent does not exist in this namespace."""


class ImportFormatError(MemoryLabError, ValueError):
    """An import file is not a valid memorylab session export; nothing was written."""


class OtlpRequestError(ImportFormatError):
    """OTLP trace data memorylab cannot read; nothing was taken from it. ``status`` is what ``memorylab
    collect`` answers such a request with: 400 for data it cannot decode, 413 for a body over its limit,
    415 for a body that is neither protobuf nor JSON (the OTLP/HTTP specification's codes)."""

    def __init__(self, message, status=400):
        super().__init__(message)
        self.status = status


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


class StoreError(MemoryLabError):
    """The database failed under a request: a damaged or foreign file, a table dropped behind the store's
    back, a lost server, a full disk, no write permission. ``__cause__`` is the driver's own error."""


class NotAStoreError(StoreError):
    """A SQLite file holds another program's tables and not memorylab's (an Agents SDK or llm database):
    it was opened read-only and left as it was. ``memorylab import`` reads its conversations."""


class StoreBusyError(StoreError):
    """Another writer held what a write needed for longer than the store's timeout; nothing was changed."""


class StoreUnavailableError(StoreError):
    """The PostgreSQL server cannot be reached, or is shutting down or starting up. Raised as soon as
    that is known, not after the lock timeout; the store reconnects by itself once the server is back."""


class StoreFullError(StoreError):
    """The disk holding the database is full: the write was rolled back. Free some space and retry.
    A SQLite file that cannot even start its shared-memory index on a full disk opens read-only."""


class StoreReadOnlyError(StoreError):
    """A write reached a database this store may only read: a write-protected file or folder, a store
    opened with ``read_only=True``, or a read-only server. Reads still work."""


class DamagedRowError(MemoryLabError):
    """A stored row cannot be read: its JSON is unreadable or of the wrong kind. ``memorylab check``
    lists every such row; reads that return many rows skip it with a ``DamagedRowWarning``."""


class DamagedRowWarning(UserWarning):
    """A read skipped a stored row it could not read; the rest of the answer is complete."""


class StoreCopyError(MemoryLabError):
    """A store copy did not verify; it was rolled back. ``report`` says what differed."""

    def __init__(self, report):
        super().__init__(f"verification failed, nothing was written to {report.target}: "
                         + "; ".join(report.mismatches))
        self.report = report


class ModelError(MemoryLabError):
    """A model call failed. ``kind`` is one of auth, rate_limit, timeout, context_window, connection,
    not_found, bad_request, unavailable, provider; the message says what to do and holds no key."""

    def __init__(self, message, *, kind, model):
        super().__init__(message)
        self.kind = kind
        self.model = model


class ModelOutputError(MemoryLabError, ValueError):
    """A model answered, but not with the JSON object a memory step needs."""


class LocalModelUnavailableError(MemoryLabError):
    """No runtime or no SmolLM2 GGUF file is installed."""


class ContextWindowError(MemoryLabError):
    """The prompt is longer than the embedded model's context window."""


class LocalPostgresError(MemoryLabError):
    """No PostgreSQL server binaries were found, or the throwaway server did not start."""


MISSING_VERSION = "missing"
"""The version of something not stored (``memorylab.store.compare_and_set.MISSING``)."""


class StaleWriteError(ConflictError):
    """A guarded write whose base changed since it was read; nothing was written.

    ``expected`` is the version the writer read, ``version`` the stored one now (``MISSING_VERSION`` when it
    is gone), ``stored`` what is stored now (None when it is gone). Write again with
    ``expected=error.version`` to overwrite it on purpose.
    """

    def __init__(self, what, *, expected, version, stored):
        if expected == MISSING_VERSION:
            change = f"{what} exists already (version {version})"
        elif version == MISSING_VERSION:
            change = f"{what} was removed since it was read at version {expected}"
        else:
            change = f"{what} changed since it was read: version {expected} then, {version} now"
        super().__init__(f"{change}. Nothing was written: read it again, or write with expected={version!r} "
                         "to overwrite it on purpose.")
        self.expected, self.version, self.stored = expected, version, stored
