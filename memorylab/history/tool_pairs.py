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

from array import array
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from ..messages import is_tool_part
from ..shapes import Message, Messages
from ..store import capabilities
from .pins import with_tool_partners

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
    in tree order, however many branches share it. Reads the session's tool outline a page at a time
    (ids, roles and tool calls, no text or tool payload) into a tree of a few dozen bytes a message, so
    a 200,000-message session lints in bounded memory. A session without a tool part has nothing to
    lint, which one query tells."""
    with session.snapshot():
        if not capabilities.has_tool_parts(session.storage):
            return []
        return _lint(_Tree(capabilities.tool_outline(session.storage), session.get_compactions(),
                           capabilities.pinned_ids(session.storage)))


def lint_tree(messages, overlays, pinned_ids=()) -> list[ToolPairFinding]:
    """``lint_tool_pairs`` on messages (parents first, as ``Session.get_all_messages`` reads them),
    overlays and pins already read. A pinned message and its tool partners stay visible under a summary."""
    rows = ((m["id"], m.get("parent_id"), m["role"], m.get("parts") or ()) for m in messages)
    return _lint(_Tree(rows, overlays, pinned_ids))


def _lint(tree):
    found: dict[tuple[str, tuple, str], list] = {}  # (kind, message ids, call id) -> [detail, first leaf, paths]
    for covers, leaves in tree.leaves_by_covers().items():
        for leaf_id, findings in tree.walk(covers, leaves):
            for kind, message_ids, call_id, detail in findings:
                entry = found.setdefault((kind, message_ids, call_id), [detail, leaf_id, 0])
                entry[2] += 1
    order = tree.index
    return sorted((ToolPairFinding(kind, ids, call_id, leaf_id, detail, paths)
                   for (kind, ids, call_id), (detail, leaf_id, paths) in found.items()),
                  key=lambda f: (order.get(f.message_ids[-1], -1), KINDS.index(f.kind)))


def lint_path(messages) -> list[ToolPairFinding]:
    """The tool-pair problems of one history as it is sent (``Session.get_history``: summaries are
    plain messages there, so a call split by an overlay shows as an orphan)."""
    if not messages:
        return []
    walk = _Walk()
    for depth, message in enumerate(messages):
        parts = message.get("parts") or ()
        walk.visit(message["id"], message["role"], _calls(parts), _is_tool_traffic(message["role"], parts),
                   depth, None)
    leaf_id = messages[-1]["id"]
    return [ToolPairFinding(kind, ids, call_id, leaf_id, detail) for kind, ids, call_id, detail in walk.at_leaf()]


def repair_path(messages: Sequence[Message]) -> Messages:
    """``messages`` the way providers accept them: an orphan result is left out, an orphan call gets
    the output ``MISSING_RESULT``. Pure: the stored messages are copied, never changed."""
    fixes: dict[str, dict[str, str]] = {}
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


class _Tree:
    """A session's tree as the lint walks it, one slot per message in the order read: ids, parents,
    depths and children as arrays of slot numbers, roles as bytes, and the tool calls of the few
    messages that hold one. An index keeps every id for findings; no message is kept whole."""

    def __init__(self, rows, overlays, pinned_ids=()):
        self.ids: list[str] = []
        self.index: dict[str, int] = {}
        self.parent, self.depth = array("l"), array("l")
        self.first_child, self.next_sibling, last_child = array("l"), array("l"), array("l")
        self.kinds = bytearray()  # _ROLE_CODES of the role, plus _TRAFFIC for tool traffic
        self.calls: dict[int, tuple] = {}  # slot -> ((call id, answered), ...) of its tool parts
        self.roots: list[int] = []
        for message_id, parent_id, role, parts in rows:
            slot = len(self.ids)
            self.ids.append(message_id)
            self.index[message_id] = slot
            parent = self.index.get(parent_id, -1)  # parents come first; one that is missing makes a root
            self.parent.append(parent)
            self.first_child.append(-1)
            self.next_sibling.append(-1)
            last_child.append(-1)
            if parent < 0:
                self.roots.append(slot)
                self.depth.append(0)
            else:
                self.depth.append(self.depth[parent] + 1)
                if last_child[parent] < 0:
                    self.first_child[parent] = slot
                else:
                    self.next_sibling[last_child[parent]] = slot
                last_child[parent] = slot
            calls = _calls(parts)
            if calls:
                self.calls[slot] = calls
            self.kinds.append(_ROLE_CODES.get(role, 0) | (_TRAFFIC if _is_tool_traffic(role, parts) else 0))
        self.kept = self._with_partners(pinned_ids)
        self.overlays = [o for o in sorted(overlays, key=lambda o: o["id"]) if self._on_one_path(o)]

    def _with_partners(self, pinned_ids):
        """The slots of the pinned messages and of those sharing a tool call with one (``pins``)."""
        pinned = {self.ids[slot] for slot in map(self.index.get, pinned_ids) if slot is not None}
        if not pinned:
            return frozenset()
        call_ids = {self.ids[slot]: {call_id for call_id, _ in calls} for slot, calls in self.calls.items()}
        return frozenset(self.index[message_id] for message_id in with_tool_partners(pinned, call_ids))

    def children(self, slot):
        child = self.first_child[slot]
        while child >= 0:
            yield child
            child = self.next_sibling[child]

    def _on_one_path(self, overlay):
        start, end = self.index.get(overlay["from_id"]), self.index.get(overlay["to_id"])
        if start is None or end is None or self.depth[start] > self.depth[end]:
            return False
        while self.depth[end] > self.depth[start]:
            end = self.parent[end]
        return end == start

    def leaves_by_covers(self):
        """{the overlays applied to a path, as (start depth, end depth, overlay id) triples: its leaves},
        leaves in tree order. Most sessions have one key; a branch under an overlay's end has another."""
        ending: dict[int, list[int]] = {}  # slot -> positions in self.overlays of those ending there
        for position, overlay in enumerate(self.overlays):
            ending.setdefault(self.index[overlay["to_id"]], []).append(position)
        # Which overlays end on each message's path, as a number into ``above``: few distinct sets.
        above: list[tuple[int, ...]] = [()]
        numbered: dict[tuple[int, ...], int] = {(): 0}
        above_of = array("l", [0]) * len(self.ids)
        for slot, parent in enumerate(self.parent):
            inherited = above_of[parent] if parent >= 0 else 0
            own = ending.get(slot)
            if own:
                overlays = above[inherited] + tuple(own)
                inherited = numbered.setdefault(overlays, len(above))
                if inherited == len(above):
                    above.append(overlays)
            above_of[slot] = inherited
        applied: dict[int, tuple] = {}
        groups: dict[tuple, list[int]] = {}
        for slot, first_child in enumerate(self.first_child):
            if first_child < 0:
                number = above_of[slot]
                if number not in applied:
                    applied[number] = self._applied(above[number])
                groups.setdefault(applied[number], []).append(slot)
        return groups

    def _applied(self, candidates):
        """``apply_overlays``'s choice among ``candidates`` (positions in ``overlays``), in depths: the
        newest of the overlays starting at one message, and none that starts inside the range of an
        earlier one."""
        def depth_of(message_id):
            return self.depth[self.index[message_id]]

        overlays = sorted((self.overlays[position] for position in candidates), key=lambda o: o["id"])
        newest = {depth_of(o["from_id"]): o for o in overlays}
        applied, free_from = [], 0
        for start in sorted(newest):
            if start >= free_from:
                overlay = newest[start]
                free_from = depth_of(overlay["to_id"]) + 1
                applied.append((start, free_from - 1, overlay["id"]))
        return tuple(applied)

    def walk(self, covers, leaves):
        """(leaf id, its findings as tuples) for each of ``leaves`` (slots), whose paths all have
        ``covers`` applied: one depth-first walk over the union of their paths."""
        on_paths = bytearray(len(self.ids))
        for leaf in leaves:
            while leaf >= 0 and not on_paths[leaf]:
                on_paths[leaf] = 1
                leaf = self.parent[leaf]
        starts = [start for start, _, _ in covers]
        walk = _Walk()
        # Each entry carries the walk's state after its parent: going back to it backs out of the
        # messages of the branch walked before (nothing to undo along a chain of only children).
        stack = [(root, walk.mark()) for root in reversed(self.roots) if on_paths[root]]
        while stack:
            slot, after_parent = stack.pop()
            walk.undo(after_parent)
            depth = self.depth[slot]
            at = bisect_right(starts, depth) - 1
            covered = at >= 0 and covers[at][1] >= depth and slot not in self.kept
            kind = self.kinds[slot]
            walk.visit(self.ids[slot], _ROLES[kind & _ROLE_MASK], self.calls.get(slot, ()), bool(kind & _TRAFFIC),
                       depth, covers[at] if covered else None)
            first_child = self.first_child[slot]
            if first_child < 0:
                yield self.ids[slot], walk.at_leaf()
            elif self.next_sibling[first_child] < 0:
                stack.append((first_child, walk.mark()))  # an only child is on the paths of its parent's leaves
            else:
                mark = walk.mark()
                stack.extend((child, mark) for child in reversed(list(self.children(slot))) if on_paths[child])


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

    def visit(self, message_id, role, calls, traffic, depth, cover):
        """Take in the message at ``depth``: its role, its tool parts as (call id, answered) pairs, and
        whether it is tool traffic. ``cover`` is the applied overlay's (start, end, id) when a summary
        replaces it, else None."""
        if cover is not None:
            if depth == cover[0]:
                self.last_turn = depth  # the summary stands where its range starts
            if role in ("assistant", "tool"):
                self._hide(message_id, role, calls, cover[2])
            return
        if role == "tool":
            for call_id, _ in calls:
                self._result(message_id, call_id)
        elif role == "assistant":
            for call_id, answered in calls:
                self._call(message_id, call_id, answered, depth)
        if not traffic:
            self.last_turn = depth

    def _call(self, message_id, call_id, answered, depth):
        first = self.called.get(call_id)
        if first is not None:
            self.found.append((DUPLICATE_CALL_ID, (first, message_id), call_id,
                               (f"{message_id} calls {call_id!r} again, already called in {first}: give the call "
                                f"in {message_id} an id of its own, or delete one of the two")))
        self._set(self.called, call_id, message_id)
        if not answered:
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

    def _hide(self, message_id, role, calls, overlay):
        for call_id, answered in calls:
            if role == "assistant" and not answered:
                self._set(self.hidden, call_id, (message_id, overlay))
            elif role == "tool" and call_id in self.hidden:
                self._pop(self.hidden, call_id)  # call and result both replaced: nothing is sent of either
            elif role == "tool" and call_id in self.open:
                call, _ = self._pop(self.open, call_id)
                self.found.append((SPLIT_BY_OVERLAY, (call, message_id), call_id,
                                   (f"overlay {overlay}'s summary replaces the result of {call_id!r} in "
                                    f"{message_id} but not its call in {call}: start the overlay at {call} or "
                                    f"earlier, or after {message_id}")))

    def at_leaf(self):
        """The findings of the path walked so far, taken as a whole path: calls before the last turn
        that never got a result are orphans; those after it are still waiting."""
        orphans = [(ORPHAN_CALL, (message_id,), call_id,
                    (f"{message_id} calls {call_id!r} and no result follows on this path: add its result right "
                     f"after {message_id}, or delete the call"))
                   for call_id, (message_id, depth) in self.open.items() if depth < self.last_turn]
        return self.found + orphans


_ABSENT = object()


_ROLES = ("other", "assistant", "tool")
_ROLE_CODES = {role: code for code, role in enumerate(_ROLES)}
_ROLE_MASK, _TRAFFIC = 3, 4


def _calls(parts):
    """(call id, answered) for each tool part: a call answers itself when it carries an ``output``."""
    return tuple((part["toolCallId"], "output" in part) for part in parts if is_tool_part(part))


def _is_tool_traffic(role, parts):
    """A tool result, or an assistant message of tool calls only (the parallel-call layout)."""
    return role == "tool" or (
        role == "assistant" and any(is_tool_part(p) for p in parts)
        and all(is_tool_part(p) or p.get("type") == "reasoning" for p in parts))
