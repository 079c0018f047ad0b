"""A session kept in this process's memory: the core ``SessionStorage`` and nothing more.

``Session.over(InMemorySessionStorage("s1"))`` is a whole ``Session`` (append, branches, overlays, pins,
search, context blocks) with no database: for a notebook, a test, or as the pattern of a storage of
one's own. It answers only the core protocol, so every read beyond it (child counts, outlines, paged
branches) is derived by ``memorylab.store.capabilities``. Nothing outlives the object; one lock
makes it safe to share between threads.
"""
from __future__ import annotations

import copy
import re
import threading

from ..errors import InvalidMessageError, NotFoundError, StaleWriteError
from ..messages import message_text, utc_now_iso
from ..shapes import Message, Messages, Overlay, SearchHits
from ..validation import check_identifier
from .compare_and_set import check_version
from .context import text_version
from .dialect import SNIPPET_MARKS
from .fts import search_terms
from .rows import placed
from .sessions import LATEST_LEAF, UNCHECKED

_WORD = re.compile(r"\w+")


class InMemoryBlockStorage:
    """A session's block contents, frozen prompt and active skills, in memory (``SessionBlockStorage``)."""

    def __init__(self, lock):
        self._lock, self._contents, self._prompt, self._skills = lock, {}, None, {}

    def all(self) -> list[dict]:
        with self._lock:
            return [{"label": label, **stored} for label, stored in sorted(self._contents.items())]

    def content(self, label) -> str | None:
        with self._lock:
            stored = self._contents.get(label)
            return stored["content"] if stored else None

    def set_content(self, label, content, *, expected=None) -> None:
        with self._lock:
            stored = self.content(label)
            check_version(f"block {label!r}", expected, text_version(stored), stored)
            self._contents[label] = {"content": content, "updated_at": utc_now_iso()}

    def frozen_prompt(self) -> str | None:
        return self._prompt

    def set_frozen_prompt(self, prompt) -> None:
        self._prompt = prompt

    def active_skills(self, label) -> list[str]:
        with self._lock:
            return list(self._skills.get(label, ()))

    def set_skill_active(self, label, key, active) -> None:
        with self._lock:
            keys = self._skills.setdefault(label, [])
            if active and key not in keys:
                keys.append(key)
            elif not active and key in keys:
                keys.remove(key)

    def clear_skills(self) -> None:
        """Deactivate every skill (what clearing the session's messages does)."""
        with self._lock:
            self._skills.clear()


