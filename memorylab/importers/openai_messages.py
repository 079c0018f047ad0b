"""OpenAI chat messages: one conversation as a JSON list, or one conversation per line of JSONL.

A conversation is a list of chat dicts (``{"role", "content", "tool_calls"?, "tool_call_id"?}``) or
an object holding one under ``"messages"`` (the fine-tuning layout), optionally with an ``"id"``.
A JSON file's conversation takes the file's name as its session id; a JSONL line takes its ``"id"``
or the file's name and line number. Message ids count up within the conversation, so a conversation
that gained messages gains only those on the next import, and a file that gained lines only those.
Such ids are the same in any file of the same name, so a conversation is also known by all the
messages it had when it was last imported: another file whose conversation opens differently
becomes a session of its own (``chat~2``).
"""
from __future__ import annotations

import re
from pathlib import Path

from .formats import SourceFormat, SourceProbe
from .source import SourceMessage, SourceSession, json_lines, loads, malformed_at, source_error

ROLES = {"system", "developer", "user", "assistant", "tool", "function"}


def _is_message(value) -> bool:
    return isinstance(value, dict) and value.get("role") in ROLES and "parts" not in value


def _is_conversation(value) -> bool:
    if isinstance(value, dict):
        value = value.get("messages")
    return isinstance(value, list) and bool(value) and all(_is_message(m) for m in value[:5])


_ROLE = re.compile(r'"role"\s*:\s*"(?:system|developer|user|assistant|tool|function)"')


def _detect(probe: SourceProbe) -> bool:
    if probe.whole_json is not None:
        return _is_conversation(probe.whole_json)
    if probe.json_lines:
        return all(_is_conversation(v) for v in probe.json_lines)
    # A first line or list too long to parse within the probe: judge by its opening.
    return probe.first_char in ("[", "{") and _ROLE.search(probe.text or "") is not None and "\"parts\"" not in (
        probe.text or "")[:4096]


def _read(path: Path):
    if _is_jsonl(path):
        yield from _lines(path)
    else:
        yield _whole_file(path)


def _is_jsonl(path):
    """JSONL when the first non-empty line is a JSON value on its own and another line follows; a
    file of one line, or a document spread over lines, is one conversation."""
    with open(path, "rb") as file:
        lines = (line for line in file if line.strip())
        first = next(lines, b"")
        try:
            loads(first.decode("utf-8"))
        except ValueError:
            return False
        return next(lines, None) is not None


def _whole_file(path):
    try:
        data = loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        raise source_error(path, "", f"not valid JSON ({error})") from None
    return _conversation(path, data, path.stem, "")


def _lines(path):
    for number, data in json_lines(path):
        yield _conversation(path, data, f"{path.stem}-{number}", f"line {number}")


def _conversation(path, data, default_id, where):
    conversation_id, title, messages = default_id, None, data
    if isinstance(data, dict):
        messages = data.get("messages")
        conversation_id = str(data.get("id") or data.get("conversation_id") or default_id)
        title = data.get("title") if isinstance(data.get("title"), str) else None
    if not isinstance(messages, list):
        raise source_error(path, where, "expected a list of chat messages, or an object with a 'messages' list, "
                                        f"got {type(messages).__name__}")
    return SourceSession(source_id=conversation_id, title=title,
                         messages=list(_messages(path, messages, conversation_id, where)))


def _messages(path, messages, conversation_id, where):
    tool_names = {}
    for index, raw in enumerate(messages):
        place = f"{where + ', ' if where else ''}messages[{index}]"
        if not isinstance(raw, dict):
            raise source_error(path, place, f"expected a chat message object, got {type(raw).__name__}")
        with malformed_at(path, place, "a chat message (role, content, tool_calls)"):
            message = _chat_message(raw, conversation_id, index, tool_names)
        yield SourceMessage(message, where=place)


def _chat_message(raw, conversation_id, index, tool_names):
    """The chat dict as ``normalize_message`` takes it, with its id; legacy roles renamed, a tool
    reply named after its call."""
    message = dict(raw)
    if message.get("role") == "developer":
        message["role"] = "system"
    if message.get("role") == "function":  # the legacy function-calling reply
        message.update(role="tool", tool_call_id=message.get("tool_call_id") or message.get("name"))
    for call in message.get("tool_calls") or ():
        if isinstance(call, dict):
            tool_names[call.get("id")] = (call.get("function") or {}).get("name")
    if message.get("role") == "tool" and not message.get("name"):
        message["name"] = tool_names.get(message.get("tool_call_id")) or ""
    message["metadata"] = {**(message.get("metadata") or {}), "source_id": f"{conversation_id}#{index}"}
    message["id"] = f"{conversation_id}#{index}"
    return message


FORMAT = SourceFormat(
    name="openai-messages", label="OpenAI chat messages (a JSON list, or JSONL with one conversation per line)",
    agent_id="openai-messages", detect=_detect, read=_read,
)
