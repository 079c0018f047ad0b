"""Model access: every model call memorylab makes goes through litellm, from this module.

litellm costs seconds to import, so it is imported on the first call, with its cost map read from
the package (``LITELLM_LOCAL_MODEL_COST_MAP``) so nothing touches the network at start-up.
``import memorylab`` never imports it. Keys come from the environment only: ``api_key=`` is
refused, and error messages are scrubbed of anything that looks like a key, so none reaches the
database, an export or a log. Every failure of a model call is one exception class, ``ModelError``,
whose ``kind`` says what went wrong.
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from contextlib import closing
from typing import TYPE_CHECKING

from ..errors import InvalidInputError, ModelError
from ..messages import from_openai, to_openai
from ..tokens import compact_json, estimate_message_tokens, estimate_string_tokens
from ..validation import check_template_fields
from . import local_model

if TYPE_CHECKING:
    import litellm

DEFAULT_LOCAL_MODEL = f"{local_model.PROVIDER}/{local_model.MODEL}"
DEFAULT_OLLAMA_BASE = "http://localhost:11434"
# (environment variable, litellm provider, a model string that provider serves, label)
KEYED_PROVIDERS = (
    ("OPENAI_API_KEY", "openai", "gpt-4o-mini", "OpenAI GPT-4o mini"),
    ("ANTHROPIC_API_KEY", "anthropic", "claude-haiku-4-5", "Anthropic Claude Haiku 4.5"),
    ("GEMINI_API_KEY", "gemini", "gemini/gemini-2.5-flash", "Google Gemini 2.5 Flash"),
    ("GROQ_API_KEY", "groq", "groq/openai/gpt-oss-20b", "Groq gpt-oss-20b"),
    ("MISTRAL_API_KEY", "mistral", "mistral/mistral-small-latest", "Mistral Small"),
    ("DEEPSEEK_API_KEY", "deepseek", "deepseek/deepseek-chat", "DeepSeek Chat"),
)
EMBEDDED_LABEL = "SmolLM2-135M-Instruct, embedded and offline (tiny and weak: it proves the loop, not quality)"
ERROR_DETAIL_CHARS = 300
_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)S?$|API_KEY", re.IGNORECASE)
_SECRET_SHAPE = re.compile(r"\b(sk-[A-Za-z0-9_\-]{6,}|gsk_[A-Za-z0-9]{6,}|AIza[0-9A-Za-z_\-]{10,})|Bearer\s+\S+")


# (litellm exception class name, kind, what the user should do); subclasses before their bases.
_ERROR_KINDS = (
    ("ContextWindowExceededError", "context_window",
     "the request is longer than the model's context window: compact the session, send less history "
     "or pick a model with a larger window"),
    ("AuthenticationError", "auth", "the provider refused the credentials: check the key in the environment"),
    ("PermissionDeniedError", "auth", "the key is not allowed to use this model"),
    ("RateLimitError", "rate_limit", "the provider is rate limiting this key: wait and retry, or pick another model"),
    ("Timeout", "timeout", "the model did not answer in time: retry, or pass a larger timeout="),
    ("APIConnectionError", "connection",
     "could not reach the model: check the network, or that the server at api_base is running"),
    ("NotFoundError", "not_found", "the provider does not know this model: check the model string"),
    ("BadRequestError", "bad_request", "the provider rejected the request"),
)


def _litellm():
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True  # its "Provider List" banners would land in the lab's logs
    return litellm


def _is_local(model):
    return isinstance(model, str) and model.startswith(local_model.PROVIDER + "/")


def redact_secrets(text) -> str:
    """``text`` with the values of key-like environment variables and key-shaped strings replaced."""
    for name, value in os.environ.items():
        if len(value) >= 8 and _SECRET_NAME.search(name):
            text = text.replace(value, "[redacted]")
    return _SECRET_SHAPE.sub("[redacted]", text)


def _model_error(error, model):
    """The ModelError for any exception raised by a litellm call."""
    if isinstance(error, ModelError):
        return error
    error = getattr(error, "original_exception", None) or error  # a mid-stream failure wraps the cause
    kind, advice = next(((k, a) for names in _class_names(error) for name, k, a in _ERROR_KINDS if name in names),
                        ("provider", "the model call failed"))
    if kind == "auth":
        provider = getattr(error, "llm_provider", None)
        variable = next((v for v, name, _, _ in KEYED_PROVIDERS if name == provider), None)
        advice = advice.replace("the key in the environment", variable or "the key in the environment")
    detail = str(error).split("\nTraceback", 1)[0].strip()
    detail = re.sub(r"^((litellm\.\w+|\w+(Error|Exception))(: | - ))+", "", detail)
    if len(detail) > ERROR_DETAIL_CHARS:
        detail = detail[:ERROR_DETAIL_CHARS] + "..."
    return ModelError(redact_secrets(f"{model}: {advice} ({type(error).__name__}: {detail})"), kind=kind, model=model)


def _class_names(error, depth=5):
    """Class names of ``error`` and of the exceptions it was raised from, outermost first: litellm
    reports some connection failures as server errors whose cause is the connection error."""
    while error is not None and depth:
        yield {cls.__name__ for cls in type(error).__mro__}
        error, depth = error.__cause__ or error.__context__, depth - 1


def check_request(model, kwargs) -> None:
    """Refuse a missing model string and an ``api_key`` argument before anything is stored or sent."""
    if not isinstance(model, str) or not model.strip():
        raise InvalidInputError(f"model must be a litellm model string such as {DEFAULT_LOCAL_MODEL!r}, got {model!r}")
    if "api_key" in kwargs:
        raise InvalidInputError(
            "api_key is not accepted: keys are read from the environment only (OPENAI_API_KEY, "
            "ANTHROPIC_API_KEY...), so they never reach the database, exports or logs"
        )


def _prepare(model, kwargs):
    """litellm, ready for ``model``: the embedded provider registered (and checked) when it is the local one."""
    check_request(model, kwargs)
    if _is_local(model) and "mock_response" not in kwargs:
        reason = local_model.unavailable_reason()
        if reason:
            raise ModelError(f"{model}: the embedded model is unavailable: {reason}", kind="unavailable", model=model)
    litellm = _litellm()
    if _is_local(model):
        local_model.register()
    return litellm


def complete(messages, *, model=DEFAULT_LOCAL_MODEL, tools=None, stream=False,
             **kwargs) -> litellm.ModelResponse | ModelStream:
    """``litellm.completion`` for OpenAI chat ``messages``; keyword arguments go to litellm as they are.

    Returns litellm's ModelResponse, or with ``stream=True`` a ModelStream (iterate it for text).
    Any failure is a ModelError.
    """
    litellm = _prepare(model, kwargs)
    try:
        response = litellm.completion(model=model, messages=messages, tools=tools or None, stream=stream, **kwargs)
    except Exception as error:
        raise _model_error(error, model) from None  # the cause is dropped: its text may hold a key
    return ModelStream(response, model, messages) if stream else response


class ModelStream:
    """A streamed reply. Iterating yields text as it arrives; once it ends, ``response`` is the whole
    reply (text, tool calls, usage) as litellm assembles it from the chunks. ``close()`` abandons it
    midway: the provider's stream is closed, so a model writing in this process stops."""

    def __init__(self, chunks, model, messages):
        self.model = model
        self.response = None
        self._chunks = chunks
        self._messages = messages

    def __iter__(self) -> Iterator[str]:
        collected = []
        try:
            for chunk in self._chunks:
                collected.append(chunk)
                text = chunk.choices[0].delta.content if chunk.choices else None
                if text:
                    yield text
        except Exception as error:
            raise _model_error(error, self.model) from None
        litellm = _litellm()
        self.response = litellm.stream_chunk_builder(collected, messages=self._messages) or litellm.ModelResponse()

    def close(self) -> None:
        self._chunks.close()


