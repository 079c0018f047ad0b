"""memorylab as the memory of an OpenAI Agents SDK agent.

``Runner.run(agent, "…", session=MemorylabSession("user-42", store))`` keeps the agent's items in a
memorylab session, one message per item with the item kept whole (``importers.openai_items``), so the
lab shows the conversation while it runs, each tool call paired with its result. The session is a
tree: ``fork`` continues from an earlier message and leaves what followed it as a branch.

Store calls are synchronous; each operation runs in a worker thread (``asyncio.to_thread``), which
both stores allow (SQLite serializes on one lock, PostgreSQL pins a pooled connection per thread).
"""
from __future__ import annotations

import asyncio
import threading

try:
    from agents.memory import SessionSettings
    from agents.memory.session_settings import coerce_session_settings
except ImportError as error:
    raise ImportError("memorylab.agents_sdk needs the OpenAI Agents SDK: pip install openai-agents") from error

from .errors import NotFoundError
from .history.session import Session
from .importers.openai_items import answered_call, call_names, to_items, to_message
from .store import LATEST_LEAF


class MemorylabSession:
    """The SDK's session protocol (``get_items``, ``add_items``, ``pop_item``, ``clear_session``) on the
    memorylab session ``session_id`` of ``agent_id``, created when it does not exist.

    Items are read from, and added under, the *head*: the session's newest message, unless ``fork``
    or ``pop_item`` moved it. The head lives in this object; another ``MemorylabSession`` on the same
    session starts at the newest message, and so does this one when its head was removed elsewhere (a
    clear or delete by another object or process). Compactions made in the lab do not change what the
    agent is given: it gets its items back whole, but for a message whose parts no longer match its
    item (edited in the lab, or the item put there by someone else), given as it reads now
    (``openai_items.kept_item``). ``memory`` is the memorylab ``Session`` itself.
    """

    def __init__(self, session_id, store, *, agent_id="openai-agents", tenant_id="default", session_settings=None):
        self.session_id = session_id
        self.session_settings = SessionSettings() if session_settings is None else coerce_session_settings(
            session_settings)
        self.memory = Session.create(store, session_id, tenant_id=tenant_id, agent_id=agent_id)
        self._head = LATEST_LEAF
        self._lock = threading.Lock()

    def __repr__(self):
        return f"<MemorylabSession {self.session_id!r} on {self.memory!r}>"

    @property
    def head_id(self) -> str | None:
        """The message the next item goes under; None when it starts a new root (an empty session)."""
        return self.memory.get_latest_leaf_id() if self._head is LATEST_LEAF else self._head

    def fork(self, message_id) -> None:
        """Continue from ``message_id``: the next ``add_items`` goes under it, and the messages that
        followed it stay as a branch. ``None`` starts a new root. Raises NotFoundError for an unknown id."""
        with self._lock:
            if message_id is not None and self.memory.get_message(message_id) is None:
                raise NotFoundError(f"cannot fork: no message {message_id!r} in session {self.session_id!r}")
            self._head = message_id

    async def get_items(self, limit=None) -> list[dict]:
        """The items on the path to the head, oldest first; the newest ``limit`` of them when given
        (else ``session_settings.limit``)."""
        return await self._in_thread(self._items, self.session_settings.limit if limit is None else limit)

    async def add_items(self, items) -> None:
        """Append each item as a message under the head, in one transaction; the last becomes the head."""
        if items:
            await self._in_thread(self._add, list(items))

    async def pop_item(self) -> dict | None:
        """Remove the head's message and return its item, None for an empty path; the head moves to
        its parent. A message with no item to give back is removed on the way to one."""
        return await self._in_thread(self._pop)

    async def clear_session(self) -> None:
        """Remove every message and overlay of the session (its context blocks and metadata stay)."""
        await self._in_thread(self._clear)

    async def _in_thread(self, operation, *args):
        return await asyncio.to_thread(self._locked, operation, *args)

    def _locked(self, operation, *args):
        with self._lock:
            return operation(*args)

    def _items(self, limit):
        self._forget_removed_head()
        head = self.head_id
        path = self.memory.get_history(head, apply_compactions=False) if head is not None else []
        items = [item for message in path for item in to_items(message)]
        if limit is None:
            return items
        return items[-limit:] if limit > 0 else []

    def _add(self, items):
        names, looked_back = {}, False
        with self.memory.store.transaction():
            self._forget_removed_head()
            parent = self._head
            for item in items:
                call_id = answered_call(item)
                if call_id is not None and call_id not in names and not looked_back:
                    # An output whose call came in an earlier batch is named after it.
                    head = self.head_id
                    names.update(call_names(self.memory.get_history(head, apply_compactions=False) if head else []))
                    looked_back = True
                parent = self.memory.append_message(to_message(item, names), parent_id=parent)["id"]
        self._head = LATEST_LEAF  # the last message appended is the session's newest

    def _pop(self):
        with self.memory.store.transaction():
            while (head := self.head_id) is not None:
                message = self.memory.get_message(head)
                if message is None:  # removed behind this object's back: go on from the newest
                    self._head = LATEST_LEAF
                    continue
                self.memory.delete_messages([head])
                self._head = message["parent_id"]
                items = to_items(message)
                if items:
                    return items[-1]
        return None

    def _forget_removed_head(self):
        """Go on from the newest message when the head was removed behind this object's back (a clear
        or delete by another object or process): the SDK's own session then just appends."""
        if self._head is not LATEST_LEAF and self._head is not None and self.memory.get_message(self._head) is None:
            self._head = LATEST_LEAF

    def _clear(self):
        self.memory.clear_messages()
        self._head = LATEST_LEAF
