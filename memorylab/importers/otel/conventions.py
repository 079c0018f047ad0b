"""What an LLM span says, in either convention an instrumentor writes, as memorylab messages.

- OpenInference (Arize Phoenix's instrumentors): ``openinference.span.kind`` ``LLM``; the context sent
  as ``llm.input_messages.<i>.message.{role,content,contents,tool_calls,tool_call_id,name}`` and the
  answer as ``llm.output_messages.<i>.message.*``; ``llm.model_name``, ``llm.token_count.{prompt,
  completion}``, ``llm.provider``/``llm.system``, ``session.id``, ``user.id``. A ``TOOL`` span is a
  tool run: ``tool.name``, ``tool.id`` (the call it answers), ``input.value``, ``output.value``.
- OpenTelemetry GenAI: ``gen_ai.operation.name`` ``chat``, ``text_completion`` or ``generate_content``;
  ``gen_ai.input.messages``, ``gen_ai.output.messages`` and ``gen_ai.system_instructions`` (JSON of
  ``{role, parts}`` messages, parts ``text``, ``reasoning``, ``tool_call``, ``tool_call_response``,
  ``blob``/``uri``/``file``), ``gen_ai.request.model``/``gen_ai.response.model``,
  ``gen_ai.usage.{input,output}_tokens``, ``gen_ai.provider.name``, ``gen_ai.conversation.id``. An
  ``execute_tool`` span is a tool run: ``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
  ``gen_ai.tool.call.arguments``, ``gen_ai.tool.call.result``.

Messages come out in memorylab's parts shape (``{"role", "parts"}``): text, reasoning, a ``tool-<name>``
part per call (its input) and per result (its output, named after its call), ``file`` parts for media,
and a part a convention adds later as ``data-otel`` holding it whole.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from .otlp import Span
from .tree import digest

LLM_OPERATIONS = ("chat", "text_completion", "generate_content")
ROLES = {"system": "system", "developer": "system", "user": "user", "human": "user", "assistant": "assistant",
         "ai": "assistant", "model": "assistant", "tool": "tool", "function": "tool"}
_INDEXED = re.compile(r"(\d+)\.(.+)")


@dataclass
class LlmCall:
    """One model call: its span (whose context a ``ContextReader`` reads when the call is placed), the
    answers it got (choices), and what memorylab keeps of it."""

    span: Span
    convention: str
    outputs: list[dict]
    conversation_id: str | None
    facts: dict = field(default_factory=dict)
    tool_runs: list[dict] = field(default_factory=list)


class ContextReader:
    """One conversation's contexts read into messages and their digests. Each call sends the context
    of the one before and more, so the part it shares with the previous call (equal as the span holds
    it) is taken from that call's reading, and only the rest is read."""

    def __init__(self):
        self.raw: list[dict] = []
        self.messages: list[dict] = []
        self.digests: list[str] = []
        self.tool_names: dict[str, str] = {}
        self.input_text, self.inputs = "", []  # the previous GenAI call's gen_ai.input.messages, and parsed

    def read(self, call: LlmCall) -> tuple[list[dict], list[str]]:
        convert = CONVERTERS[call.convention]
        if call.convention == "gen_ai":
            raw = self._gen_ai_context(call.span.attributes)
        else:
            raw = _indexed_messages(call.span.attributes, "llm.input_messages.")
        shared = 0
        for before, now in zip(self.raw, raw):
            if before != now:
                break
            shared += 1
        new = [convert(item) for item in raw[shared:]]
        _name_results(new, self.tool_names)
        self.raw, self.messages = raw, self.messages[:shared] + new
        self.digests = self.digests[:shared] + [digest(m) for m in new]
        return self.messages, self.digests

    def _gen_ai_context(self, attributes) -> list[dict]:
        """The system instructions and input messages; JSON that goes on from the previous call's (as
        a serializer writes a grown list) is parsed from where that ended."""
        text = attributes.get("gen_ai.input.messages")
        inputs = None
        if isinstance(text, str) and len(self.input_text) > 2 and text.startswith(self.input_text[:-1]):
            tail = text[len(self.input_text) - 1:].lstrip()
            if tail.startswith(","):
                added = _json_list("[" + tail[1:])
                inputs = self.inputs + added if added else None
        if inputs is None:
            inputs = _json_list(text)
        self.input_text, self.inputs = (text, inputs) if isinstance(text, str) else ("", [])
        instructions = _json_list(attributes.get("gen_ai.system_instructions"))
        return ([{"role": "system", "parts": instructions}] if instructions else []) + inputs


