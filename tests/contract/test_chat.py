"""ChatRunner through the real litellm code path, with litellm's mock responses or a scripted
litellm custom provider standing in for the model."""
import json

import pytest

from memorylab import Session, StaticProvider, export_session
from memorylab.errors import InvalidInputError, ModelError, NotFoundError
from memorylab.llm.chat import MAX_ERROR_RECORDS, ChatRunner, build_request, chat_errors
from tests.helpers import stored_bytes

SECRET = "sk-test-SECRET123"


def tool_call(call_id, name, **arguments):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


@pytest.fixture
def chat(store):
    return (Session.create(store, "chat")
            .with_context("soul", provider=StaticProvider("You are Mira, a concise assistant."))
            .with_context("memory", description="Facts about the user", max_tokens=200))


def mocked(session, reply="Hello from the mock.", **kwargs):
    return ChatRunner(session, model="gpt-4o-mini", mock_response=reply, **kwargs)


def texts(message):
    return [p["text"] for p in message["parts"] if p["type"] == "text"]


def test_send_stores_the_user_message_and_the_answer_with_usage_and_cost(chat):
    runner = mocked(chat)
    answer = runner.send("Hi, I'm Ana.")
    user = chat.get_message(answer["parent_id"])
    assert texts(user) == ["Hi, I'm Ana."] and user["role"] == "user"
    assert texts(answer) == ["Hello from the mock."]
    assert chat.get_latest_leaf()["id"] == answer["id"] == runner.last_message["id"]
    metadata = answer["metadata"]
    assert metadata["model"] == "gpt-4o-mini"
    assert metadata["usage"]["prompt_tokens"] > 0 and metadata["usage"]["total_tokens"] > 0
    assert metadata["cost"] > 0  # litellm knows gpt-4o-mini's price
    assert metadata["latency_ms"] >= 0 and metadata["tool_rounds"] == 0
    assert "first_token_ms" not in metadata


def test_the_request_is_frozen_prompt_history_and_tools(chat):
    runner = mocked(chat)
    runner.send("First question")
    runner.send("Second question")
    request = runner.last_request
    assert request["messages"][0] == {"role": "system", "content": chat.freeze_system_prompt()}
    assert [m["role"] for m in request["messages"]] == ["system", "user", "assistant", "user"]
    assert request["messages"][-1]["content"] == "Second question"
    assert [t["function"]["name"] for t in request["tools"]] == ["set_context"]


def test_the_request_can_be_built_without_a_runner(chat):
    mocked(chat).send("Question")
    request = build_request(chat)
    assert request == {key: value for key, value in mocked(chat).build_request().items()
                       if key in ("messages", "tools")}
    assert [m["role"] for m in request["messages"]] == ["system", "user", "assistant"]


def test_an_empty_system_prompt_is_left_out(store):
    runner = mocked(Session.create(store, "bare"))
    runner.send("Hello")
    assert [m["role"] for m in runner.last_request["messages"]] == ["user"]
    assert runner.last_request["tools"] == []


def test_older_messages_are_micro_compacted_in_the_request_but_stored_whole(chat):
    long_text = "x" * 12_000
    chat.append_message({"role": "user", "content": long_text})
    for n in range(4):
        chat.append_message({"role": "assistant" if n % 2 == 0 else "user", "content": f"message {n}"})
    request = mocked(chat).build_request()
    assert request["messages"][1]["content"].endswith("... [truncated 2000 chars]")
    assert chat.get_history()[0]["parts"][0]["text"] == long_text


def test_history_window_keeps_the_newest_messages(chat):
    runner = mocked(chat, history_window=2)
    for question in ("one", "two", "three"):
        runner.send(question)
    assert [m.get("content") for m in runner.last_request["messages"][1:]] == ["Hello from the mock.", "three"]


