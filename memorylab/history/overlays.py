"""Applying compaction overlays to a root-to-leaf path (pure functions, no I/O).

An overlay covers the range ``from_id .. to_id`` of one branch. It applies to a path only when both
ends are on it, so a summary made on one branch never shows on a sibling branch that shares only
the start. When several overlays start at the same message the newest wins: that is how a growing
summary supersedes the previous one. The covered messages stay stored; only the read changes, and a
pinned message in the range is read back whole right after the summary (``pins``).
"""
from itertools import count
from operator import itemgetter

from ..shapes import Message, Messages, Overlay, Part
from ..tokens import estimate_message_tokens
from .pins import kept_with_partners, pinned_ids_of

SUMMARY_ID_PREFIX = "compaction_"


def summary_message(overlay, covered, parent_id=None) -> Message:
    """The synthetic assistant message that stands in for ``covered`` on read, under ``parent_id``
    (default: the parent of the first covered message)."""
    parts: list[Part] = [{"type": "text", "text": overlay["summary"]}]
    return {
        "id": f"{SUMMARY_ID_PREFIX}{overlay['id']}",
        "role": "assistant",
        "parts": parts,
        "created_at": overlay["created_at"],
        "metadata": {
            "compaction": {
                "overlay_id": overlay["id"],
                "from_id": overlay["from_id"],
                "to_id": overlay["to_id"],
                "covered_messages": len(covered),
                "covered_tokens": sum(m.get("tokens", 0) for m in covered),
            }
        },
        "parent_id": covered[0].get("parent_id") if parent_id is None and covered else parent_id,
        "tokens": estimate_message_tokens({"parts": parts}),
    }


def is_summary_message(message) -> bool:
    return str(message.get("id", "")).startswith(SUMMARY_ID_PREFIX)


def shown_overlay_ids(history) -> set[int]:
    """The ids of the overlays whose summaries an overlaid ``history`` reads (the others are
    superseded, or on another branch)."""
    return {message["metadata"]["compaction"]["overlay_id"] for message in history if is_summary_message(message)}


def visible_overlays(path, overlays) -> dict[int, tuple[Overlay, int]]:
    """{start index: (overlay, end index)} for the overlays that apply to ``path``."""
    index = dict(zip(map(itemgetter("id"), path), count()))  # in C: a 10k-message path is read often
    chosen = {}
    for overlay in sorted(overlays, key=lambda o: o["id"]):
        start, end = index.get(overlay["from_id"]), index.get(overlay["to_id"])
        if start is not None and end is not None and start <= end:
            chosen[start] = (overlay, end)
    return chosen


def apply_overlays(path, overlays, pinned_ids=None) -> Messages:
    """``path`` with each visible overlay's range replaced by its summary message (one that starts
    inside an earlier one's range is hidden by it), followed by the range's pinned messages.

    ``pinned_ids`` defaults to the pins ``path`` carries (a ``Session.get_history`` read); the result
    carries the same pins, so planning a compaction on it respects them.
    """
    pinned_ids = pinned_ids_of(path, pinned_ids)
    chosen = visible_overlays(path, overlays) if overlays else {}
    result, i = Messages(), 0
    for start in sorted(chosen):
        if start >= i:
            overlay, end = chosen[start]
            result += path[i:start]
            result += summarized_range(overlay, path[start:end + 1], pinned_ids)
            i = end + 1
    result += path[i:]
    result.pinned_ids = pinned_ids
    return result


def summarized_range(overlay, covered, pinned_ids) -> list[Message]:
    """What an overlay's range reads as: its summary, then the pinned messages in it (with their tool
    partners), whole and in their order."""
    kept = kept_with_partners(covered, pinned_ids)
    if not kept:
        return [summary_message(overlay, covered)]
    summarized = [message for message in covered if message["id"] not in kept]
    summary = summary_message(overlay, summarized, parent_id=covered[0].get("parent_id"))
    summary["metadata"]["compaction"]["kept_pinned"] = [message["id"] for message in covered if message["id"] in kept]
    return [summary, *(message for message in covered if message["id"] in kept)]
