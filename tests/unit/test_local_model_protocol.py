"""The embedded model's pure helpers: the prompt shape its chat template takes and how its tool calls
are read from streamed text. No model is loaded here (tests/slow/test_local_model.py runs it)."""
import pytest

from memorylab.llm import local_model

TOOLS = [{"type": "function", "function": {
    "name": "set_context", "description": "Write to a context block.\nBlocks: memory",
    "parameters": {"type": "object", "properties": {"label": {"type": "string"}, "content": {"type": "string"}}}}}]
STATS = {"finish_reason": "stop", "prompt_tokens": 10, "completion_tokens": 3}


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
