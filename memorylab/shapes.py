"""The shapes of what flows through memorylab: plain dicts, typed here once.

Messages, overlays, session rows, KV entries, search hits and long-term records stay dicts (they
go to JSON, to models and to pandas unchanged), but each kind has a ``TypedDict`` that names its
keys for readers and type checkers. A list the engine returns is one of the ``list`` subclasses
below, so ``to_dataframe`` knows what it holds from its type instead of guessing from its keys.
"""
from __future__ import annotations

from typing import Any, SupportsIndex, TypedDict, TypeVar, overload

_Item = TypeVar("_Item")


class Part(TypedDict, total=False):
    """One part of a message: ``{"type": "text", "text"}``, ``{"type": "reasoning", "text"}``, or a
    tool part ``{"type": "tool-<name>", "toolCallId", "toolName", "input", "output", "state"}``."""

    type: str
    text: str
    toolCallId: str
    toolName: str
    input: Any
    output: Any
    state: str


class Message(TypedDict):
    """A stored message. ``parent_id`` places it in its session's tree; ``tokens`` is its estimate."""

    id: str
    role: str
    parts: list[Part]
    created_at: str
    metadata: dict
    parent_id: str | None
    tokens: int


class MemoryMessage(Message):
    """A message as ``Memory`` reads it back: the stored one, with the document's ``content`` (its
    text) and ``timestamp`` (its ``created_at``)."""

    content: str
    timestamp: str


class Overlay(TypedDict):
    """A compaction overlay: ``summary`` stands for the messages ``from_id..to_id`` of one path."""

    id: int
    from_id: str
    to_id: str
    summary: str
    created_at: str
    metadata: dict


class SessionRow(TypedDict):
    """A session as ``store.sessions.list()`` lists it."""

    session_id: str
    tenant_id: str
    agent_id: str
    created_at: str
    updated_at: str
    message_count: int
    branch_count: int
    tokens: int
    metadata: dict


class KVEntry(TypedDict):
    """A live KV entry; ``value`` is the stored JSON decoded."""

    key: str
    value: Any
    expires_at: str | None
    created_at: str
    updated_at: str
    version: str
    """Changes with every write: what ``KVStore.set(..., expected=)`` compares."""


class SearchHit(TypedDict):
    """A message found by full-text search; ``snippet`` marks the matched words with ``SNIPPET_MARKS``."""

    id: str
    role: str
    content: str
    created_at: str
    session_id: str
    tenant_id: str
    agent_id: str
    rank: float
    snippet: str


class MemoryRecord(TypedDict):
    """A long-term memory record of a workspace."""

    id: int
    workspace: str
    collection: str
    kind: str
    scope: str
    session_id: str | None
    summary: str
    body: dict
    tags: list[str]
    importance: float
    provenance: dict
    vector_index: dict
    created_at: str
    updated_at: str
    version: str
    """Changes with every write: what ``update_record(..., expected=)`` compares."""


class Messages(list[Message]):
    """Messages in order: a history, a branch point's children, a session's every message.

    A slice, a copy or a sum is a ``Messages`` carrying the same pins, so that
    ``plan_compaction(history[k:])`` keeps what ``plan_compaction(history)`` keeps; ``list(history)``
    is the way to drop them."""

    pinned_ids: frozenset = frozenset()
    """The ids of the session's pinned messages, on a history read by ``Session.get_history``."""

    @overload
    def __getitem__(self, index: SupportsIndex) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> Messages: ...

    def __getitem__(self, index):
        if isinstance(index, slice):
            return self._pinned(super().__getitem__(index), self.pinned_ids)
        return super().__getitem__(index)

    @overload
    def __add__(self, other: list[Message]) -> Messages: ...

    @overload
    def __add__(self, other: list[_Item]) -> list[_Item | Message]: ...

    def __add__(self, other):
        """A ``Messages`` whatever ``other`` holds; typed as ``list.__add__`` is, for other items."""
        return self._pinned(super().__add__(other), self.pinned_ids | _pins_of(other))

    def __radd__(self, other: list[Message]) -> Messages:
        """``[message] + history``: Python asks the subclass first."""
        return self._pinned([*other, *self], self.pinned_ids | _pins_of(other))

    def copy(self) -> Messages:
        return self._pinned(self, self.pinned_ids)

    @staticmethod
    def _pinned(items, pinned_ids) -> Messages:
        messages = Messages(items)
        if pinned_ids:
            messages.pinned_ids = pinned_ids
        return messages


def _pins_of(messages) -> frozenset:
    return getattr(messages, "pinned_ids", frozenset())


class SessionRows(list[SessionRow]):
    """Rows of ``store.sessions.list()``."""


class SearchHits(list[SearchHit]):
    """Hits of ``store.search`` or ``Session.search``, best first."""


class MemoryRecords(list[MemoryRecord]):
    """Long-term records of a workspace."""


class MemoryRow(TypedDict):
    """A memory as ``Memory.list()`` lists it: its key split into entity type and value, its status
    (None: in progress), newest summary and newest message ``{"role", "content", "timestamp"}``."""

    id: str
    entity_type: str | None
    entity_value: str | None
    status: str | None
    updated_at: str
    message_count: int
    summary: str | None
    last_message: dict | None


class MemoryRows(list[MemoryRow]):
    """Rows of ``Memory.list()``."""


class KVRows(list[KVEntry]):
    """Entries of ``KVStore.list_entries()``."""