def complete_text(prompt, *, model=DEFAULT_LOCAL_MODEL, **kwargs) -> str:
    """Send ``prompt`` as one user message and return the reply's text ("" when there is none)."""
    response = complete([{"role": "user", "content": prompt}], model=model, **kwargs)
    return response.choices[0].message.content or ""


def complete_with_usage(prompt, *, model=DEFAULT_LOCAL_MODEL, **kwargs) -> tuple[str, dict]:
    """``complete_text`` that also returns what the call used: ``(text, {"usage", "cost"})``."""
    response = complete([{"role": "user", "content": prompt}], model=model, **kwargs)
    return _text_and_usage(response, model)


def stream_with_usage(prompt, *, model=DEFAULT_LOCAL_MODEL, between_chunks, **kwargs) -> tuple[str, dict]:
    """``complete_with_usage``, streamed: ``between_chunks()`` runs after each piece of text and may
    raise to abandon the reply, which closes the stream so the model stops writing it."""
    reply = complete([{"role": "user", "content": prompt}], model=model, stream=True, **kwargs)
    with closing(reply):
        for _ in reply:
            between_chunks()
    return _text_and_usage(reply.response, model)


def _text_and_usage(response, model):
    return (response.choices[0].message.content or ""), usage_and_cost(response, model)


