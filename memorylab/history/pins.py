"""Pins: messages a compaction never summarizes away.

A pinned message inside the range of an overlay is read back whole, right after the overlay's
summary, and the compaction planner leaves it out of the transcript it asks a model to summarize.
A pin holds the tool traffic it belongs to: pinning a tool call keeps the message with its result,
and pinning a result keeps its call, so a pin never leaves a provider an orphaned pair.
"""
from ..errors import InvalidInputError
from ..messages import is_tool_part

MAX_PIN_NOTE_CHARS = 2000
"""A pin's note says why the message matters, in a sentence or a short paragraph."""


def pin_note_problem(note) -> str | None:
    """Why ``note`` cannot be a pin's note (not text, or longer than ``MAX_PIN_NOTE_CHARS`` once stripped), or None."""
    if not isinstance(note, str):
        return f"a pin's note must be text, got {type(note).__name__}"
    if len(note.strip()) > MAX_PIN_NOTE_CHARS:
        return (f"a pin's note holds at most {MAX_PIN_NOTE_CHARS:,} characters, got {len(note.strip()):,}: "
                "say why the message matters in a sentence or two")
    return None


def check_pin_note(note) -> str:
    """``note`` stripped, or InvalidInputError saying what is wrong with it."""
    problem = pin_note_problem(note)
    if problem:
        raise InvalidInputError(problem)
    return note.strip()


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
    call_ids = {message["id"]: ids for message in messages
                if (ids := {part["toolCallId"] for part in message.get("parts") or () if is_tool_part(part)})}
    return with_tool_partners(kept, call_ids)


def with_tool_partners(kept, call_ids) -> set:
    """``kept`` (message ids) and the ids of the messages sharing a tool call id with one of them;
    ``call_ids`` maps a message id to the call ids of its tool parts (one without any may be left out)."""
    calls = set().union(*(call_ids.get(message_id, ()) for message_id in kept))
    return set(kept) | {message_id for message_id, ids in call_ids.items() if not calls.isdisjoint(ids)}
