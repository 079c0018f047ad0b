"""Pins: messages a compaction never summarizes away.

A pinned message inside the range of an overlay is read back whole, right after the overlay's
summary, and the compaction planner leaves it out of the transcript it asks a model to summarize.
A pin holds the tool traffic it belongs to: pinning a tool call keeps the message with its result,
and pinning a result keeps its call, so a pin never leaves a provider an orphaned pair.
"""
from ..messages import is_tool_part


def pinned_ids_of(messages, pinned_ids=None) -> frozenset:
    """The pins that apply to ``messages``: ``pinned_ids`` when given, else those the history carries
    (``Session.get_history`` attaches its session's pins as ``pinned_ids``)."""
    if pinned_ids is None:
        pinned_ids = getattr(messages, "pinned_ids", ())
    return frozenset(pinned_ids)


def kept_with_partners(messages, pinned_ids) -> set:
    """The ids of the pinned messages among ``messages`` and of the messages that share a tool call
    id with one of them (the call of a pinned result, the results of a pinned call)."""
    if not pinned_ids:
        return set()
    kept = {message["id"] for message in messages if message["id"] in pinned_ids}
    if not kept:
        return kept
    calls = {part["toolCallId"] for message in messages if message["id"] in kept
             for part in message.get("parts") or () if is_tool_part(part)}
    if calls:
        kept.update(message["id"] for message in messages
                    if any(is_tool_part(part) and part["toolCallId"] in calls for part in message.get("parts") or ()))
    return kept
