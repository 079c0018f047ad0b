"""The reads beyond the core ``SessionStorage``: asked of a storage that offers them, derived from the
core methods of one that does not.

A storage laid out in SQL answers "how many children has each message?" or "the tool parts of every
message" in one statement (``TreeQueries``, ``Outlines``, ``PagedBranchReads`` in ``protocols``); a
small storage of one's own answers only the core, and these functions compute the same answers
from ``all()``, ``path()`` and ``pins()``. Callers above the store ask here, never the storage itself.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, TypeVar

from ..messages import is_tool_part, message_text
from ..shapes import Messages
from .protocols import Outlines, PagedBranchReads, SessionStorage, TreeQueries

if TYPE_CHECKING:  # typing.TypeIs is Python 3.13's; type checkers know typing_extensions' at any version
    from typing_extensions import TypeIs

TEXT_ONLY = ({"type": "text"},)
"""The parts of every message without a tool part in ``tool_outline`` (shared: read, never change)."""
_offered: dict[tuple[type, type], bool] = {}
_Capability = TypeVar("_Capability")


def offers(storage: object, capability: type[_Capability]) -> TypeIs[_Capability]:
    """``isinstance(storage, capability)``, remembered per class: a runtime protocol check looks up
    every method, and a history read asks several times."""
    key = (type(storage), capability)
    found = _offered.get(key)
    if found is None:
        found = _offered[key] = isinstance(storage, capability)
    return found


# -- TreeQueries ------------------------------------------------------------------------------------


def message_ids(storage: SessionStorage) -> set[str]:
    if offers(storage, TreeQueries):
        return storage.message_ids()
    return {message["id"] for message in storage.all()}


def child_counts(storage: SessionStorage) -> dict[str, int]:
    """``{message id: children}`` of every message with children."""
    if offers(storage, TreeQueries):
        return storage.child_counts()
    return dict(Counter(parent for m in storage.all() if (parent := m.get("parent_id")) is not None))


def newest_leaf_under(storage: SessionStorage, message_id: str) -> str | None:
    """The newest message of the subtree rooted at ``message_id`` (itself when it is a leaf)."""
    if offers(storage, TreeQueries):
        return storage.newest_leaf_under(message_id)
    below, newest = {message_id}, None
    for message in storage.all():  # parents come before their children
        if message["id"] == message_id or message.get("parent_id") in below:
            below.add(message["id"])
            newest = message["id"]
    return newest


def leaves(storage: SessionStorage) -> Messages:
    """Every childless message, newest first."""
    if offers(storage, TreeQueries):
        return storage.leaves()
    messages = storage.all()
    parents = {message.get("parent_id") for message in messages}
    return Messages(message for message in reversed(messages) if message["id"] not in parents)


def pinned_ids(storage: SessionStorage) -> frozenset:
    if offers(storage, TreeQueries):
        return storage.pinned_ids()
    return frozenset(pin["message_id"] for pin in storage.pins())


# -- Outlines ---------------------------------------------------------------------------------------


def path_stats(storage: SessionStorage, leaf_id: str) -> tuple[int, int]:
    """(length, stored token sum) of the path ending at ``leaf_id``."""
    if offers(storage, Outlines):
        return storage.path_stats(leaf_id)
    path = storage.path(leaf_id)
    return len(path), sum(message["tokens"] for message in path)


def assistant_turns(storage: SessionStorage, leaf_id: str) -> list[dict]:
    """``{"id", "role", "metadata"}`` of each assistant message from the root down to ``leaf_id``."""
    if offers(storage, Outlines):
        return storage.assistant_turns(leaf_id)
    return [{"id": m["id"], "role": "assistant", "metadata": m["metadata"]}
            for m in storage.path(leaf_id) if m["role"] == "assistant"]


def _holds_tool_part(message) -> bool:
    return any(is_tool_part(part) for part in message.get("parts") or ())


def outline(storage: SessionStorage) -> list[dict]:
    """Every message as a tree drawing needs it (``Outlines.outline``), parents first."""
    if offers(storage, Outlines):
        return storage.outline()
    drawn: list[dict] = []
    for m in storage.all():
        text = message_text(m)
        parts = m["parts"] if not text or _holds_tool_part(m) else [{"type": "text", "text": text}]
        drawn.append({"id": m["id"], "parent_id": m.get("parent_id"), "role": m["role"], "tokens": m["tokens"],
                      "created_at": m["created_at"], "metadata": {}, "parts": parts})
    return drawn


def has_tool_parts(storage: SessionStorage) -> bool:
    if offers(storage, Outlines):
        return storage.has_tool_parts()
    return any(_holds_tool_part(message) for message in storage.all())


def tool_outline(storage: SessionStorage) -> Iterator[tuple]:
    """(id, parent id, role, parts) of every message, parents first; parts only where a tool part is."""
    if offers(storage, Outlines):
        return storage.tool_outline()
    return ((m["id"], m.get("parent_id"), m["role"], m["parts"] if _holds_tool_part(m) else TEXT_ONLY)
            for m in storage.all())


# -- PagedBranchReads -------------------------------------------------------------------------------


def message_pages(storage: SessionStorage, page_size: int) -> Iterator[Messages]:
    """Every message in the order stored, ``page_size`` at a time (the whole of ``all()`` where the
    storage cannot page)."""
    if offers(storage, PagedBranchReads):
        span = storage.seq_span()
        return storage.messages_between(*span, page_size=page_size) if span else iter(())
    messages = storage.all()
    return (messages[start:start + page_size] for start in range(0, len(messages), page_size))
