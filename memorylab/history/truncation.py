"""Micro-compaction: shortening single messages instead of summarizing ranges.

Two moments need it. On read, older messages are cut before they go to a model
(``truncate_older_messages``); before a write, one oversized message is shrunk so it fits a row
(``enforce_row_size_limit``). Both are pure: the input is never mutated, and every cut leaves a
marker saying how much went, so neither the model nor a reader mistakes a cut for the whole.
"""
import json
from operator import is_

from ..errors import InvalidMessageError
from ..messages import is_tool_part
from ..shapes import Messages
from ..tokens import compact_json, estimate_message_tokens
from ..validation import check_counts

ROW_SIZE_LIMIT_BYTES = 1_800_000
ROW_SIZE_KEY = "row_size_limit"
"""The metadata key of a shrunk message's record of what was cut."""
ROW_PREVIEW_CHARS = 2000
MASKED_OUTPUT_PREFIX = "[tool output masked: "
# A list item cut to fewer characters than this says nothing useful; it is counted as omitted instead.
MIN_ITEM_PREVIEW_CHARS = 20
MIN_OBJECT_ENTRY_CHARS = len('"":0,')
# The quotes and the comma around the "... [N more items]" string inside a cut list.
LIST_MARKER_OVERHEAD = len('"",')


def truncate_text(text, max_chars) -> str:
    """``text[:max_chars]`` plus a marker naming how many characters were cut.

    The same string object comes back when it fits, or when the marker would be longer than what it
    replaces: a cut must never make anything bigger.
    """
    removed = len(text) - max_chars
    if removed <= 0:  # most texts of a long branch fit: no marker to build
        return text
    marker = f"... [truncated {removed} chars]"
    if removed <= len(marker):
        return text
    return text[:max_chars] + marker


def longest_fitting(upper, fits):
    """The largest ``k`` in ``0..upper`` with ``fits(k)``, or None when not even 0 fits.

    ``fits`` must hold up to some ``k`` and fail above it, as "this cut still fits" does.
    """
    if not fits(0):
        return None
    low, high = 0, upper
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low


_as_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str).encode
"""Compact JSON, as rows store it; one encoder for every call (``json.dumps`` with options builds one
each time, a fifth of the cost of a small message)."""


def json_size(value):
    """Characters of ``value`` as compact JSON (a string counts its quotes and escapes)."""
    return len(_as_json(value))


def stored_bytes(value):
    """UTF-8 bytes of ``value`` as compact JSON: what a row holding it takes."""
    return len(_as_json(value).encode("utf-8"))


def shorten_json(value, budget):
    """``value`` with its JSON shape kept, cut so its compact JSON fits ``budget`` characters.

    Markers are not counted against the budget. Strings are cut with the truncation marker, objects
    keep every key with their values shortened, lists keep leading items and end with an
    ``"... [N more items]"`` string. Numbers, booleans and null cannot shrink, so a value whose keys
    and primitives alone exceed the budget comes back as small as its shape allows.
    """
    if not isinstance(value, (str, list, dict)) or json_size(value) <= budget:
        return value
    if isinstance(value, str):
        kept = longest_fitting(min(len(value), budget), lambda k: json_size(value[:k]) <= budget)
        return truncate_text(value, kept or 0)
    if isinstance(value, list):
        return _shorten_list(value, budget)
    return _shorten_object(value, budget)


def _shorten_list(items, budget):
    room = budget - len("[]") - LIST_MARKER_OVERHEAD
    kept: list = []
    for item in items:
        separator = 1 if kept else 0
        cost = separator + json_size(item)
        if cost <= room:
            kept.append(item)
            room -= cost
            continue
        preview_room = room - separator
        if preview_room >= MIN_ITEM_PREVIEW_CHARS or not kept:
            kept.append(shorten_json(item, max(preview_room, 0)))
        break
    omitted = len(items) - len(kept)
    if omitted:
        kept.append(f"... [{omitted} more item{'' if omitted == 1 else 's'}]")
    return kept


