"""Tool-pair integrity: does every tool call on a path have its result, and every result its call?

Providers refuse a request whose history holds a tool result without its call, or a call followed
by other turns without its result. A path can come to hold one after an import, a branch, a deleted
message or an overlay whose summary replaces a call and not its result. A call answers itself when
its part carries an ``output`` (as ``to_openai`` sends it); otherwise a later ``role: "tool"``
message answers it. A call followed only by tool traffic (results, further calls) is still waiting
for its result, not an orphan: a path may end in the middle of a tool round.

``lint_tool_pairs`` lints every root-to-leaf path of a session with its overlays applied, in one
depth-first walk per distinct set of overlays that apply, undoing each message's effect when the
walk backs out of it: a 20,000-message tree with 200 branches is linted without building a path.
"""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import asdict, dataclass

from ..messages import is_tool_part
from ..shapes import Messages
from .pins import kept_with_partners

ORPHAN_RESULT, ORPHAN_CALL = "orphan_result", "orphan_call"
SPLIT_BY_OVERLAY, DUPLICATE_CALL_ID = "split_by_overlay", "duplicate_call_id"
KINDS = (ORPHAN_RESULT, ORPHAN_CALL, SPLIT_BY_OVERLAY, DUPLICATE_CALL_ID)
REJECTED_KINDS = (ORPHAN_RESULT, ORPHAN_CALL, SPLIT_BY_OVERLAY)
"""The kinds a provider rejects outright: ``ChatRunner`` refuses (or repairs) a request holding one."""
MISSING_RESULT = "error: no result was recorded"
"""The output a repair gives a call that has none."""


@dataclass(frozen=True)
class ToolPairFinding:
    """One tool-pair problem: its kind, the messages involved, the call's id, the first leaf whose path
    holds it (``paths`` counts every path that does) and a sentence naming the message to fix."""

    kind: str
    message_ids: tuple
    tool_call_id: str
    leaf_id: str
    detail: str
    paths: int = 1

    def to_dict(self) -> dict:
        return {**asdict(self), "message_ids": list(self.message_ids)}


def lint_tool_pairs(session) -> list[ToolPairFinding]:
    """Every tool-pair problem on any root-to-leaf path of ``session``, overlays applied; each once,
    in tree order, however many branches share it. Reads the session's text-less outline: ids, roles
    and tool calls, without any text or tool payload, so a 200,000-message session lints in bounded memory."""
    with session.store.snapshot():
        return lint_tree(session.storage.outline(with_text=False), session.get_compactions(),
                         session.storage.pinned_ids())


def lint_path(messages) -> list[ToolPairFinding]:
    """The tool-pair problems of one history as it is sent (``Session.get_history``: summaries are
    plain messages there, so a call split by an overlay shows as an orphan)."""
    walk = _Walk()
    for depth, message in enumerate(messages):
        walk.visit(message, depth, None)
    leaf_id = messages[-1]["id"] if messages else None
    return [ToolPairFinding(kind, ids, call_id, leaf_id, detail) for kind, ids, call_id, detail in walk.at_leaf()]


def repair_path(messages) -> Messages:
    """``messages`` the way providers accept them: an orphan result is left out, an orphan call gets
    the output ``MISSING_RESULT``. Pure: the stored messages are copied, never changed."""
    fixes = {}
    for finding in lint_path(messages):
        if finding.kind in (ORPHAN_RESULT, ORPHAN_CALL):
            fixes.setdefault(finding.message_ids[-1], {})[finding.tool_call_id] = finding.kind
    repaired = Messages()
    for message in messages:
        fix = fixes.get(message["id"])
        if fix is None:
            repaired.append(message)
            continue
        parts = [_repaired_part(part, fix) for part in message["parts"]]
        parts = [part for part in parts if part is not None]
        if parts:
            repaired.append({**message, "parts": parts})
    return repaired


def _repaired_part(part, fix):
    kind = fix.get(part.get("toolCallId")) if is_tool_part(part) else None
    if kind == ORPHAN_RESULT:
        return None
    if kind == ORPHAN_CALL:
        return {**part, "state": "output-error", "output": MISSING_RESULT}
    return part


