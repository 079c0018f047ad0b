import json

import pytest

from memorylab import InvalidMessageError, from_openai, normalize_message, to_openai


def test_openai_text_roundtrip():
    chat = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
    ]
    assert to_openai([normalize_message(m) for m in chat]) == chat


def test_openai_tool_calls_become_tool_parts_and_back():
    call = {
        "role": "assistant", "content": None,
        "tool_calls": [{"id": "call_1", "type": "function",
                        "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}}],
    }
    result = {"role": "tool", "tool_call_id": "call_1", "content": "print(1)"}
    stored_call = normalize_message(call)
    assert stored_call["parts"] == [{"type": "tool-read_file", "toolCallId": "call_1", "toolName": "read_file",
                                     "input": {"path": "a.py"}, "state": "input-available"}]
    stored_result = normalize_message(result)
    assert stored_result["role"] == "tool"
    assert stored_result["parts"][0]["output"] == "print(1)"
    back = to_openai([stored_call, stored_result])
    assert back[0]["content"] is None
    assert json.loads(back[0]["tool_calls"][0]["function"]["arguments"]) == {"path": "a.py"}
    assert back[1] == result


def test_call_and_result_in_one_assistant_message_become_two_openai_messages():
    message = {"role": "assistant", "parts": [
        {"type": "reasoning", "text": "I should look"},
        {"type": "text", "text": "Let me check."},
        {"type": "tool-search", "toolCallId": "c9", "toolName": "search", "input": {"q": "x"},
         "output": [{"path": "a", "line": 1}], "state": "output-available"},
    ]}
    back = to_openai([normalize_message(message)])
    assert [m["role"] for m in back] == ["assistant", "tool"]
    assert back[0]["content"] == "Let me check."
    assert json.loads(back[1]["content"]) == [{"path": "a", "line": 1}]


def test_unparseable_tool_arguments_are_kept_as_text():
    message = from_openai({"role": "assistant", "content": "", "tool_calls": [
        {"id": "c", "function": {"name": "f", "arguments": "{broken"}}]})
    assert message["parts"][0]["input"] == "{broken"


@pytest.mark.parametrize("bad, fragment", [
    ("not a dict", "must be a dict"),
    ({"role": "robot", "parts": []}, "role must be one of"),
    ({"role": "user"}, "parts"),
    ({"role": "user", "parts": [{"text": "no type"}]}, "parts[0]"),
    ({"role": "user", "parts": [{"type": "text", "text": 5}]}, "parts[0].text"),
    ({"role": "user", "parts": [], "id": ""}, "message id"),
    ({"role": "user", "parts": [], "id": "a\x00b"}, "control characters"),
    ({"role": "user", "parts": [], "created_at": "yesterday"}, "ISO-8601"),
    ({"role": "user", "parts": [], "metadata": {"x": object()}}, "not storable as JSON"),
    ({"role": "user", "parts": [{"type": "text", "text": "\ud800"}]}, "surrogate"),
    ({"role": "assistant", "parts": [{"type": "tool-x", "toolCallId": "c", "state": "done"}]}, "state"),
])
def test_bad_messages_are_refused_with_a_specific_error(bad, fragment):
    with pytest.raises(InvalidMessageError) as error:
        normalize_message(bad)
    assert fragment in str(error.value)


def test_normalize_fills_id_and_timestamp_without_mutating_input():
    original = {"role": "user", "parts": [{"type": "text", "text": "x"}]}
    message = normalize_message(original)
    assert message["id"].startswith("msg_") and message["created_at"].endswith("Z")
    assert original == {"role": "user", "parts": [{"type": "text", "text": "x"}]}


def test_parallel_calls_stored_one_per_message_become_one_assistant_turn():
    def call(call_id, name):
        return {"role": "assistant", "content": None,
                "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}]}

    stored = [normalize_message(m) for m in [
        {"role": "user", "content": "Weather and time in Paris?"},
        call("a", "weather"), call("b", "clock"),
        {"role": "tool", "tool_call_id": "a", "name": "weather", "content": "18C"},
        {"role": "tool", "tool_call_id": "b", "name": "clock", "content": "09:00"},
        call("c", "weather"),
    ]]
    request = to_openai(stored)
    assert [m["role"] for m in request] == ["user", "assistant", "tool", "tool", "assistant"]
    assert [c["id"] for c in request[1]["tool_calls"]] == ["a", "b"]
    assert [c["id"] for c in request[4]["tool_calls"]] == ["c"]  # a call after results starts a new turn
