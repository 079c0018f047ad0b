"""A long branch read a page at a time: ``Session.iter_history`` and ``Session.plan_compaction``.

A branch is a few seq ranges when its stretches link up (``PagedBranchReads.branch_ranges``), else the
seqs of a walk up its parent links; its messages come a page at a time. A storage that cannot page
(only the core ``SessionStorage``) gives its branch whole, overlaid as ``get_history`` overlays it.
Which overlays apply is ``apply_overlays``'s own decision, taken on the messages at their ends alone;
a summarized range is read through for its counts and its pinned messages, so a read holds a page and
the few messages it gives back whole. Each page is a statement of its own: wrap a read in
``store.snapshot()`` to have all of its pages see one state of a store that others write to.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import islice

from ..messages import is_tool_part
from ..shapes import Message, Overlay
from ..store.capabilities import offers
from ..store.capabilities import pinned_ids as stored_pins
from ..store.protocols import PagedBranchReads, SessionStorage
from .compaction import PlanLayout, lay_out_plan, stored_tokens, tool_result_outputs, transcript_lines
from .overlays import apply_overlays, is_summary_message, summary_message
from .pins import kept_with_partners

TRANSCRIPT_PAGE = 1000
"""Messages of a stored plan's transcript rendered at a time."""

class _Branch:
    """Where the branch ending at a leaf lies: seq ranges (positions are seqs), or a walk's seqs."""

    def __init__(self, storage, leaf_id, page_size):
        self.storage, self.page_size = storage, page_size
        self.ranges = storage.branch_ranges(leaf_id)
        self.walked: list[int] = storage.branch_seqs(leaf_id) if self.ranges is None else []

    def positions(self, seqs) -> dict[int, int]:
        """``{seq: position}`` of those of ``seqs`` that are on the branch (positions order the branch)."""
        if self.ranges is not None:
            return {seq: seq for seq in seqs if any(low <= seq <= high for low, high in self.ranges)}
        wanted = set(seqs)
        return {seq: i for i, seq in enumerate(self.walked) if seq in wanted}

    def pages(self) -> Iterator[list[Message]]:
        if self.ranges is not None:
            for low, high in self.ranges:
                yield from self.storage.messages_between(low, high, page_size=self.page_size)
        else:
            for start in range(0, len(self.walked), self.page_size):
                yield self.storage.messages_at(self.walked[start:start + self.page_size])


class _Tally:
    """The summarized messages of a range as ``summary_message`` reads them: how many, their tokens
    (one sum) and the first of them; the messages themselves are not kept."""

    def __init__(self):
        self.count, self.tokens, self.first = 0, 0, None

    def add(self, message):
        self.count += 1
        self.tokens += message.get("tokens", 0)
        self.first = self.first or message

    def __len__(self):
        return self.count

    def __iter__(self):
        yield {"tokens": self.tokens}

    def __getitem__(self, index):
        if index != 0 or self.first is None:
            raise IndexError(index)
        return self.first


class _Summarized:
    """One applied overlay, read through: what ``overlays.summarized_range`` gives for its range."""

    def __init__(self, overlay, pinned, pinned_ids, first):
        """``first``: the range's first message, which ``take`` is given first."""
        self.overlay, self.pinned, self.pinned_ids = overlay, pinned, pinned_ids
        self.summarized, self.kept, self.parent_id = _Tally(), [], first.get("parent_id")

    def take(self, message):
        # The pinned messages of the range are known up front, so each message's partnership with
        # them is decided as it passes, as kept_with_partners decides it on the whole range.
        if self.pinned and message["id"] in kept_with_partners([*self.pinned, message], self.pinned_ids):
            self.kept.append(message)
        else:
            self.summarized.add(message)

    def read(self) -> list[Message]:
        if not self.kept:
            return [summary_message(self.overlay, self.summarized)]
        summary = summary_message(self.overlay, self.summarized, parent_id=self.parent_id)
        summary["metadata"]["compaction"]["kept_pinned"] = [message["id"] for message in self.kept]
        return [summary, *self.kept]


def iter_history(storage: SessionStorage, snapshot, leaf_id, page_size) -> Iterator[Message]:
    """``Session.get_history(leaf_id)`` message by message (``leaf_id`` given), holding a page."""
    if not offers(storage, PagedBranchReads):
        with snapshot():
            path, overlays, pinned_ids = storage.path(leaf_id), storage.overlays(), stored_pins(storage)
        yield from apply_overlays(path, overlays, pinned_ids=pinned_ids)
        return
    with snapshot():
        branch = _Branch(storage, leaf_id, page_size)
        overlays = storage.overlays()
        pinned_ids = stored_pins(storage)
        ranges = _applied_ranges(storage, branch, overlays, pinned_ids) if overlays else {}
    reading = None
    for page in branch.pages():
        for message in page:
            if reading is None:
                applied = ranges.get(message["id"])
                if applied is None:
                    yield message
                    continue
                to_id, reading = applied[0], _Summarized(*applied[1:], pinned_ids, message)
            reading.take(message)
            if message["id"] == to_id:
                yield from reading.read()
                reading = None


