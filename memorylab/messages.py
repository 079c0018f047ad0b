"""Message dicts: validation, the AI-SDK parts shape, and conversion from and to OpenAI chat dicts.

Stored messages use the parts shape
``{"id", "role", "parts": [...], "created_at", "metadata"}``; callers may also hand in OpenAI chat
dicts (``{"role", "content", "tool_calls"?, "tool_call_id"?}``), which are converted on the way in.
``to_openai`` converts back for litellm. All functions here are pure.
"""
import json
import os
import warnings
from datetime import datetime, timezone

from .errors import DamagedRowWarning, InvalidInputError, InvalidMessageError
from .validation import check_identifier

ROLES = ("user", "assistant", "system", "tool")
_encode_json = json.JSONEncoder(ensure_ascii=False).encode


def new_message_id() -> str:
    """``msg_`` and 20 random hex digits (straight from the OS: a UUID object costs four times as much)."""
    return "msg_" + os.urandom(10).hex()


def utc_now_iso() -> str:
    """Current time as ISO-8601 UTC with millisecond precision, e.g. 2026-11-30T01:13:02.123Z."""
    return to_utc_iso(datetime.now(timezone.utc))


def to_utc_iso(moment, what="timestamp") -> str:
    """A datetime or ISO-8601 string in the store's form (UTC, milliseconds, ``Z``).

    A value without a UTC offset is local time, as ``datetime.now()`` gives it: read as UTC, a
    message written "now" would land hours away. One form everywhere keeps stored timestamps
    comparable as text.
    """
    if isinstance(moment, str):
        try:
            moment = datetime.fromisoformat(moment.strip().replace("Z", "+00:00"))
        except ValueError:
            raise InvalidInputError(f"{what} {moment!r} is not an ISO-8601 timestamp") from None
    if not isinstance(moment, datetime):
        raise InvalidInputError(f"{what} must be a datetime or an ISO-8601 string, got {moment!r}")
    try:
        moment = moment.astimezone(timezone.utc)
    except (ValueError, OverflowError):
        raise InvalidInputError(f"{what} {moment!r} is too near the year 1 or 9999 to convert to UTC") from None
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def is_tool_part(part) -> bool:
    kind = part.get("type", "")
    return kind.startswith("tool-") or kind == "dynamic-tool"


def message_text(message) -> str:
    """The searchable text of a message: its text parts, newline-joined."""
    return "\n".join(
        p.get("text") or "" for p in message.get("parts") or () if p.get("type") == "text"
    )