def test_a_tool_call_writes_the_block_and_the_prompt_changes_only_after_the_turn(chat, script):
    model = script(
        {"text": "", "calls": [tool_call("call_1", "set_context", label="memory", content="Ana drinks tea.")]},
        {"text": "Noted: you drink tea."},
    )
    prompt_before = chat.freeze_system_prompt()
    answer = ChatRunner(chat, model="scripted/demo").send("Remember that I drink tea.")

    assert chat.get_context_block("memory")["content"] == "Ana drinks tea."
    tool_part, text_part = answer["parts"]
    assert tool_part == {"type": "tool-set_context", "toolCallId": "call_1", "toolName": "set_context",
                         "input": {"label": "memory", "content": "Ana drinks tea."},
                         "output": "Replaced memory: now 4/200 tokens.", "state": "output-available"}
    assert text_part == {"type": "text", "text": "Noted: you drink tea."}
    assert answer["metadata"]["tool_rounds"] == 1
    assert answer["metadata"]["cost"] is None  # litellm has no price for this model

    first, second = model.requests
    assert first[0]["content"] == second[0]["content"] == prompt_before  # frozen inside the turn
    assert second[-2]["tool_calls"][0]["id"] == "call_1"
    assert second[-1] == {"role": "tool", "tool_call_id": "call_1", "content": "Replaced memory: now 4/200 tokens."}
    assert chat.freeze_system_prompt() != prompt_before  # refreshed between turns
    assert "Ana drinks tea." in chat.freeze_system_prompt()
    assert "Ana drinks tea." not in prompt_before


def test_the_next_turn_sends_the_stored_tool_call_and_its_result(chat, script):
    model = script(
        {"calls": [tool_call("call_1", "set_context", label="memory", content="Likes tea.")]},
        {"text": "Saved."},
        {"text": "You like tea."},
    )
    runner = ChatRunner(chat, model="scripted/demo")
    runner.send("I like tea.")
    runner.send("What do I like?")
    roles = [m["role"] for m in model.requests[-1]]
    assert roles == ["system", "user", "assistant", "tool", "user"]
    assert "Likes tea." in model.requests[-1][0]["content"]


def test_tool_rounds_are_bounded_and_the_refused_call_is_recorded(chat):
    call = tool_call("call_1", "set_context", label="memory", content="Tea.")
    runner = ChatRunner(chat, model="gpt-4o-mini", mock_response="Saving.", mock_tool_calls=[call], max_tool_rounds=1)
    answer = runner.send("Remember tea.")
    run, refused = [p for p in answer["parts"] if p["type"] == "tool-set_context"]
    assert run["output"].startswith("Replaced memory")
    assert refused["output"] == "Error: not run: this turn reached its limit of 1 tool rounds"
    assert answer["metadata"]["tool_rounds"] == 1
    assert answer["metadata"]["tool_round_limit_reached"] is True


def test_tool_errors_go_back_to_the_model_as_text(chat, script):
    script(
        {"calls": [tool_call("call_1", "no_such_tool"),
                   {"id": "call_2", "type": "function", "function": {"name": "set_context", "arguments": "{oops"}},
                   tool_call("call_3", "set_context", label="memory", content="word " * 300)]},
        {"text": "Sorry."},
    )
    answer = ChatRunner(chat, model="scripted/demo").send("Do things.")
    outputs = [p["output"] for p in answer["parts"] if p["type"] != "text"]
    assert outputs[0] == "Error: there is no tool 'no_such_tool'; the tools are: set_context"
    assert outputs[1].startswith("Error: set_context takes a JSON object of arguments")
    assert "200" in outputs[2] and outputs[2].startswith("Error:")
    assert chat.get_context_block("memory")["content"] == ""


def test_stream_yields_chunks_and_stores_the_answer_when_it_ends(chat):
    runner = mocked(chat, reply="Streaming works fine.")
    chunks = runner.stream("Stream please")
    assert chat.get_latest_leaf()["role"] == "user"  # stored before the first chunk
    received = list(chunks)
    assert len(received) > 1 and "".join(received) == "Streaming works fine."
    answer = runner.last_message
    assert texts(answer) == ["Streaming works fine."]
    assert answer["metadata"]["first_token_ms"] is not None
    assert answer["metadata"]["usage"]["completion_tokens"] > 0