def lint_tree(messages, overlays, pinned_ids=()) -> list[ToolPairFinding]:
    """``lint_tool_pairs`` on messages (parents first, as ``Session.get_all_messages`` reads them),
    overlays and pins already read. A pinned message and its tool partners stay visible under a summary."""
    tree = _Tree(messages, overlays, kept_with_partners(messages, frozenset(pinned_ids)))
    found = {}  # (kind, message ids, call id) -> [detail, first leaf, paths]
    for covers, leaves in tree.leaves_by_covers().items():
        for leaf_id, findings in tree.walk(covers, leaves):
            for kind, message_ids, call_id, detail in findings:
                entry = found.setdefault((kind, message_ids, call_id), [detail, leaf_id, 0])
                entry[2] += 1
    flagged = {finding_ids[-1] for _, finding_ids, _ in found}
    order = {message_id: i for i, message_id in enumerate(tree.messages) if message_id in flagged}
    return sorted((ToolPairFinding(kind, ids, call_id, leaf_id, detail, paths)
                   for (kind, ids, call_id), (detail, leaf_id, paths) in found.items()),
                  key=lambda f: (order.get(f.message_ids[-1], -1), KINDS.index(f.kind)))


class _Tree:
    """A session's messages by id, children and depth, and which overlays apply to each leaf's path."""

    def __init__(self, messages, overlays, kept=frozenset()):
        self.messages = {m["id"]: m for m in messages}
        self.kept = kept
        self.children = {message_id: [] for message_id in self.messages}
        self.parent = {}
        self.depth = {}
        self.roots = []
        for message_id, message in self.messages.items():
            parent = message.get("parent_id")
            if parent in self.depth:  # parents come first; one that is missing makes a root
                self.parent[message_id] = parent
                self.children[parent].append(message_id)
                self.depth[message_id] = self.depth[parent] + 1
            else:
                self.roots.append(message_id)
                self.depth[message_id] = 0
        self.overlays = [o for o in sorted(overlays, key=lambda o: o["id"]) if self._on_one_path(o)]

    def _on_one_path(self, overlay):
        start, end = overlay["from_id"], overlay["to_id"]
        if start not in self.depth or end not in self.depth or self.depth[start] > self.depth[end]:
            return False
        while self.depth[end] > self.depth[start]:
            end = self.parent[end]
        return end == start

    def leaves_by_covers(self):
        """{the overlays applied to a path, as (start depth, end depth, overlay id) triples: its leaves},
        leaves in tree order. Most sessions have one key; a branch under an overlay's end has another."""
        ending = {}
        for overlay in self.overlays:
            ending.setdefault(overlay["to_id"], []).append(overlay)
        above = {}  # message id -> overlays ending on its path
        for message_id in self.messages:
            inherited = above.get(self.parent.get(message_id), ())
            own = ending.get(message_id)
            above[message_id] = inherited + tuple(own) if own else inherited
        groups = {}
        for message_id, children in self.children.items():
            if not children:
                groups.setdefault(self._applied(above[message_id]), []).append(message_id)
        return groups

    def _applied(self, candidates):
        """``apply_overlays``'s choice, in depths: the newest of the overlays starting at one message,
        and none that starts inside the range of an earlier one."""
        newest = {self.depth[o["from_id"]]: o for o in sorted(candidates, key=lambda o: o["id"])}
        applied, free_from = [], 0
        for start in sorted(newest):
            if start >= free_from:
                overlay = newest[start]
                free_from = self.depth[overlay["to_id"]] + 1
                applied.append((start, free_from - 1, overlay["id"]))
        return tuple(applied)

    def walk(self, covers, leaves):
        """(leaf id, its findings as tuples) for each of ``leaves``, whose paths all have ``covers``
        applied: one depth-first walk over the union of their paths."""
        on_paths = set()
        for leaf in leaves:
            while leaf is not None and leaf not in on_paths:
                on_paths.add(leaf)
                leaf = self.parent.get(leaf)
        starts = [start for start, _, _ in covers]
        walk = _Walk()
        # Each entry carries the walk's state after its parent: going back to it backs out of the
        # messages of the branch walked before (nothing to undo along a chain of only children).
        stack = [(root, walk.mark()) for root in reversed(self.roots) if root in on_paths]
        while stack:
            message_id, after_parent = stack.pop()
            walk.undo(after_parent)
            depth = self.depth[message_id]
            at = bisect_right(starts, depth) - 1
            covered = at >= 0 and covers[at][1] >= depth and message_id not in self.kept
            walk.visit(self.messages[message_id], depth, covers[at] if covered else None)
            children = self.children[message_id]
            if not children:
                yield message_id, walk.at_leaf()
            elif len(children) == 1:
                stack.append((children[0], walk.mark()))  # an only child is on the paths of its parent's leaves
            else:
                mark = walk.mark()
                stack.extend((child, mark) for child in reversed(children) if child in on_paths)