def model_context_tokens(model) -> int | None:
    """How many tokens ``model`` reads at most (its context window), or None where litellm does not know."""
    if _is_local(model):
        return local_model.CONTEXT_TOKENS
    try:
        info = _litellm().get_model_info(model)
    except Exception:  # litellm raises for models missing from its map
        return None
    return info.get("max_input_tokens") or info.get("max_tokens")


def _check_summarizer_template(template):
    """A bad placeholder fails here, not at the first compaction."""
    if template is None:
        return
    if not isinstance(template, str):
        raise InvalidInputError(f"a summarizer template must be a string, got {type(template).__name__}")
    if "prompt" not in check_template_fields(template, ("prompt",), "the summarizer template"):
        raise InvalidInputError("the summarizer template has no {prompt} placeholder, so the model would never "
                                "see the text to summarize")


def make_summarizer(model=DEFAULT_LOCAL_MODEL, template=None, **completion_kwargs) -> Callable[[str], str]:
    """``summarize(prompt) -> str`` through ``model``, for ``create_compact_function`` and the memory manager.

    ``template`` wraps what the summarizer is handed: a str.format string with one ``{prompt}``
    placeholder (e.g. "Answer in French.\\n\\n{prompt}"); None sends the prompt as it is. A bad
    template or an ``api_key`` is refused here, not at the first compaction. Model failures raise
    ModelError, which a session hands to its compaction error handler.
    """
    check_request(model, completion_kwargs)
    _check_summarizer_template(template)

    def summarize(prompt):
        return complete_text(template.format(prompt=prompt) if template else prompt, model=model, **completion_kwargs)

    summarize.model, summarize.template = model, template
    return summarize


def usage_and_cost(response, model) -> dict:
    """``{"usage": {prompt_tokens, completion_tokens, total_tokens}, "cost": float | None}`` for a reply.

    Usage is what the provider reported; cost is litellm's price for it, 0.0 for the embedded
    model, None where litellm does not know the model's price.
    """
    usage = getattr(response, "usage", None)
    numbers = {key: int(getattr(usage, key, 0) or 0) for key in ("prompt_tokens", "completion_tokens", "total_tokens")}
    if _is_local(model):
        return {"usage": numbers, "cost": 0.0}
    try:
        cost = float(_litellm().completion_cost(completion_response=response, model=model))
    except Exception:  # litellm raises for models missing from its price map
        cost = None
    return {"usage": numbers, "cost": cost}


