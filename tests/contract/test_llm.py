"""Model access through litellm: completion, streaming, errors, keys, token counts, summarizers, the model list."""
import json
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from memorylab import Session, create_compact_function
from memorylab.errors import InvalidInputError, ModelError
from memorylab.llm import models as llm
from memorylab.llm.models import DEFAULT_LOCAL_MODEL, make_summarizer
from tests.helpers import ROOT

SECRET = "sk-test-SECRET123"
HELLO = [{"role": "user", "content": "hello"}]


@pytest.fixture
def echo(monkeypatch, litellm):
    class EchoModel(litellm.CustomLLM):
        """A litellm provider that answers with the last message it was sent, to show what went out."""

        def completion(self, *, model, messages, **_):
            message = {"role": "assistant", "content": messages[-1]["content"]}
            return litellm.ModelResponse(model=model,
                                         choices=[{"index": 0, "finish_reason": "stop", "message": message}])

    monkeypatch.setattr(litellm, "custom_provider_map",
                        [*litellm.custom_provider_map, {"provider": "echo", "custom_handler": EchoModel()}])
    return "echo/any"


def closed_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_importing_memorylab_loads_neither_litellm_nor_a_model_runtime():
    code = ("import sys, memorylab, memorylab.llm.models, memorylab.llm.chat, memorylab.llm.local_model;"
            "print(sorted(m for m in ('litellm', 'cyllama', 'llama_cpp', 'memorylab_smollm2') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert result.stdout.strip() == "[]"


def test_complete_returns_the_reply_with_usage_and_cost():
    response = llm.complete(HELLO, model="gpt-4o-mini", mock_response="Hi Ana.")
    assert response.choices[0].message.content == "Hi Ana."
    spent = llm.usage_and_cost(response, "gpt-4o-mini")
    assert spent["usage"] == {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30}
    assert spent["cost"] == pytest.approx(10 * 0.15e-6 + 20 * 0.6e-6)


def test_cost_is_none_where_litellm_knows_no_price(echo):
    response = llm.complete(HELLO, model=echo)
    assert llm.usage_and_cost(response, echo)["cost"] is None


def test_a_stream_yields_text_then_holds_the_whole_reply():
    stream = llm.complete(HELLO, model="gpt-4o-mini", mock_response="One two three four.", stream=True)
    chunks = list(stream)
    assert len(chunks) > 1 and "".join(chunks) == "One two three four."
    assert stream.response.choices[0].message.content == "One two three four."
    assert llm.usage_and_cost(stream.response, "gpt-4o-mini")["usage"]["completion_tokens"] > 0


def test_complete_text_sends_one_user_message(echo):
    assert llm.complete_text("Say this back.", model=echo) == "Say this back."


@pytest.mark.parametrize("mock, kind, words", [
    ("litellm.RateLimitError", "rate_limit", "rate limiting"),
    ("litellm.ContextWindowExceededError", "context_window", "context window"),
    ("litellm.InternalServerError", "provider", "failed"),
])
def test_provider_errors_become_one_model_error(mock, kind, words):
    with pytest.raises(ModelError, match=words) as raised:
        llm.complete(HELLO, model="gpt-4o-mini", mock_response=mock)
    assert raised.value.kind == kind and raised.value.model == "gpt-4o-mini"
    assert str(raised.value).startswith("gpt-4o-mini: ")


def test_a_timeout_is_a_model_error():
    with pytest.raises(ModelError, match="did not answer in time") as raised:
        llm.complete(HELLO, model="gpt-4o-mini", mock_timeout=True, timeout=0.01)
    assert raised.value.kind == "timeout"


def test_an_unreachable_server_is_a_connection_error(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "local-server-needs-none")
    with pytest.raises(ModelError, match="could not reach the model") as raised:
        llm.complete(HELLO, model="openai/served-model", api_base=f"http://127.0.0.1:{closed_port()}/v1",
                     num_retries=0, max_retries=0, timeout=5)
    assert raised.value.kind == "connection"
    assert "local-server-needs-none" not in str(raised.value)


def test_an_auth_error_names_the_variable_and_never_the_key(monkeypatch, litellm):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    refused = litellm.AuthenticationError(message=f"Incorrect API key provided: {SECRET}", llm_provider="openai",
                                          model="gpt-4o-mini")
    with pytest.raises(ModelError) as raised:
        llm.complete(HELLO, model="gpt-4o-mini", mock_response=refused)
    assert raised.value.kind == "auth"
    assert "check OPENAI_API_KEY" in str(raised.value)
    assert SECRET not in str(raised.value) and "[redacted]" in str(raised.value)
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


def test_keys_are_taken_from_the_environment_only():
    with pytest.raises(InvalidInputError, match="environment"):
        llm.complete(HELLO, model="gpt-4o-mini", api_key=SECRET, mock_response="x")
    with pytest.raises(InvalidInputError, match="environment"):
        make_summarizer("gpt-4o-mini", api_key=SECRET)
    with pytest.raises(InvalidInputError, match="model string"):
        llm.complete(HELLO, model="")


def test_redact_secrets_by_environment_value_and_by_shape(monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-1234567890")
    text = "token tok-1234567890, openai sk-abcdefgh12345, groq gsk_abcdef123456, header Bearer xyz.abc"
    assert llm.redact_secrets(text) == ("token [redacted], openai [redacted], groq [redacted], "
                                        "header [redacted]")
    assert llm.redact_secrets("nothing secret here") == "nothing secret here"


def test_summarizer_template_wraps_the_prompt(echo):
    summarize = make_summarizer(echo, "Be brief.\n\n{prompt}\n\nUse {{sections}}.")
    assert summarize("the transcript") == "Be brief.\n\nthe transcript\n\nUse {sections}."
    assert make_summarizer(echo)("as is") == "as is"
    assert (summarize.model, summarize.template) == (echo, "Be brief.\n\n{prompt}\n\nUse {{sections}}.")


@pytest.mark.parametrize("template, words", [
    ("no placeholder", "no {prompt} placeholder"),
    ("{prompt} and {transcript}", "other than {prompt}"),
    ("{prompt} and {}", "other than {prompt}"),
    ("{prompt", "not a valid format string"),
    (42, "must be a string"),
])
def test_a_bad_summarizer_template_is_refused_at_creation(template, words):
    with pytest.raises(InvalidInputError, match=words):
        make_summarizer("gpt-4o-mini", template)


def test_compaction_with_a_summarizer_is_one_line(store):
    session = Session.create(store, "long")
    for n in range(8):
        session.append_message({"role": "user" if n % 2 == 0 else "assistant", "content": f"message number {n}"})
    summary = "## Topic\nCounting.\n## Key Points\n- 0 to 7\n## Current State\nDone.\n## Open Items\nNone."
    session.on_compaction(create_compact_function(make_summarizer("gpt-4o-mini", mock_response=summary),
                                                  protect_head=1, tail_token_budget=10))
    overlay = session.compact()
    assert overlay["summary"] == summary
    assert any(m["id"].startswith("compaction_") for m in session.get_history())


def test_count_tokens_through_litellm_and_for_the_parts_shape():
    counted = llm.count_tokens(HELLO, "gpt-4o-mini")
    assert counted["source"] == "litellm" and counted["tokens"] > 0
    parts = [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hello"}]}]
    assert llm.count_tokens(parts, "gpt-4o-mini") == counted
    tools = [{"type": "function", "function": {"name": "set_context", "description": "Write a block",
                                               "parameters": {"type": "object", "properties": {}}}}]
    assert llm.count_tokens(HELLO, "gpt-4o-mini", tools=tools)["tokens"] > counted["tokens"]


def test_count_tokens_falls_back_to_the_estimate_and_says_so(monkeypatch, litellm):
    def broken(**_):
        raise RuntimeError("tokenizer download failed")
    monkeypatch.setattr(litellm, "token_counter", broken)
    counted = llm.count_tokens(HELLO, "gpt-4o-mini")
    assert counted["source"] == "estimate" and counted["tokens"] == 4 + 2
    assert "tokenizer download failed" in counted["note"]


def test_usable_models_lists_the_embedded_model_and_keyed_providers(monkeypatch):
    for variable, *_ in llm.KEYED_PROVIDERS:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    models = llm.usable_models(ollama_base=f"http://127.0.0.1:{closed_port()}", timeout=0.2)
    by_model = {m["model"]: m for m in models}
    embedded = models[0]
    assert embedded["model"] == DEFAULT_LOCAL_MODEL and embedded["usable"] is True
    assert embedded["reason"] == "runs in this process on cyllama: no key, no network"
    assert "weak" in embedded["label"]
    assert by_model["gpt-4o-mini"]["usable"] is True and by_model["gpt-4o-mini"]["reason"] == "OPENAI_API_KEY is set"
    assert by_model["claude-haiku-4-5"]["usable"] is False
    assert by_model["claude-haiku-4-5"]["reason"] == "set ANTHROPIC_API_KEY to use it"
    assert by_model["ollama_chat/"]["usable"] is False and "no Ollama answered" in by_model["ollama_chat/"]["reason"]
    assert SECRET not in json.dumps(models)


def test_usable_models_lists_what_a_local_server_serves():
    class Models(BaseHTTPRequestHandler):
        def do_GET(self):
            body = {"/v1/models": {"data": [{"id": "qwen2.5-7b"}]},
                    "/api/tags": {"models": [{"name": "llama3.2:1b"}]}}.get(self.path)
            self.send_response(200 if body else 404)
            self.end_headers()
            self.wfile.write(json.dumps(body or {}).encode())

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Models)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        models = llm.usable_models(ollama_base=base, openai_compatible_base=base + "/v1/")
    finally:
        server.shutdown()
    served = [m for m in models if m["api_base"]]
    assert served == [
        {"model": "ollama_chat/llama3.2:1b", "label": "Ollama: llama3.2:1b", "usable": True,
         "reason": f"served at {base}", "api_base": base},
        {"model": "openai/qwen2.5-7b", "label": "OpenAI-compatible server: qwen2.5-7b", "usable": True,
         "reason": f"served at {base}/v1", "api_base": base + "/v1"},
    ]
