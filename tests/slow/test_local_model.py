"""The embedded SmolLM2 model: real turns through litellm (kept to a few short ones)."""
import threading
import time

import pytest

from memorylab import Session, StaticProvider
from memorylab.errors import ModelError
from memorylab.llm import local_model, local_runtimes
from memorylab.llm import models as llm
from memorylab.llm.chat import ChatRunner, chat_errors
from memorylab.llm.models import DEFAULT_LOCAL_MODEL

TOOLS = [{"type": "function", "function": {
    "name": "set_context", "description": "Write to a context block.\nBlocks: memory",
    "parameters": {"type": "object", "properties": {"label": {"type": "string"}, "content": {"type": "string"}}}}}]
STATS = {"finish_reason": "stop", "prompt_tokens": 10, "completion_tokens": 3}


@pytest.fixture
def chat(store):
    return (Session.create(store, "local")
            .with_context("soul", provider=StaticProvider("You are a friendly assistant. Answer in one sentence."))
            .with_context("memory", description="Facts about the user", max_tokens=100))


def test_the_model_file_ships_with_memorylab_smollm2():
    assert DEFAULT_LOCAL_MODEL == "local/smollm2"
    assert local_model.is_available() and local_model.unavailable_reason() is None
    assert local_model.gguf_path().name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert local_model.gguf_path().parent.name == "memorylab_smollm2"


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
    assert "memorylab-smollm2" in local_model.unavailable_reason()
    with pytest.raises(ModelError, match="embedded model is unavailable") as raised:
        ChatRunner(chat).send("Hello?")
    assert raised.value.kind == "unavailable"
    assert llm.usable_models(timeout=0.1)[0]["usable"] is False


# -- the runtime underneath ----------------------------------------------------------------------

QUESTION = [{"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Count from one to ten in words, separated by commas."}]


def generated(messages=QUESTION, **params):
    *pieces, stats = local_model.generate(messages, **params)
    return "".join(pieces), stats


def test_the_default_runtime_is_the_prebuilt_one():
    assert local_model.runtime_name() == "cyllama"
    assert local_runtimes.installed()[0] == "cyllama"


def test_a_stop_sequence_ends_the_reply_before_it():
    free, _ = generated(max_tokens=40, temperature=0)
    stop = free[12:16]
    stopped, stats = generated(max_tokens=40, temperature=0, stop=[stop])
    assert stopped == free[:free.index(stop)] and stats["finish_reason"] == "stop"


def test_max_tokens_ends_the_reply_with_finish_reason_length():
    text, stats = generated(max_tokens=3, temperature=0)
    assert stats["finish_reason"] == "length" and 0 < stats["completion_tokens"] <= 4 and text


def test_a_seed_repeats_a_sampled_reply_and_another_seed_varies_it():
    first, _ = generated(max_tokens=24, temperature=1.2, seed=7)
    again, _ = generated(max_tokens=24, temperature=1.2, seed=7)
    others = {generated(max_tokens=24, temperature=1.2, seed=seed)[0] for seed in (8, 9, 10)}
    assert first == again
    assert others - {first}


def test_a_repeated_prefix_is_read_from_the_cache():
    """The second turn's prompt starts with the first's: only the new tokens are decoded."""
    long_system = {"role": "system", "content": "You are a careful assistant. " * 60}
    generated([long_system, {"role": "user", "content": "Say hi."}], max_tokens=1, temperature=0)
    started = time.perf_counter()
    generated([long_system, {"role": "user", "content": "Say bye."}], max_tokens=1, temperature=0)
    cached = time.perf_counter() - started
    local_model.load_model().runtime.forget_prefix()  # the same turn again, from an empty cache
    started = time.perf_counter()
    generated([long_system, {"role": "user", "content": "Say bye."}], max_tokens=1, temperature=0)
    cold = time.perf_counter() - started
    assert cached < cold / 2, f"cached prefix {cached:.3f} s vs cold {cold:.3f} s"


def test_non_ascii_text_streams_whole_characters():
    messages = [{"role": "user", "content": "Repeat exactly: café, naïve, 😀, 東京"}]
    *pieces, _ = local_model.generate(messages, max_tokens=40, temperature=0)
    assert pieces and all("\ufffd" not in piece for piece in pieces)


def test_the_prompt_is_the_models_own_chatml_template():
    prompt = local_model.render_prompt(QUESTION)
    assert prompt == ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                      "<|im_start|>user\nCount from one to ten in words, separated by commas.<|im_end|>\n"
                      "<|im_start|>assistant\n")


def test_the_runtime_is_chosen_by_the_environment(monkeypatch):
    monkeypatch.setenv(local_runtimes.ENV_VARIABLE, "cyllama")
    assert local_runtimes.chosen() is local_runtimes.CyllamaRuntime
    monkeypatch.setenv(local_runtimes.ENV_VARIABLE, "vllm")
    assert "is not a runtime; use one of cyllama, llama-cpp-python" in local_model.unavailable_reason()
    monkeypatch.setenv(local_runtimes.ENV_VARIABLE, "llama-cpp-python")
    if "llama-cpp-python" in local_runtimes.installed():
        assert local_runtimes.chosen() is local_runtimes.LlamaCppRuntime
    else:
        assert "pip install llama-cpp-python" in local_model.unavailable_reason()