def _shorten_object(mapping, budget):
    # Every value gets an equal share of what the keys leave; values smaller than their share keep
    # whole and hand the rest on, so small fields (ids, counts) survive and big ones are cut.
    key_overhead = sum(json_size(str(key)) + len(":") for key in mapping) + len(mapping) - 1
    room = budget - len("{}") - key_overhead
    sizes = {key: json_size(value) for key, value in mapping.items()}
    shortened = {}
    for done, key in enumerate(sorted(mapping, key=sizes.__getitem__)):
        share = max(room // (len(mapping) - done), 0)
        value = shorten_json(mapping[key], share)
        room -= sizes[key] if value is mapping[key] else share
        shortened[key] = value
    return {key: shortened[key] for key in mapping}


def shorten_tool_output(output, max_chars):
    """A tool output cut to ``max_chars`` (string length for strings, compact JSON otherwise).

    The same object comes back when it fits or when cutting would not make it smaller.
    """
    if isinstance(output, str):
        return truncate_text(output, max_chars)
    if len(compact_json(output)) <= max_chars:
        return output
    shortened = shorten_json(output, max_chars)
    return shortened if json_size(shortened) < json_size(output) else output


def _with_value(mapping, key, value):
    """``mapping`` itself when ``value`` is already there, else a copy holding it."""
    return mapping if mapping.get(key) is value else {**mapping, key: value}


def truncate_older_messages(messages, *, keep_recent=4, max_tool_output_chars=500, max_text_chars=10000) -> Messages:
    """A copy of ``messages`` whose older messages have long text and tool outputs cut.

    The last ``keep_recent`` messages, and every older message that needs no cut, are the same
    objects as in the input. Tool inputs are left alone (the model needs to see what it asked for).
    A cut message gets a fresh ``tokens`` estimate where it carried one.
    """
    check_counts(keep_recent=keep_recent, max_tool_output_chars=max_tool_output_chars, max_text_chars=max_text_chars)
    return _rewrite_older(messages, keep_recent,
                          lambda part: _truncate_part(part, max_tool_output_chars, max_text_chars))


def mask_older_tool_outputs(messages, *, keep_recent=4) -> Messages:
    """A copy of ``messages`` whose older tool outputs are each replaced by a one-line placeholder
    (observation masking): the text, reasoning and tool inputs stay whole, so the model still sees
    what it thought and did, only not what the tools returned (an output shorter than the
    placeholder stays). The last ``keep_recent`` messages,
    and older ones without a tool output, are the same objects as in the input."""
    check_counts(keep_recent=keep_recent)
    return _rewrite_older(messages, keep_recent, _mask_part)


def masked_output_placeholder(output) -> str:
    """What a masked tool output becomes: a note of its size, so the model knows it can re-run the tool."""
    return f"{MASKED_OUTPUT_PREFIX}{_output_chars(output)} characters; re-run the tool to see it]"


def _output_chars(output) -> int:
    return len(output) if isinstance(output, str) else len(compact_json(output))


def _mask_part(part):
    """A tool part with its output masked; one masked already, or no longer than its placeholder, is left."""
    if not (is_tool_part(part) and "output" in part) or str(part["output"]).startswith(MASKED_OUTPUT_PREFIX):
        return part
    placeholder = masked_output_placeholder(part["output"])
    return {**part, "output": placeholder} if len(placeholder) < _output_chars(part["output"]) else part


def _rewrite_older(messages, keep_recent, rewrite_part) -> Messages:
    """``messages`` with ``rewrite_part`` applied to every part of all but the last ``keep_recent``."""
    older = max(len(messages) - keep_recent, 0)
    return Messages([_rewrite_message(message, rewrite_part) for message in messages[:older]]
                    + list(messages[older:]))


def _rewrite_message(message, rewrite_part):
    parts = message.get("parts") or []
    cut = [rewrite_part(part) for part in parts]
    if all(map(is_, cut, parts)):
        return message
    truncated = {**message, "parts": cut}
    if "tokens" in message:
        truncated["tokens"] = estimate_message_tokens([truncated])
    return truncated


def _truncate_part(part, max_tool_output_chars, max_text_chars):
    if part.get("type") == "text" and isinstance(part.get("text"), str):
        return _with_value(part, "text", truncate_text(part["text"], max_text_chars))
    if is_tool_part(part) and "output" in part:
        return _with_value(part, "output", shorten_tool_output(part["output"], max_tool_output_chars))
    return part


def enforce_row_size_limit(message, max_bytes=ROW_SIZE_LIMIT_BYTES, *, size_bound=None) -> dict:
    """``message`` shrunk so its compact JSON fits ``max_bytes`` UTF-8 bytes (the same object if it fits).

    ``size_bound``, an upper bound of that size known already (``normalized_and_measured``), spares
    measuring a message that fits.

    The largest tool outputs go first: each becomes a preview with a note to re-run the tool. Text
    and reasoning parts are cut next, largest first, only as far as needed. What was done is kept in
    ``metadata["row_size_limit"]`` so the lab can show it. InvalidMessageError when the rest of the
    message (tool inputs, metadata) is too big on its own.
    """
    if size_bound is not None and size_bound <= max_bytes:
        return message
    original = stored_bytes(message)
    if original <= max_bytes:
        return message
    # stored_bytes starts at the original size: it has at least as many digits as the final size,
    # so the measurements below never under-count.
    record = {"original_bytes": original, "stored_bytes": original, "shrunk": []}
    shrunk = {
        **message,
        "parts": list(message.get("parts") or ()),
        "metadata": {**(message.get("metadata") or {}), ROW_SIZE_KEY: record},
    }
    for index, field in _shrink_order(shrunk["parts"]):
        if stored_bytes(shrunk) <= max_bytes:
            break
        part = shrunk["parts"][index]
        value = part[field]
        original_chars = len(compact_json(value)) if field == "output" else len(value)
        # The record of this cut takes bytes too, so it is in place before the excess is measured.
        record["shrunk"].append({"part": index, "field": field, "original_chars": original_chars})
        excess = stored_bytes(shrunk) - max_bytes
        smaller = _output_preview(value) if field == "output" else _cut_text_by_bytes(value, excess)
        if stored_bytes(smaller) < stored_bytes(value):
            shrunk["parts"][index] = {**part, field: smaller}
        else:
            record["shrunk"].pop()
    while record["stored_bytes"] != (size := stored_bytes(shrunk)):
        record["stored_bytes"] = size
    if size > max_bytes:
        raise InvalidMessageError(
            f"message {message.get('id')!r} is {size} bytes even after shrinking its tool outputs and "
            f"text (it was {original}); the limit is {max_bytes}. Its tool inputs, metadata or other "
            "parts are too large to store: make them smaller before appending it"
        )
    return shrunk


def _shrink_order(parts):
    """(index, field) pairs: tool outputs first, then text and reasoning, each largest first."""
    outputs = [(index, "output") for index, part in enumerate(parts) if is_tool_part(part) and "output" in part]
    texts = [
        (index, "text") for index, part in enumerate(parts)
        if part.get("type") in ("text", "reasoning") and isinstance(part.get("text"), str)
    ]

    def size(entry):
        index, field = entry
        return stored_bytes(parts[index][field])

    return sorted(outputs, key=size, reverse=True) + sorted(texts, key=size, reverse=True)


def _output_preview(output):
    """A small stand-in for an output too large to store, of the output's own type.

    A string becomes its head with a note to re-run the tool. An object or a list keeps its shape
    (small fields whole, long values cut with the truncation marker); one whose keys alone are too
    many becomes a marker object holding a preview of its JSON.
    """
    if isinstance(output, str):
        return (
            f"{output[:ROW_PREVIEW_CHARS]}\n... [output too large to store: {len(output)} characters, only "
            f"the first {ROW_PREVIEW_CHARS} kept. Re-run the tool to see the whole result]"
        )
    room = 2 * ROW_PREVIEW_CHARS  # the cut markers are not counted in shorten_json's budget
    # Each key of an object takes at least five characters ("":0,), so a wide one cannot keep its shape.
    if not (isinstance(output, dict) and len(output) * MIN_OBJECT_ENTRY_CHARS > room):
        shaped = shorten_json(output, ROW_PREVIEW_CHARS)
        if json_size(shaped) <= room:
            return shaped
    text = compact_json(output)
    marker = {"__truncated": True, "__truncatedChars": len(text), "preview": text[:ROW_PREVIEW_CHARS]}
    return [marker] if isinstance(output, list) else marker


def _cut_text_by_bytes(text, excess):
    """``text`` cut (with the marker) so its stored size drops by ``excess`` bytes, or as far as it can."""
    allowed = stored_bytes(text) - excess
    kept = longest_fitting(len(text), lambda k: stored_bytes(truncate_text(text, k)) <= allowed)
    return truncate_text(text, kept or 0)