def test_stream_with_a_tool_call(chat, script):
    script(
        {"text": "Let me save that. ", "calls": [tool_call("call_1", "set_context", label="memory", content="Tea.")]},
        {"text": "Done."},
    )
    runner = ChatRunner(chat, model="scripted/demo")
    assert "".join(runner.stream("Remember tea.")) == "Let me save that. Done."
    assert [p["type"] for p in runner.last_message["parts"]] == ["text", "tool-set_context", "text"]
    assert chat.get_context_block("memory")["content"] == "Tea."
    assert runner.last_message["metadata"]["usage"]["total_tokens"] == 24


def test_a_model_error_keeps_the_user_message_logs_it_and_raises(chat):
    runner = mocked(chat, reply="litellm.RateLimitError")
    with pytest.raises(ModelError, match="rate limiting") as raised:
        runner.send("Are you there?")
    assert raised.value.kind == "rate_limit"
    leaf = chat.get_latest_leaf()
    assert leaf["role"] == "user" and texts(leaf) == ["Are you there?"]
    [record] = chat_errors(chat)
    assert record["kind"] == "rate_limit" and record["model"] == "gpt-4o-mini"
    assert record["user_message_id"] == leaf["id"] and record["assistant_message_id"] is None
    assert "rate limiting" in record["message"]


def test_an_error_after_a_tool_round_stores_the_work_done(chat, script, litellm):
    script(
        {"calls": [tool_call("call_1", "set_context", label="memory", content="Tea.")]},
        litellm.Timeout(message="read timed out", model="demo", llm_provider="scripted"),
    )
    with pytest.raises(ModelError) as raised:
        ChatRunner(chat, model="scripted/demo").send("Remember tea.")
    assert raised.value.kind == "timeout"
    partial = chat.get_latest_leaf()
    assert partial["role"] == "assistant" and partial["parts"][0]["output"].startswith("Replaced memory")
    assert "did not answer in time" in partial["metadata"]["error"]
    assert chat_errors(chat)[-1]["assistant_message_id"] == partial["id"]
    assert "Tea." in chat.freeze_system_prompt()  # refreshed even though the turn failed


def test_the_error_log_keeps_the_newest_records(chat):
    runner = mocked(chat, reply="litellm.InternalServerError")
    for n in range(MAX_ERROR_RECORDS + 3):
        with pytest.raises(ModelError):
            runner.send(f"try {n}")
    log = chat_errors(chat)
    assert len(log) == MAX_ERROR_RECORDS
    assert log[-1]["kind"] == "provider"


def test_regenerate_answers_the_same_user_message_on_a_sibling_branch(chat):
    first = mocked(chat, reply="First answer.").send("Question?")
    second = mocked(chat, reply="Second answer.").regenerate(first["id"])
    assert second["parent_id"] == first["parent_id"]
    assert [m["id"] for m in chat.get_branches(first["parent_id"])] == [first["id"], second["id"]]
    assert [texts(m) for m in chat.get_history(second["id"])] == [["Question?"], ["Second answer."]]


def test_edit_forks_a_sibling_user_message_and_answers_it(chat):
    runner = mocked(chat)
    first_answer = runner.send("One")
    second_answer = runner.send("Two")
    edited = runner.edit(second_answer["parent_id"], "Two, rephrased")
    new_user = chat.get_message(edited["parent_id"])
    assert [m["id"] for m in chat.get_branches(first_answer["id"])] == [second_answer["parent_id"], new_user["id"]]
    assert [texts(m) for m in chat.get_history(edited["id"])] == [
        ["One"], ["Hello from the mock."], ["Two, rephrased"], ["Hello from the mock."]]
    assert runner.last_request["messages"][-1]["content"] == "Two, rephrased"


def test_editing_the_first_message_starts_a_new_root(chat):
    runner = mocked(chat)
    answer = runner.send("Root question")
    edited = runner.edit(answer["parent_id"], "Another root")
    assert chat.get_message(edited["parent_id"])["parent_id"] is None
    assert len(chat.get_history(edited["id"])) == 2


def test_regenerate_and_edit_stream_too(chat):
    runner = mocked(chat, reply="Streamed again.")
    answer = runner.send("Q")
    assert "".join(runner.regenerate(answer["id"], stream=True)) == "Streamed again."
    assert runner.last_message["parent_id"] == answer["parent_id"]
    assert "".join(runner.edit(answer["parent_id"], "Q2", stream=True)) == "Streamed again."