@dataclass
class ToolRun:
    """A tool span: the call it answers (by id when the span names one) and what it did."""

    span: Span
    call_id: str | None
    name: str | None
    facts: dict


def conversation_id(span: Span) -> str | None:
    value = span.attributes.get("gen_ai.conversation.id") or span.attributes.get("session.id")
    return str(value) if value not in (None, "") else None


def is_llm_span(span: Span) -> bool:
    attributes = span.attributes
    if attributes.get("openinference.span.kind") == "LLM":
        return True
    operation = attributes.get("gen_ai.operation.name")
    return operation in LLM_OPERATIONS or operation is None and "gen_ai.input.messages" in attributes


def llm_call(span: Span) -> LlmCall | None:
    """The call an LLM span records, or None when it holds no messages (content capture was off)."""
    attributes = span.attributes
    if attributes.get("openinference.span.kind") == "LLM":
        convention, outputs = "openinference", _indexed_messages(attributes, "llm.output_messages.")
        has_context = any(key.startswith("llm.input_messages.") for key in attributes)
    else:
        convention, outputs = "gen_ai", _json_list(attributes.get("gen_ai.output.messages"))
        has_context = bool(_json_list(attributes.get("gen_ai.system_instructions"))) or attributes.get(
            "gen_ai.input.messages") not in (None, "", "[]")
    if not has_context and not outputs:
        return None
    outputs = [CONVERTERS[convention](item) for item in outputs]
    _name_results(outputs, {})
    return LlmCall(span, convention, outputs, conversation_id(span), _call_facts(span))


def tool_run(span: Span) -> ToolRun | None:
    attributes = span.attributes
    if attributes.get("openinference.span.kind") == "TOOL":
        name, call_id = attributes.get("tool.name"), attributes.get("tool.id") or attributes.get("tool_call.id")
        arguments, result = attributes.get("input.value"), attributes.get("output.value")
    elif attributes.get("gen_ai.operation.name") == "execute_tool":
        name, call_id = attributes.get("gen_ai.tool.name"), attributes.get("gen_ai.tool.call.id")
        arguments, result = attributes.get("gen_ai.tool.call.arguments"), attributes.get("gen_ai.tool.call.result")
    else:
        return None
    facts = {"span_id": span.span_id, "name": name, "call_id": call_id, "arguments": _json_or_text(arguments),
             "result": _json_or_text(result), "status": span.status, "duration_ms": duration_ms(span)}
    if span.status_message:
        facts["error"] = span.status_message
    return ToolRun(span, call_id if isinstance(call_id, str) else None, name if isinstance(name, str) else None,
                   {key: value for key, value in facts.items() if value is not None})


def _call_facts(span: Span) -> dict:
    a = span.attributes
    model = a.get("llm.model_name") or a.get("gen_ai.response.model") or a.get("gen_ai.request.model")
    prompt = _first(a, "llm.token_count.prompt", "gen_ai.usage.input_tokens")
    completion = _first(a, "llm.token_count.completion", "gen_ai.usage.output_tokens")
    provider = _first(a, "gen_ai.provider.name", "llm.provider", "gen_ai.system", "llm.system")
    reasons = a.get("gen_ai.response.finish_reasons")
    facts = {"model": model, "prompt_tokens": prompt, "completion_tokens": completion, "provider": provider,
             "finish_reason": reasons[0] if isinstance(reasons, list) and reasons else a.get("llm.finish_reason"),
             "user_id": a.get("user.id"), "response_id": a.get("gen_ai.response.id")}
    return {key: value for key, value in facts.items() if value is not None}


def _first(attributes, *keys):
    return next((attributes[key] for key in keys if attributes.get(key) is not None), None)


def duration_ms(span: Span):
    """How long the span took, in milliseconds; None when it has no times."""
    return round((span.end - span.start) / 1e6, 3) if span.end >= span.start > 0 else None


# --- OpenInference: messages flattened into attributes


def _indexed_messages(attributes, prefix) -> list[dict]:
    """``<prefix><i>.message.<field>`` attributes, unflattened by index: the fields of each message."""
    flat = {key[len(prefix):]: value for key, value in attributes.items() if key.startswith(prefix)}
    return _by_index(flat, "message.")


