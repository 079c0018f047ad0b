"""What an importer reads out of another system's memory, before anything is written.

Every format module turns its source into ``SourceSession`` objects: one per conversation, holding
its messages in the order they may be written (a parent before its children) and the compaction
overlays the source recorded. The writer (``memorylab.importers.writer``) is the only code that
touches the store, so each format module is a pure reader and every format gets the same
deduplication, validation and single transaction.

Message ids are derived from the source's own ids (an item's row id, a transcript entry's uuid), so
importing the same source twice yields the same ids and the second import adds nothing. Those ids
are often unique only inside their source (a file's stem, a count from 0, a thread called "1"), so
each conversation is also known by its opening: the first ``opening_span`` messages as read, which
a copy of the same conversation, or the same one grown, starts with too (see ``SourceSession``).
"""
from __future__ import annotations

import contextvars
import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from ..errors import ImportFormatError, MemoryLabError

PREVIOUS = object()
"""Parent marker: the message before this one in the same ``SourceSession`` (a linear history)."""


@dataclass(frozen=True)
class StoredParent:
    """Parent marker: the message ``id`` if the session already holds it (as its id, or among the
    ``source_ids`` of a stored message's metadata), else none (a new root). For a source whose files
    go on from one another and are imported one at a time."""

    id: str


@dataclass
class SourceMessage:
    """One message: ``message`` is anything ``normalize_message`` accepts (the parts shape or an
    OpenAI chat dict) and must carry a stable ``id``; ``where`` names its place in the source
    ("line 17", "agent_messages row 42") for error messages. ``reader_keys`` are the metadata keys
    memorylab gives a meaning to (``importers.reserved``) that the reader set itself, from what the
    source means (the Agents SDK reader's ``openai_item``); any other is the source's and is renamed."""

    message: dict
    parent_id: str | None | object = PREVIOUS
    where: str = ""
    reader_keys: tuple[str, ...] = ()


@dataclass
class SourceOverlay:
    """A compaction the source recorded: ``summary`` replaced the messages from ``from_id`` to ``to_id``
    (memorylab ids of messages of the same session, ``from_id`` an ancestor of ``to_id`` or itself).
    ``id`` and ``created_at`` are kept by a whole session; a merged one's overlays are numbered anew."""

    from_id: str
    to_id: str
    summary: str
    metadata: dict = field(default_factory=dict)
    where: str = ""
    id: int | None = None
    created_at: str | None = None


@dataclass
class OpenResponse:
    """A model response read so far (one assistant message in the parts shape) and the results of its
    calls, held until the response is complete: a transcript writes a response and its results over
    several lines."""

    message: dict
    parent: str | None
    where: str
    calls: set = field(default_factory=set)
    answered: set = field(default_factory=set)
    results: list = field(default_factory=list)

    @property
    def id(self):
        return self.message["id"]

    @property
    def tail(self):
        """The message the next one hangs on: the last result, or the response itself."""
        return self.results[-1].message["id"] if self.results else self.id


@dataclass
class WholeSession:
    """What a source holding whole sessions (a memorylab export) keeps beside messages and overlays.

    Such a session is written at once under its own id, with its dates, frozen prompt, pins and
    context blocks, never merged into a stored one: a session of that id is a ConflictError unless
    the import replaces it. Its reader checked its messages, overlays and pins against one another."""

    created_at: str
    updated_at: str
    frozen_prompt: str | None = None
    pins: list[dict] = field(default_factory=list)
    context_blocks: list[dict] = field(default_factory=list)