class _Walk:
    """The state of a walk down one path: calls without a result yet, every call id seen, calls that a
    summary hides, where the last turn was, and the problems found so far. Every change is logged so
    that ``undo`` can back out of a message when a depth-first walk leaves it."""

    def __init__(self):
        self.open = {}     # call id -> (message id, depth): visible calls still waiting for a result
        self.called = {}   # call id -> message id of its visible call
        self.hidden = {}   # call id -> (message id, overlay id): calls a summary replaces
        self.last_turn = -1
        self.found = []
        self._log = []

    def mark(self):
        return len(self._log), len(self.found), self.last_turn

    def undo(self, mark):
        length, found, self.last_turn = mark
        while len(self._log) > length:
            table, key, old = self._log.pop()
            if old is _ABSENT:
                table.pop(key, None)
            else:
                table[key] = old
        del self.found[found:]

    def _set(self, table, key, value):
        self._log.append((table, key, table.get(key, _ABSENT)))
        table[key] = value

    def _pop(self, table, key):
        self._log.append((table, key, table[key]))
        return table.pop(key)

    def visit(self, message, depth, cover):
        """Take in the message at ``depth``; ``cover`` is the applied overlay's (start, end, id) when a
        summary replaces it, else None."""
        role = message["role"]
        if cover is not None:
            if depth == cover[0]:
                self.last_turn = depth  # the summary stands where its range starts
            if role in ("assistant", "tool"):
                self._hide(message, role, cover[2])
            return
        if role == "tool":
            for part in message["parts"]:
                if is_tool_part(part):
                    self._result(message["id"], part["toolCallId"])
        elif role == "assistant":
            for part in message["parts"]:
                if is_tool_part(part):
                    self._call(message["id"], part, depth)
        if not _is_tool_traffic(message):
            self.last_turn = depth

    def _call(self, message_id, part, depth):
        call_id = part["toolCallId"]
        first = self.called.get(call_id)
        if first is not None:
            self.found.append((DUPLICATE_CALL_ID, (first, message_id), call_id,
                               (f"{message_id} calls {call_id!r} again, already called in {first}: give the call "
                                f"in {message_id} an id of its own, or delete one of the two")))
        self._set(self.called, call_id, message_id)
        if "output" not in part:
            self._set(self.open, call_id, (message_id, depth))

    def _result(self, message_id, call_id):
        if call_id in self.open:
            self._pop(self.open, call_id)
        elif call_id in self.hidden:
            call, overlay = self.hidden[call_id]
            self.found.append((SPLIT_BY_OVERLAY, (call, message_id), call_id,
                               (f"overlay {overlay}'s summary replaces the call {call_id!r} in {call} but not its "
                                f"result in {message_id}: end the overlay at {message_id} or later, or before {call}")))
        elif call_id in self.called:
            self.found.append((ORPHAN_RESULT, (message_id,), call_id,
                               (f"{message_id} answers {call_id!r}, whose call in {self.called[call_id]} already "
                                f"has its result: delete the result in {message_id}")))
        else:
            self.found.append((ORPHAN_RESULT, (message_id,), call_id,
                               (f"{message_id} answers {call_id!r}, which no message before it on this path calls: "
                                f"delete the result in {message_id} or restore its call")))

    def _hide(self, message, role, overlay):
        for part in message["parts"]:
            if not is_tool_part(part):
                continue
            call_id = part["toolCallId"]
            if role == "assistant" and "output" not in part:
                self._set(self.hidden, call_id, (message["id"], overlay))
            elif role == "tool" and call_id in self.hidden:
                self._pop(self.hidden, call_id)  # call and result both replaced: nothing is sent of either
            elif role == "tool" and call_id in self.open:
                call, _ = self._pop(self.open, call_id)
                self.found.append((SPLIT_BY_OVERLAY, (call, message["id"]), call_id,
                                   (f"overlay {overlay}'s summary replaces the result of {call_id!r} in "
                                    f"{message['id']} but not its call in {call}: start the overlay at {call} or "
                                    f"earlier, or after {message['id']}")))

    def at_leaf(self):
        """The findings of the path walked so far, taken as a whole path: calls before the last turn
        that never got a result are orphans; those after it are still waiting."""
        orphans = [(ORPHAN_CALL, (message_id,), call_id,
                    (f"{message_id} calls {call_id!r} and no result follows on this path: add its result right "
                     f"after {message_id}, or delete the call"))
                   for call_id, (message_id, depth) in self.open.items() if depth < self.last_turn]
        return self.found + orphans


_ABSENT = object()


def _is_tool_traffic(message):
    """A tool result, or an assistant message of tool calls only (the parallel-call layout)."""
    parts = message["parts"]
    return message["role"] == "tool" or (
        message["role"] == "assistant" and any(is_tool_part(p) for p in parts)
        and all(is_tool_part(p) or p.get("type") == "reasoning" for p in parts))