def _by_index(flat: dict, inner: str) -> list[dict]:
    """``{"0.message.role": ...}`` as ``[{"role": ...}]``, in index order; ``inner`` is stripped."""
    grouped: dict[int, dict] = {}
    for key, value in flat.items():
        match = _INDEXED.fullmatch(key)
        if match and match.group(2).startswith(inner):
            grouped.setdefault(int(match.group(1)), {})[match.group(2)[len(inner):]] = value
    return [grouped[index] for index in sorted(grouped)]


def _openinference_message(fields) -> dict:
    role = ROLES.get(str(fields.get("role", "")).lower(), "user")
    parts = []
    content = fields.get("content")
    if isinstance(content, str) and content:
        parts.append(_text(content))
    for item in _by_index({k[len("contents."):]: v for k, v in fields.items() if k.startswith("contents.")},
                          "message_content."):
        parts.append(_openinference_content(item))
    if role == "tool":
        call_id = fields.get("tool_call_id") or fields.get("name") or ""
        output = "\n".join(p["text"] for p in parts if p.get("type") == "text")
        return {"role": "tool", "parts": [_tool_result(call_id, fields.get("name"), output)]}
    for call in _by_index({k[len("tool_calls."):]: v for k, v in fields.items() if k.startswith("tool_calls.")},
                          "tool_call."):
        parts.append(_tool_call(call.get("id"), call.get("function.name"), call.get("function.arguments")))
    if fields.get("function_call_name"):
        parts.append(_tool_call(None, fields["function_call_name"], fields.get("function_call_arguments_json")))
    return {"role": role, "parts": parts}


def _openinference_content(item) -> dict:
    kind = item.get("type")
    if kind in ("text", "reasoning") and isinstance(item.get("text"), str):
        return {"type": kind, "text": item["text"]}
    if kind == "image" and isinstance(item.get("image.image.url"), str):
        return {"type": "file", "mediaType": "image/*", "url": item["image.image.url"]}
    return {"type": "data-otel", "data": item}


# --- GenAI: messages as JSON


def _json_list(value) -> list:
    """A JSON array attribute, as a string (what the SDKs write) or as an OTLP array."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return []
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _gen_ai_message(message: dict) -> dict:
    role = ROLES.get(str(message.get("role", "")).lower(), "user")
    parts = message.get("parts")
    return {"role": role, "parts": [_gen_ai_part(p) for p in parts if isinstance(p, dict)]
            if isinstance(parts, list) else []}


def _gen_ai_part(part: dict) -> dict:
    kind = part.get("type")
    if kind in ("text", "reasoning") and isinstance(part.get("content"), str):
        return {"type": kind, "text": part["content"]}
    if kind == "tool_call":
        return _tool_call(part.get("id"), part.get("name"), part.get("arguments"))
    if kind == "tool_call_response":
        return _tool_result(part.get("id"), None, part.get("response"))
    if kind in ("uri", "file", "blob"):
        media = {"mediaType": part.get("mime_type") or f"{part.get('modality') or 'application'}/*"}
        where = {"uri": "url", "file_id": "fileId", "content": "data"}
        return {"type": "file", **media, **{name: part[key] for key, name in where.items() if key in part}}
    return {"type": "data-otel", "data": part}


CONVERTERS = {"openinference": _openinference_message, "gen_ai": _gen_ai_message}
"""By convention, how one message as the span holds it becomes a memorylab message."""


# --- parts both share


def _text(text) -> dict:
    return {"type": "text", "text": text}


def _tool_call(call_id, name, arguments) -> dict:
    name = name if isinstance(name, str) else ""
    return {"type": f"tool-{name}" if name else "dynamic-tool", "toolCallId": str(call_id or name or "call"),
            "toolName": name, "input": _json_or_text(arguments), "state": "input-available"}


def _tool_result(call_id, name, output) -> dict:
    name = name if isinstance(name, str) else ""
    return {"type": f"tool-{name}" if name else "dynamic-tool", "toolCallId": str(call_id or name or "call"),
            "toolName": name, "output": _json_or_text(output), "state": "output-available"}


def _json_or_text(value):
    """Arguments and results as the JSON they hold, else as they are."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _name_results(messages, names):
    """Name each tool result after the call it answers, earlier in the same messages or among ``names``
    (call id -> tool name), which gains the calls of ``messages``."""
    for message in messages:
        for part in message["parts"]:
            if part.get("state") == "input-available":
                names[part["toolCallId"]] = part["toolName"]
            elif part.get("state") == "output-available" and not part["toolName"]:
                name = names.get(part["toolCallId"])
                if name:
                    part.update(type=f"tool-{name}", toolName=name)