def _applied_ranges(storage, branch, overlays, pinned_ids) -> dict[str, tuple[str, Overlay, list[Message]]]:
    """``{first id: (last id, overlay, pinned messages in between)}`` of the overlays that apply to the
    branch: those ``apply_overlays`` applies to the branch's messages at overlay ends and pins."""
    located = storage.located({overlay[end] for overlay in overlays for end in ("from_id", "to_id")} | pinned_ids)
    positions = branch.positions({seq for seq, _ in located.values()})
    on_branch = sorted(((positions[seq], message) for seq, message in located.values() if seq in positions),
                       key=lambda placed: placed[0])
    position = {message["id"]: at for at, message in on_branch}
    by_id = {overlay["id"]: overlay for overlay in overlays}
    ranges: dict[str, tuple[str, Overlay, list[Message]]] = {}
    for read in apply_overlays([message for _, message in on_branch], overlays, pinned_ids=frozenset()):
        if is_summary_message(read):
            span = read["metadata"]["compaction"]
            first, last = position[span["from_id"]], position[span["to_id"]]
            pinned = [message for at, message in on_branch if first <= at <= last and message["id"] in pinned_ids]
            ranges[span["from_id"]] = (span["to_id"], by_id[span["overlay_id"]], pinned)
    return ranges


# -- planning ------------------------------------------------------------------------------------


def plan_stored(history, pinned_ids, settings):
    """``plan_compaction(history)`` for ``history()``, a fresh iterator over an overlaid history each
    call: one read keeps each message's id, role, tokens and tool calls (a summary whole) and lays the
    plan out; a second keeps head, kept and tail and renders the transcript a page at a time."""
    rows, counts = [], []
    for message in history():
        rows.append(message if is_summary_message(message) else _planning_row(message))
        counts.append(stored_tokens(message))
    layout = lay_out_plan(rows, counts, pinned_ids, settings)
    if layout is None:
        return None
    results = {}
    for at in layout.summarized():
        if rows[at]["role"] == "tool":
            results.update(rows[at]["results"])
    del rows, counts
    head, kept, tail, transcript = _second_read(history(), layout, results)
    return layout.plan(head=head, middle=StoredMiddle(history, layout.middle), kept=kept, tail=tail,
                       transcript=transcript)


def _planning_row(message):
    """What ``lay_out_plan`` reads of a message (id, role, the call ids of its tool parts), and for a
    tool result the cut outputs a transcript shows (``tool_result_outputs``)."""
    row = {"id": message["id"], "role": message.get("role"),
           "parts": tuple({"type": part["type"], "toolCallId": part.get("toolCallId")}
                          for part in message.get("parts") or () if is_tool_part(part))}
    if row["role"] == "tool":
        row["results"] = tool_result_outputs([message])
    return row


def _second_read(messages, layout: PlanLayout, results):
    """Head, kept and tail messages of ``layout``, and its transcript rendered page by page."""
    kept_at, shown_at = set(layout.kept), set(layout.summarized())
    head, kept, tail, pages, page = [], [], [], [], []
    shown: set[str] = set()
    for at, message in enumerate(messages):
        if at < layout.head_end:
            head.append(message)
        elif at >= layout.tail_start:
            tail.append(message)
        elif at in kept_at:
            kept.append(message)
        elif at in shown_at:
            page.append(message)
            if len(page) == TRANSCRIPT_PAGE:
                pages.append("\n".join(transcript_lines(page, results, shown)))
                page = []
    pages.append("\n".join(transcript_lines(page, results, shown)))
    return head, kept, tail, "\n".join(text for text in pages if text)


class StoredMiddle(Sequence):
    """The middle of a plan made from the store: read from it (a page at a time) when iterated, so a
    plan over 200,000 messages does not hold them. Read-only; it reads the store as it is then."""

    def __init__(self, history, positions):
        self._history, self._positions = history, positions

    def __len__(self):
        return len(self._positions)

    def __iter__(self):
        wanted = iter(self._positions)
        next_at = next(wanted, None)
        for at, message in enumerate(self._history()):
            if at == next_at:
                yield message
                next_at = next(wanted, None)
                if next_at is None:
                    return

    def __getitem__(self, index):
        if isinstance(index, slice):
            return list(islice(self, *index.indices(len(self))))
        if not -len(self) <= index < len(self):
            raise IndexError("the middle holds no such message")
        return next(islice(self, index % len(self), None))

    def __repr__(self):
        return f"<StoredMiddle of {len(self)} messages>"