class InMemorySessionStorage:
    """One session's tree, overlays, pins, status and blocks in dicts; messages in the order stored."""

    def __init__(self, session_id, *, tenant_id="default", agent_id="default", metadata=None):
        now = utc_now_iso()
        self._info = {"session_id": check_identifier(session_id, "session id"),
                      "tenant_id": check_identifier(tenant_id, "tenant id"),
                      "agent_id": check_identifier(agent_id, "agent id"),
                      "created_at": now, "updated_at": now, "metadata": dict(metadata or {})}
        self._lock = threading.RLock()
        self._messages: dict[str, Message] = {}
        self._overlays: dict[int, Overlay] = {}
        self._pins: dict[str, dict] = {}
        self._status, self._latest, self._deleted = None, None, False
        self.blocks = InMemoryBlockStorage(self._lock)

    def __repr__(self):
        return f"<InMemorySessionStorage {self._info['session_id']!r}>"

    # -- the session ---------------------------------------------------------------------------

    def info(self) -> dict:
        with self._lock:
            self._check_exists()
            return copy.deepcopy(self._info)

    def set_metadata(self, metadata) -> None:
        with self._lock:
            self._info.update(metadata=copy.deepcopy(dict(metadata)), updated_at=utc_now_iso())

    def status(self) -> str | None:
        return self._status

    def set_status(self, status, updated_at, *, expected=UNCHECKED) -> None:
        with self._lock:
            if expected is not UNCHECKED and self._status != expected:
                raise StaleWriteError(f"the status of session {self._info['session_id']!r}",
                                      expected=expected or "in progress", version=self._status or "in progress",
                                      stored=self._status)
            self._status = status
            self._info["updated_at"] = updated_at

    def delete(self) -> None:
        with self._lock:
            self.clear()
            self._deleted = True

    def _check_exists(self):
        if self._deleted:
            raise NotFoundError(f"session {self._info['session_id']!r} no longer exists")

    def _touch(self):
        self._info["updated_at"] = utc_now_iso()

    # -- messages ------------------------------------------------------------------------------

    def append(self, message, parent=LATEST_LEAF) -> Message:
        with self._lock:
            self._check_exists()
            stored = self._messages.get(message["id"])
            if stored is not None:
                return copy.deepcopy(stored)
            parent_id = self._latest if parent is LATEST_LEAF else parent
            if parent_id is not None and parent_id not in self._messages:
                raise NotFoundError(f"parent {parent_id!r} is not a message of this session; append with "
                                    "parent_id=None to start a new root")
            appended = placed(message, parent_id)
            self._messages[message["id"]] = copy.deepcopy(appended)
            self._latest = message["id"]
            self._touch()
            return appended

    def get(self, message_id) -> Message | None:
        with self._lock:
            stored = self._messages.get(message_id)
            return copy.deepcopy(stored) if stored is not None else None

    def latest_leaf_id(self) -> str | None:
        return self._latest

    def path(self, leaf_id) -> Messages:
        with self._lock:
            path: list[Message] = []
            at = self._messages.get(leaf_id)
            while at is not None:
                path.append(at)
                at = self._messages.get(at["parent_id"]) if at["parent_id"] is not None else None
            return Messages(copy.deepcopy(path[::-1]))

    def children(self, message_id) -> Messages:
        with self._lock:
            return Messages(copy.deepcopy([m for m in self._messages.values() if m["parent_id"] == message_id]))

    def all(self) -> Messages:
        with self._lock:
            return Messages(copy.deepcopy(list(self._messages.values())))

    def count(self) -> int:
        return len(self._messages)

    def update(self, message) -> Message:
        with self._lock:
            current = self._messages.get(message["id"])
            if current is None:
                raise NotFoundError(f"message {message['id']!r} is not in this session")
            updated = placed(message, current["parent_id"])
            self._messages[message["id"]] = copy.deepcopy(updated)
            self._touch()
            return updated

    def delete_messages(self, message_ids) -> int:
        with self._lock:
            removed = 0
            for message_id in dict.fromkeys(message_ids):
                gone = self._messages.pop(message_id, None)
                if gone is None:
                    continue
                for child in self._messages.values():
                    if child["parent_id"] == message_id:
                        child["parent_id"] = gone["parent_id"]
                self._overlays = {key: o for key, o in self._overlays.items()
                                  if message_id not in (o["from_id"], o["to_id"])}
                self._pins.pop(message_id, None)
                removed += 1
            self._latest = next(reversed(self._messages), None)
            self._touch()
            return removed

    def clear(self) -> int:
        with self._lock:
            removed = len(self._messages)
            self._messages.clear()
            self._overlays.clear()
            self._pins.clear()
            self.blocks.clear_skills()
            self._latest = None
            self._touch()
            return removed

    def search(self, query, *, tenant_id, limit=20, roles=None) -> SearchHits:
        """Messages holding every word of ``query`` (bare words as prefixes, quoted phrases whole), most
        matches first: no index, a scan of the session."""
        terms = [(_WORD.findall(chunk.casefold()), prefix) for chunk, prefix in search_terms(query)]
        hits: list[tuple[int, int, Message, str]] = []
        for message in self.all():
            if roles and message["role"] not in roles:
                continue
            text = message_text(message)
            words = _WORD.findall(text.casefold())
            counts = [_occurrences(words, term, prefix) for term, prefix in terms]
            if terms and all(counts):
                hits.append((-sum(counts), len(hits), message, text))
        return SearchHits({"id": m["id"], "role": m["role"], "content": text, "created_at": m["created_at"],
                           "session_id": self._info["session_id"], "tenant_id": self._info["tenant_id"],
                           "agent_id": self._info["agent_id"], "rank": rank, "snippet": _marked(text, terms)}
                          for rank, _, m, text in sorted(hits, key=lambda hit: hit[:2])[:max(0, int(limit))])

    # -- overlays ------------------------------------------------------------------------------

    def add_overlay(self, summary, from_id, to_id, metadata=None) -> Overlay:
        with self._lock:
            if to_id not in self._messages:
                raise NotFoundError(f"to_id {to_id!r} is not a message of this session")
            if from_id not in {m["id"] for m in self.path(to_id)}:
                raise InvalidMessageError(f"from_id {from_id!r} is not on the path to {to_id!r}: an overlay covers "
                                          "one root-to-leaf range")
            overlay_id = max(self._overlays, default=0) + 1
            self._overlays[overlay_id] = {"id": overlay_id, "from_id": from_id, "to_id": to_id, "summary": summary,
                                          "created_at": utc_now_iso(), "metadata": copy.deepcopy(metadata or {})}
            return copy.deepcopy(self._overlays[overlay_id])

    def overlays(self) -> list[Overlay]:
        with self._lock:
            return copy.deepcopy([self._overlays[key] for key in sorted(self._overlays)])

    def delete_overlay(self, overlay_id) -> None:
        with self._lock:
            if self._overlays.pop(overlay_id, None) is None:
                raise NotFoundError(f"overlay {overlay_id!r} is not in this session")

    # -- pins ------------------------------------------------------------------------------------

    def pin(self, message_id, note="") -> dict:
        with self._lock:
            if message_id not in self._messages:
                raise NotFoundError(f"cannot pin {message_id!r}: it is not a message of this session")
            pin = self._pins.setdefault(message_id,
                                        {"message_id": message_id, "note": note, "pinned_at": utc_now_iso()})
            pin["note"] = note
            self._touch()
            return dict(pin)

    def unpin(self, message_id) -> bool:
        with self._lock:
            removed = self._pins.pop(message_id, None) is not None
            if removed:
                self._touch()
            return removed

    def pins(self) -> list[dict]:
        with self._lock:
            return [dict(pin) for pin in sorted(self._pins.values(), key=lambda p: (p["pinned_at"], p["message_id"]))]


def _occurrences(words, term, prefix) -> int:
    """How often the words of ``term`` follow one another in ``words`` (its last one as a prefix)."""
    if not term:
        return 0
    *whole, last = term
    found = 0
    for start in range(len(words) - len(term) + 1):
        here = words[start:start + len(term)]
        if here[:-1] == whole and (here[-1].startswith(last) if prefix else here[-1] == last):
            found += 1
    return found


def _marked(text, terms) -> str:
    """``text`` with the words that start a searched term between ``SNIPPET_MARKS``."""
    starts = {term[0] for term, _ in terms if term}
    return _WORD.sub(lambda word: f"{SNIPPET_MARKS[0]}{word[0]}{SNIPPET_MARKS[1]}"
                     if any(word[0].casefold().startswith(start) for start in starts) else word[0], text)
