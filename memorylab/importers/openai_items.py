"""OpenAI Responses input items, what the Agents SDK keeps in a session, as memorylab messages and back.

One item is one message. The item itself rides along in ``metadata["openai_item"]`` (unless it is
a bare role and text, which the parts give back as it was) so the SDK gets back exactly what it stored,
for as long as the item stands for what the message shows (``kept_item``); the parts are what memorylab
reads: text for search and token counts, and tool parts, so the lab pairs each call with its result and
``to_openai`` makes a chat request of them. Items of kinds memorylab has no part for (hosted tool calls,
references, compactions) become assistant messages without parts: kept and given back, but empty to the lab
and to ``to_openai``.
"""
from __future__ import annotations

import json

from ..history.truncation import ROW_SIZE_LIMIT_BYTES
from ..messages import is_tool_part, message_text

ITEM_KEY = "openai_item"
KIND_KEY = "openai_type"
ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}
TEXT_CONTENT = {"input_text", "output_text", "text"}
CALL_FIELDS = {"type", "id", "call_id", "name", "status"}
"""Bookkeeping fields of a call item; what remains is the call's input when it has no ``arguments``."""
MAX_KEPT_ITEM_BYTES = ROW_SIZE_LIMIT_BYTES // 2
"""A larger item is not copied into the metadata: the message holds its content twice and would not
fit a row. Such a message gives back an item rebuilt from its (possibly shortened) parts."""


def item_kind(item) -> str:
    """The item's ``type``; a bare ``{"role", "content"}`` (the SDK's user input) is a "message"."""
    kind = item.get("type")
    if isinstance(kind, str) and kind:
        return kind
    return "message" if "role" in item else ""


def answered_call(item) -> str | None:
    """The call id an output item answers (``function_call_output`` and the other ``*_output`` kinds)."""
    call_id = item.get("call_id")
    return call_id if isinstance(call_id, str) and item_kind(item).endswith("_output") else None


def to_message(item, call_names, text=None) -> dict:
    """The message (role, parts, metadata) for one item; the caller gives it an id.

    ``call_names`` maps call ids to tool names: an output is named after its call, and calls met here
    are added to it. ``text`` is the item's JSON when the caller read it as JSON (encoding it again
    would be a third of an import's reading time).
    """
    kind = item_kind(item)
    role, parts = _role_and_parts(item, kind, call_names)
    metadata = {KIND_KEY: kind}
    if _rebuilt_exactly(item):
        return {"role": role, "parts": parts, "metadata": metadata}
    if text is None:
        text = json.dumps(item, ensure_ascii=False)
    if len(text.encode("utf-8")) <= MAX_KEPT_ITEM_BYTES:
        metadata[ITEM_KEY] = item
    return {"role": role, "parts": parts, "metadata": metadata}


def _rebuilt_exactly(item) -> bool:
    """A bare ``{"role", "content"}`` text item, which ``to_items`` rebuilds as it was: keeping it too
    would store its text twice."""
    content = item.get("content")
    return (len(item) == 2 and item.get("role") in ("user", "assistant", "system") and isinstance(content, str)
            and bool(content))


def _role_and_parts(item, kind, call_names):
    call_id, role = item.get("call_id"), item.get("role")
    if kind == "message" and isinstance(role, str) and role in ROLES:
        return ROLES[role], content_parts(item.get("content"))
    if kind == "reasoning":
        texts = [p["text"] for field in ("summary", "content") for p in _listed(item.get(field))
                 if isinstance(p, dict) and isinstance(p.get("text"), str)]
        return "assistant", ([{"type": "reasoning", "text": "\n".join(texts)}] if texts else [])
    if call_id is None:
        return "assistant", []
    # A call id that is not a string is passed on for normalize_message to refuse by name.
    known = isinstance(call_id, str)
    if kind.endswith("_output"):
        name = (call_names.get(call_id) if known else None) or kind.removesuffix("_output")
        return "tool", [_tool_part(call_id, name, state="output-available", output=item.get("output"))]
    name = item.get("name")
    name = name if isinstance(name, str) and name else kind
    if known:
        call_names[call_id] = name
    return "assistant", [_tool_part(call_id, name, state="input-available", input=_call_input(item))]


def _listed(value) -> list:
    return value if isinstance(value, list) else []


def _tool_part(call_id, name, **fields):
    return {"type": f"tool-{name}", "toolCallId": call_id, "toolName": name, **fields}


def _call_input(item):
    if "arguments" not in item:
        return {key: value for key, value in item.items() if key not in CALL_FIELDS}
    try:
        return json.loads(item["arguments"])
    except (TypeError, ValueError):
        return item["arguments"]


def content_parts(content) -> list[dict]:
    """Text parts for a message's content; images as chat ``image_url`` parts, other content left out
    (it stays in the kept item)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    parts = []
    for piece in _listed(content):
        kind = piece.get("type") if isinstance(piece, dict) else None
        if kind in TEXT_CONTENT and isinstance(piece.get("text"), str):
            parts.append({"type": "text", "text": piece["text"]})
        elif kind == "refusal" and isinstance(piece.get("refusal"), str):
            parts.append({"type": "text", "text": piece["refusal"]})
        elif kind == "input_image" and isinstance(piece.get("image_url"), str):
            parts.append({"type": "image_url", "image_url": {"url": piece["image_url"]}})
    return parts


def kept_item(message) -> dict | None:
    """The item kept in the message's metadata, when it stands for what the message shows (its role and
    parts, as ``to_message`` makes them); None when there is none, or one that does not (the message
    was edited in the lab since, or the metadata came from elsewhere): an agent is given what the lab shows."""
    item = (message.get("metadata") or {}).get(ITEM_KEY)
    if not isinstance(item, dict):
        return None
    role, parts = _role_and_parts(item, item_kind(item), {})
    stored = message.get("parts") or []
    if answered_call(item) is not None:  # an output is named after its call, which the item does not name
        parts, stored = _unnamed(parts), _unnamed(stored)
    return item if role == message.get("role") and parts == stored else None


def _unnamed(parts):
    return [{key: value for key, value in part.items() if key not in ("type", "toolName")} for part in parts]


def to_items(message) -> list[dict]:
    """The items a message stands for: the kept original, or items rebuilt from the parts of a message
    that did not come from the SDK (written in the lab, imported from elsewhere, too large to keep, or
    edited since)."""
    item = kept_item(message)
    if item is not None:
        return [item]
    role, text = message["role"], message_text(message)
    items = [{"role": role, "content": text}] if text and role != "tool" else []
    for part in message.get("parts") or ():
        if not is_tool_part(part):
            continue
        if role == "assistant":
            items.append({"type": "function_call", "call_id": part["toolCallId"], "name": part.get("toolName") or "",
                          "arguments": json.dumps(part.get("input", {}), ensure_ascii=False)})
        if "output" in part or part.get("state") == "output-error":
            output = part.get("output", part.get("errorText"))
            items.append({"type": "function_call_output", "call_id": part["toolCallId"],
                          "output": output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)})
    return items


def call_names(messages) -> dict[str, str]:
    """{call id: tool name} of every tool part in ``messages``."""
    return {p["toolCallId"]: p.get("toolName") or "" for m in messages for p in m.get("parts") or ()
            if is_tool_part(p)}