@dataclass
class SourceSession:
    """One conversation of the source.

    ``messages`` may be a generator (large sources stream); the writer reads all of one session's
    messages before it asks for the next session, so sessions may share one cursor. ``overlays``, ``title``
    and ``metadata`` are read only after every message was written, so a reader may fill them in while its
    messages are consumed (one pass over the file). ``metadata`` is merged over the session's metadata on
    every import; ``source_id`` is the conversation's id in the source and, unless ``session_id`` says
    otherwise, its memorylab id.

    ``opening_span`` is how many of its first messages tell this conversation from another source's
    with the same ids: None for all of them (messages known only by their place, as in a chat file:
    all must agree); 1 when the first carries a mark of its own source (a row's time, a checkpoint
    id); 0 when the source's ids are unique everywhere (UUIDs, ULIDs) and alone say which it is. A
    streaming reader should keep it small: the writer holds that many messages before it writes.

    ``agent_id`` is the agent the source files it under (a memorylab export names one), unless the
    import names one. ``whole`` marks a session written whole rather than merged (``WholeSession``).
    """

    source_id: str
    messages: Iterable[SourceMessage]
    title: str | None = None
    metadata: dict = field(default_factory=dict)
    overlays: list[SourceOverlay] = field(default_factory=list)
    session_id: str | None = None
    opening_span: int | None = None
    agent_id: str | None = None
    whole: WholeSession | None = None

    @property
    def memorylab_id(self) -> str:
        return self.session_id or self.source_id


def source_error(source, where, problem) -> ImportFormatError:
    """An ImportFormatError naming the file, the place in it, and what was expected there."""
    place = f"{source}, {where}" if where else str(source)
    return ImportFormatError(f"{place}: {problem}; nothing was imported")


def loads(text):
    """``json.loads`` for a source: JSON nested deeper than the decoder recurses is a ValueError, as
    any other unreadable JSON is, so that readers refuse it by place."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply to read") from None


LineSource = Callable[[object], "Iterator[tuple[int, bytes]] | None"]
following: contextvars.ContextVar[LineSource | None] = contextvars.ContextVar("memorylab_following", default=None)
"""Where ``json_lines`` reads a file's lines from, when not from the file itself: ``memorylab watch``
hands a reader the lines of a growing file as they are written (``importers.watch``)."""


def json_lines(path):
    """(line number, JSON value) of each non-empty line of a text file; a line that is not UTF-8 JSON is
    refused by its number."""
    follow = following.get()
    lines = follow(path) if follow is not None else None
    for number, line in _file_lines(path) if lines is None else lines:
        if not line.strip():
            continue
        try:
            value = loads(line.decode("utf-8"))
        except ValueError as error:  # UnicodeDecodeError is one
            raise source_error(path, f"line {number}", f"not valid JSON ({error})") from None
        yield number, value


def _file_lines(path):
    with open(path, "rb") as file:
        yield from enumerate(file, 1)


MALFORMED = (TypeError, AttributeError, KeyError, IndexError, ValueError, RecursionError)
"""What Python raises on data of the wrong shape: a string where an object was expected, a list
used as a key, a missing key, JSON nested too deeply."""


@contextmanager
def malformed_at(source, where, expected):
    """Refuse what a reader trips over at ``where`` (one line, row or checkpoint) as an ImportFormatError
    naming that place and what was ``expected`` there, rather than as Python's own error."""
    try:
        yield
    except MemoryLabError:
        raise
    except MALFORMED as error:
        raise source_error(source, where, f"expected {expected} ({type(error).__name__}: {error})") from None


def damaged_source_error(source, error) -> ImportFormatError:
    """The error for a SQLite source that fails while it is read (a damaged page): the source is
    named as the damaged file, never the store it is imported into."""
    return source_error(source, "", f"SQLite cannot read it ({error}): this source file is damaged; salvage what "
                                    f"is readable with `sqlite3 {source} .recover` into a new file and import that")


def chat_usage(prompt_tokens, completion_tokens) -> dict | None:
    """Token usage as memorylab's own chat records it (``{"prompt_tokens", "completion_tokens",
    "total_tokens"}``), whatever the source called the counts; None when it recorded neither."""
    counts = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
    counts = {key: value for key, value in counts.items() if isinstance(value, int) and not isinstance(value, bool)}
    return {**counts, "total_tokens": sum(counts.values())} if counts else None