def _check_text(value, where):
    if not isinstance(value, str):
        raise InvalidMessageError(f"{where} must be a string, got {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidMessageError(f"{where} contains an unpaired surrogate and cannot be stored as UTF-8") from None
    return value


def _check_json(value, where) -> int:
    try:
        return len(_encode_json(value).encode("utf-8"))
    except (TypeError, ValueError, UnicodeEncodeError) as error:
        raise InvalidMessageError(f"{where} is not storable as JSON: {error}") from None


TOOL_STATES = ("input-available", "output-available", "output-error")


def part_problem(part, where) -> str | None:
    """Why ``part`` is not of a shape the engine writes (None when it is), worded with ``where``: a
    dict with a ``type``, a string ``text`` in a text or reasoning part, a call id and a state in a
    tool part. Every reader relies on exactly this, so a stored part that fails it is damage."""
    if type(part) is not dict or type(part.get("type")) is not str or not part["type"]:
        return f"{where} must be a dict with a non-empty string 'type'"
    if part["type"] in ("text", "reasoning"):
        if type(part.get("text")) is not str:
            return f"{where}.text must be a string, got {type(part.get('text')).__name__}"
    elif is_tool_part(part):
        try:
            check_identifier(part.get("toolCallId"), f"{where}.toolCallId")
        except InvalidInputError as error:
            return str(error)
        if part.get("state") not in TOOL_STATES:
            return f"{where}.state must be input-available, output-available or output-error"
    return None


def parts_problem(parts) -> str | None:
    """``part_problem`` of the first part of ``parts`` that has one. Plain text parts, most of what is
    stored, are passed without a call (this runs on every message a store reads)."""
    for index, part in enumerate(parts):
        if type(part) is dict and part.get("type") == "text" and type(part.get("text")) is str:
            continue
        problem = part_problem(part, f"parts[{index}]")
        if problem:
            return problem
    return None


def _check_part(part, index):
    where = f"parts[{index}]"
    problem = part_problem(part, where)
    if problem:
        raise InvalidMessageError(problem)
    if part["type"] in ("text", "reasoning"):
        _check_text(part["text"], f"{where}.text")
    return dict(part)


def normalize_message(message) -> dict:
    """Validate a message (parts shape or OpenAI shape) and return a new canonical dict.

    Missing ``id`` and ``created_at`` are filled in. Raises InvalidMessageError naming the field.
    """
    return normalized_and_measured(message)[0]


def normalized_and_measured(message) -> tuple[dict, int]:
    """``normalize_message``, and an upper bound of the message's size as a stored row (compact JSON,
    UTF-8 bytes) from the encoding its storability check makes anyway, so that writers need not
    encode the message again to learn that it fits (``enforce_row_size_limit(size_bound=...)``)."""
    if not isinstance(message, dict):
        raise InvalidMessageError(f"a message must be a dict, got {type(message).__name__}")
    if "parts" not in message and ("content" in message or "tool_calls" in message):
        message = from_openai(message)
    role = message.get("role")
    if role not in ROLES:
        raise InvalidMessageError(f"role must be one of {', '.join(ROLES)}; got {role!r}")
    parts = message.get("parts")
    if not isinstance(parts, list):
        raise InvalidMessageError("a message needs a 'parts' list (or an OpenAI 'content')")
    message_id = message.get("id")
    message_id = (new_message_id() if message_id is None
                  else check_identifier(message_id, "message id", InvalidMessageError))
    created_at = message.get("created_at") or utc_now_iso()
    _check_timestamp(created_at)
    metadata = message.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise InvalidMessageError("metadata must be a dict")
    checked_parts = [_check_part(p, i) for i, p in enumerate(parts)]
    encoded = _check_storable(checked_parts, metadata)
    normalized = {
        "id": message_id,
        "role": role,
        "parts": checked_parts,
        "created_at": created_at,
        "metadata": dict(metadata),
    }
    # The check's JSON has spaces a row's has not; the other fields take at most six bytes a
    # character (an escape), plus their keys and punctuation.
    return normalized, encoded + 6 * (len(message_id) + len(role) + len(created_at)) + 64


def _check_storable(parts, metadata) -> int:
    """One JSON encoding of the whole message, its length in bytes; only on failure is the culprit
    looked for."""
    try:
        return _check_json({"parts": parts, "metadata": metadata}, "message")
    except InvalidMessageError:
        for index, part in enumerate(parts):
            _check_json(part, f"parts[{index}]")
        _check_json(metadata, "metadata")
        raise


def _check_timestamp(value):
    if not isinstance(value, str):
        raise InvalidMessageError(f"created_at must be an ISO-8601 string, got {value!r}")
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidMessageError(f"created_at {value!r} is not an ISO-8601 timestamp") from None


def _parse_arguments(arguments):
    if not isinstance(arguments, str):
        return arguments
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments


def from_openai(message) -> dict:
    """Convert one OpenAI chat dict to the parts shape (id, created_at and metadata are kept)."""
    role = message.get("role")
    parts = []
    content = message.get("content")
    if role == "tool":
        if message.get("tool_call_id") is None:
            raise InvalidMessageError(
                "a tool message answers one tool call: pass it as a dict with the call's id, "
                '{"role": "tool", "tool_call_id": "<id of the assistant\'s tool call>", "content": "<result>"}'
            )
        name = message.get("name") or ""
        parts.append({
            "type": f"tool-{name}" if name else "dynamic-tool",
            "toolCallId": message.get("tool_call_id"),
            "toolName": name,
            "output": content,
            "state": "output-available",
        })
    elif isinstance(content, str):
        if content:
            parts.append({"type": "text", "text": content})
    elif isinstance(content, list):
        for item in content:
            if isinstance(item, dict) and item.get("type") == "text":
                parts.append({"type": "text", "text": item.get("text")})
            else:
                parts.append(item)
    elif content is not None:
        raise InvalidMessageError(f"content must be a string, a list or None, got {type(content).__name__}")
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        name = function.get("name") or ""
        parts.append({
            "type": f"tool-{name}",
            "toolCallId": call.get("id"),
            "toolName": name,
            "input": _parse_arguments(function.get("arguments")),
            "state": "input-available",
        })
    converted = {key: message[key] for key in ("id", "created_at", "metadata") if key in message}
    converted.update(role=role, parts=parts)
    return converted


def _tool_output_content(output):
    return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)