def count_tokens(messages, model=DEFAULT_LOCAL_MODEL, *, tools=None) -> dict:
    """``{"tokens", "source", "note"}``: tokens ``messages`` (and ``tools``) take for ``model``.

    ``source`` says how they were counted: "embedded" (SmolLM2's own tokenizer and template),
    "litellm" (``litellm.token_counter``: the model's tokenizer where litellm has it, else tiktoken)
    or "estimate" (memorylab's model-free estimate, used when litellm cannot count).
    Messages may be in the parts shape or OpenAI chat dicts.
    """
    if messages and "parts" in messages[0]:
        messages = to_openai(messages)
    if _is_local(model) and local_model.is_available():
        return {"tokens": local_model.count_tokens(messages, tools), "source": "embedded",
                "note": "SmolLM2's tokenizer over its chat template"}
    try:
        tokens = _litellm().token_counter(model=model, messages=messages, tools=tools or None)
        return {"tokens": int(tokens), "source": "litellm", "note": "litellm.token_counter"}
    except Exception as error:
        tokens = estimate_message_tokens([from_openai(m) for m in messages])
        tokens += estimate_string_tokens(compact_json(tools)) if tools else 0
        note = redact_secrets(f"litellm could not count ({type(error).__name__}: {error})")
        return {"tokens": tokens, "source": "estimate", "note": note[:ERROR_DETAIL_CHARS]}


def usable_models(*, ollama_base=None, openai_compatible_base=None, timeout=0.5) -> list[dict]:
    """What the lab's model picker offers: ``[{"model", "label", "usable", "reason", "api_base"}]``.

    The embedded model; each keyed provider (usable when its key variable is set: the key itself
    is never read into the result); the models of an Ollama server (``ollama_base``, else
    ``OLLAMA_API_BASE``, else localhost) and of an OpenAI-compatible server (vLLM, llama.cpp
    server, LM Studio) at ``openai_compatible_base``, each probed with a short ``timeout``.
    Pass an entry's ``api_base`` to the runner with its model. litellm is not imported.
    """
    reason = local_model.unavailable_reason()
    entries = [_entry(DEFAULT_LOCAL_MODEL, EMBEDDED_LABEL, reason is None,
                      reason or f"runs in this process on {local_model.runtime_name()}: no key, no network")]
    for variable, _, model, label in KEYED_PROVIDERS:
        present = bool(os.environ.get(variable))
        entries.append(_entry(model, label, present, f"{variable} is set" if present else f"set {variable} to use it"))
    ollama_base = (ollama_base or os.environ.get("OLLAMA_API_BASE") or DEFAULT_OLLAMA_BASE).rstrip("/")
    entries.extend(_served_models(f"{ollama_base}/api/tags", "models", "name", "ollama_chat/", "Ollama",
                                  ollama_base, timeout))
    if openai_compatible_base:
        base = openai_compatible_base.rstrip("/")
        entries.extend(_served_models(f"{base}/models", "data", "id", "openai/", "OpenAI-compatible server",
                                      base, timeout))
    return entries


def _entry(model, label, usable, reason, api_base=None):
    return {"model": model, "label": label, "usable": usable, "reason": reason, "api_base": api_base}


def _served_models(url, list_key, name_key, prefix, server, api_base, timeout):
    """One entry per model a local server lists, or one unusable entry saying the server is not there."""
    import urllib.request  # here: with ssl and http.client it is a sixth of memorylab's import time

    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            names = [item[name_key] for item in json.load(reply).get(list_key) or ()]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        return [_entry(prefix, f"{server} (type the model name after {prefix})", False,
                       f"no {server} answered at {api_base} ({type(error).__name__})", api_base)]
    if not names:
        return [_entry(prefix, f"{server} (no models yet)", False, f"the server at {api_base} lists no models",
                       api_base)]
    return [_entry(prefix + name, f"{server}: {name}", True, f"served at {api_base}", api_base) for name in names]