def test_send_under_a_chosen_leaf_branches_there(chat):
    runner = mocked(chat)
    first = runner.send("A")
    runner.send("B")
    branched = runner.send("B, on another branch", leaf_id=first["id"])
    assert [texts(m) for m in chat.get_history(branched["id"])][:3] == [["A"], ["Hello from the mock."],
                                                                         ["B, on another branch"]]
    assert len(chat.get_branches(first["id"])) == 2


def test_wrong_ids_and_arguments_are_refused(chat):
    runner = mocked(chat)
    answer = runner.send("Q")
    with pytest.raises(InvalidInputError, match="expected 'assistant'"):
        runner.regenerate(answer["parent_id"])
    with pytest.raises(InvalidInputError, match="expected 'user'"):
        runner.edit(answer["id"], "x")
    with pytest.raises(NotFoundError):
        runner.regenerate("msg_missing")
    with pytest.raises(InvalidInputError, match="empty"):
        runner.send("   ")
    with pytest.raises(InvalidInputError, match="environment"):
        ChatRunner(chat, model="gpt-4o-mini", api_key=SECRET)
    with pytest.raises(InvalidInputError, match="stream"):
        ChatRunner(chat, stream=True)
    with pytest.raises(InvalidInputError, match="max_tool_rounds"):
        ChatRunner(chat, max_tool_rounds=-1)
    with pytest.raises(InvalidInputError, match="history_window"):
        ChatRunner(chat, history_window=0)


class RecordingLongTerm:
    """Plays the long-term memory component: fixed memories, and a record of every finished turn."""

    def __init__(self, memories, fail=False):
        self.memories, self.fail, self.turns = memories, fail, []

    def prepare_request(self, session_id, prompt):
        if self.fail:
            raise RuntimeError("index offline")
        return {"memories": self.memories, "diagnostics": {}}

    def after_turn(self, session_id, user_content, assistant_content):
        self.turns.append((session_id, user_content, assistant_content))


def test_long_term_memories_are_injected_and_the_turn_is_reported(chat):
    long_term = RecordingLongTerm([{"summary": "Ana prefers email.", "scope": "GLOBAL_MEMORY"}, "Ana lives in Porto."])
    runner = mocked(chat, long_term=long_term)
    answer = runner.send("How should you contact me?")
    memory_message = runner.last_request["messages"][1]
    assert memory_message["role"] == "system"
    assert "- Ana prefers email.\n- Ana lives in Porto." in memory_message["content"]
    assert runner.last_request["messages"][0]["content"] == chat.freeze_system_prompt()
    assert long_term.turns == [("chat", "How should you contact me?", "Hello from the mock.")]
    assert answer["metadata"]["long_term_memories"] == 2


def test_a_failing_long_term_memory_is_logged_and_the_turn_goes_on(chat):
    answer = mocked(chat, long_term=RecordingLongTerm([], fail=True)).send("Hi")
    assert texts(answer) == ["Hello from the mock."]
    assert chat_errors(chat)[0]["kind"] == "long_term"
    assert "index offline" in chat_errors(chat)[0]["message"]


def test_no_key_reaches_the_database_or_an_export(chat, monkeypatch, litellm):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    mocked(chat).send(f"My key is not {SECRET[:6]}, do not store it")
    with pytest.raises(ModelError):
        mocked(chat, reply=Exception(f"provider said: invalid key {SECRET}")).send("again")
    auth = litellm.AuthenticationError(message=f"Incorrect API key provided: {SECRET}", llm_provider="openai",
                                       model="gpt-4o-mini")
    with pytest.raises(ModelError, match="OPENAI_API_KEY") as raised:
        mocked(chat, reply=auth).send("and again")
    assert SECRET not in str(raised.value)
    stored = stored_bytes(chat.store)
    assert len(chat_errors(chat)) == 2 and stored
    assert SECRET.encode() not in stored
    assert SECRET not in json.dumps(export_session(chat))