def to_openai(messages) -> list[dict]:
    """Convert parts-shape messages to OpenAI chat dicts for litellm.

    Reasoning parts are dropped (providers do not accept them back). A tool part that carries its
    output inside an assistant message becomes a tool call plus a following ``tool`` message.
    Parallel calls stored one per message (as the Agents SDK and Claude Code record them) become
    one assistant turn, since a provider wants every call before the first result. A part of a shape
    the engine never writes (``part_problem``) is left out with a ``DamagedRowWarning`` naming it.
    """
    converted: list[dict] = []
    for message in messages:
        parts = _sound_parts(message)
        if message["role"] == "tool":
            converted.extend(
                {"role": "tool", "tool_call_id": p["toolCallId"], "content": _tool_output_content(p.get("output"))}
                for p in parts if is_tool_part(p)
            )
            continue
        texts = [p["text"] for p in parts if p.get("type") == "text"]
        others = [p for p in parts if p.get("type") not in ("text", "reasoning") and not is_tool_part(p)]
        content: list | str | None
        if others:
            content = [{"type": "text", "text": t} for t in texts] + others
        else:
            content = "\n".join(texts) if texts else None
        entry = {"role": message["role"], "content": content}
        tool_parts = [p for p in parts if is_tool_part(p)]
        if tool_parts and message["role"] == "assistant":
            entry["tool_calls"] = [
                {
                    "id": p["toolCallId"],
                    "type": "function",
                    "function": {"name": p.get("toolName") or "", "arguments": json.dumps(p.get("input", {}))},
                }
                for p in tool_parts
            ]
        elif content is None:
            entry["content"] = ""
        if not _joins_parallel_calls(converted, entry):
            converted.append(entry)
        converted.extend(
            {"role": "tool", "tool_call_id": p["toolCallId"], "content": _tool_output_content(p["output"])}
            for p in tool_parts if message["role"] == "assistant" and "output" in p
        )
    return converted


def _sound_parts(message):
    """The parts of ``message`` that are of a shape the engine writes; each other one is reported."""
    parts = message.get("parts") or []
    if not isinstance(parts, list):
        parts = [parts]
    if parts_problem(parts) is None:
        return parts
    sound = []
    for index, part in enumerate(parts):
        problem = part_problem(part, f"parts[{index}]")
        if problem:
            warnings.warn(f"message {message.get('id')!r}: left out of the request: {problem}", DamagedRowWarning,
                          stacklevel=3)
        else:
            sound.append(part)
    return sound


def _joins_parallel_calls(converted, entry) -> bool:
    """Merge ``entry``'s tool calls into the assistant turn just before it when that turn's calls have
    no results yet; True when merged."""
    previous = converted[-1] if converted else None
    if not (entry.get("tool_calls") and previous and previous["role"] == "assistant" and previous.get("tool_calls")):
        return False
    if not all(isinstance(c, (str, type(None))) for c in (previous["content"], entry["content"])):
        return False
    previous["tool_calls"] = previous["tool_calls"] + entry["tool_calls"]
    previous["content"] = "\n".join(c for c in (previous["content"], entry["content"]) if c) or None
    return True
