"""A conversation's tree rebuilt from the contexts its model calls sent.

Each call sends the whole context, so the tree is the union of the paths those contexts spell: a
message is named by a digest of its content and of the message before it, and a context that
extends another's reaches the same messages and goes on from there; one that diverges at a message
(a retry, an edit, a fork) leaves a branch there. Placing the same call twice, or calls in any
order, gives the same messages.

A context that shares a start with the path of the agent's previous call (the latest earlier call
through that point) and then holds a message never on that path, followed by more, is the agent's
own compaction: the span of the path it dropped is replaced by that message (with any messages of
the path the agent kept just before it, as Codex keeps its prompts). It becomes an overlay over the
dropped span, summarized by those messages, and the context goes on where the span ended: from the
messages of the path it kept after the summary (a kept tail), or else from the span's last message.
A later context holding the same summary at the same point takes the same overlay.

Which call was the previous one depends on the calls placed before, so a compaction is told by
placing calls in their start order (see ``memorylab.importers.otel.sessions``).
"""
from __future__ import annotations

import hashlib
import json
from bisect import insort
from collections import defaultdict
from dataclasses import dataclass, field

from ..source import SourceMessage, SourceOverlay

REPLACED_KEY = "otel_replaced_by"
"""The overlay metadata key listing the digests of the messages the agent put in the dropped span's place."""


def digest(message: dict) -> str:
    """What tells one message's content from another's: its role and parts."""
    text = json.dumps([message["role"], message["parts"]], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def message_id(parent_id: str | None, content_digest: str) -> str:
    return hashlib.sha1(f"{parent_id or ''}/{content_digest}".encode("ascii")).hexdigest()[:24]


@dataclass
class Placed:
    """What placing calls added: new messages (parents first) and new overlays."""

    messages: list[SourceMessage] = field(default_factory=list)
    overlays: list[SourceOverlay] = field(default_factory=list)


@dataclass(frozen=True)
class Jump:
    """At a message, the sequence of message digests an agent's compaction put in place of the span that
    follows it, and the span's last message, where a context holding that sequence goes on."""

    replaced_by: tuple[str, ...]
    to_id: str


class ConversationTree:
    """The messages and overlays of one conversation so far, and the calls that made them."""

    def __init__(self):
        self.parent: dict[str, str | None] = {}
        self.digests: dict[str, str] = {}
        self.calls: list[tuple[int, str]] = []  # (start, answer id) of every call placed, in start order
        self.jumps: dict[str | None, list[Jump]] = defaultdict(list)

    def __len__(self):
        return len(self.parent)

    # --- what the store already holds

    def know_message(self, message_id_, parent_id, content_digest, call_start=None):
        self.parent[message_id_] = parent_id
        self.digests[message_id_] = content_digest
        if call_start is not None:
            insort(self.calls, (call_start, message_id_))

    def know_overlay(self, from_id, to_id, metadata):
        replaced_by = metadata.get(REPLACED_KEY) if isinstance(metadata, dict) else None
        if isinstance(replaced_by, list) and from_id in self.parent and to_id in self.parent:
            self.jumps[self.parent[from_id]].append(Jump(tuple(replaced_by), to_id))

    # --- placing a call

    def place(self, context, digests, answers, start, make_message, where, placed: Placed) -> str | None:
        """Place one call: ``context`` (with the ``digest`` of each) and ``answers`` are messages
        (``{"role", "parts"}``); new ones become ``make_message(message, id, is_answer)`` in ``placed``.
        Returns the first answer's id."""
        node, index = self._walk(None, digests, 0)
        if index < len(digests) and self._compaction(node, context, digests, index, start, where, placed):
            node, index = self._walk(node, digests, index)
        for message, content_digest in zip(context[index:], digests[index:]):
            node = self._add(node, message, content_digest, False, make_message, where, placed)
        first = None
        for answer in answers:
            answer_id = self._add(node, answer, digest(answer), True, make_message, where, placed)
            first = first or answer_id
        if first is not None and (start, first) not in self.calls:
            insort(self.calls, (start, first))
        return first

    def _walk(self, node, digests, index):
        """How far the context follows the tree from ``node``: (the last message it reaches, the index of
        the first it does not)."""
        while index < len(digests):
            child = message_id(node, digests[index])
            if child in self.parent:
                node, index = child, index + 1
                continue
            jump = next((j for j in self.jumps.get(node, ()) if tuple(digests[index:index + len(j.replaced_by)])
                         == j.replaced_by), None)
            if jump is None:
                break
            node, index = jump.to_id, index + len(jump.replaced_by)
        return node, index

    def _add(self, node, message, content_digest, is_answer, make_message, where, placed):
        child = message_id(node, content_digest)
        if child not in self.parent:
            self.parent[child], self.digests[child] = node, content_digest
            placed.messages.append(SourceMessage(make_message(message, child, is_answer), node, where))
        return child

    # --- compaction

    def _compaction(self, node, context, digests, index, start, where, placed) -> bool:
        """Whether the context's divergence at ``node`` is the agent's compaction; if so its overlay is
        added and the jump it makes is known (see the module's docstring)."""
        rest = digests[index:]
        if node is None or len(rest) < 2:
            return False  # nothing shared, or one new message at the end: a new prompt, an edit, a branch
        lost = self._previous_path(node, start)
        lost_digests = [self.digests[m] for m in lost]
        on_path = set(lost_digests)
        summary_at = next((k for k, d in enumerate(rest) if d not in on_path), None)
        if not lost or summary_at is None:
            return False  # the agent kept only messages of the path: a truncation, told as a branch
        after = rest[summary_at + 1:]
        kept_from = next((j for j in range(1, len(lost)) if after and lost_digests[j] == after[0]), len(lost))
        dropped = lost[:kept_from]
        replaced_by = tuple(rest[:summary_at + 1])
        summary = "\n\n".join(filter(None, (_text_of(m) for m in context[index:index + summary_at + 1])))
        self.jumps[node].append(Jump(replaced_by, dropped[-1]))
        placed.overlays.append(SourceOverlay(dropped[0], dropped[-1], summary or "(a compaction with no text)",
                                             {REPLACED_KEY: list(replaced_by), "dropped_messages": len(dropped)},
                                             where))
        return True

    def _previous_path(self, node, start) -> list[str]:
        """The messages after ``node`` on the path of the latest call before ``start`` that went through it."""
        for call_start, answer in reversed(self.calls):
            if call_start >= start:
                continue
            path, at = [], answer
            while at is not None and at != node:
                path.append(at)
                at = self.parent.get(at)
            if at == node and path:
                return path[::-1]
        return []


def _text_of(message) -> str:
    return "\n".join(p["text"] for p in message["parts"] if p.get("type") == "text" and p["text"].strip())
