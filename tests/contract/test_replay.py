"""Replay: a branch's user turns asked again under another model, stored as a sibling branch, and
compared turn by turn; through the real litellm path with mock responses or a scripted provider."""
import threading

import pytest

from memorylab import BranchComparison, ChatRunner, ReplayResult, Session, compare_branches
from memorylab.errors import InvalidInputError, ModelError, NotFoundError
from memorylab.llm.chat import chat_errors
from memorylab.llm.replay import ReplayJob, replays_of
from tests.contract.test_chat import RecordingLongTerm, texts, tool_call

QUESTIONS = ("Hi, I'm Ana.", "What do I drink?", "Thanks, bye.")


@pytest.fixture
def chat(store):
    return Session.create(store, "replay").with_context("memory", description="Facts about the user", max_tokens=200)


def converse(session, questions=QUESTIONS, **runner_args):
    """The original branch: each question answered by the mocked gpt-4o-mini. Returns (runner, leaf id)."""
    runner = ChatRunner(session, model="gpt-4o-mini", mock_response="Original answer.", **runner_args)
    for question in questions:
        runner.send(question)
    return runner, session.get_latest_leaf_id()


def roles(path):
    return [message["role"] for message in path]


def test_a_replay_answers_every_user_turn_on_a_sibling_branch_and_marks_what_it_wrote(chat):
    runner, leaf = converse(chat)
    original = chat.get_history(leaf)

    result = runner.replay(leaf, model="claude-haiku-4-5", mock_response="Replayed answer.")

    assert isinstance(result, ReplayResult)
    assert (result.answered, result.total, result.complete, result.stopped) == (3, 3, True, False)
    assert result.cancelled is False and result.error is None
    replayed = chat.get_history(result.leaf_id)
    assert roles(replayed) == ["user", "assistant"] * 3 and result.answer_ids == [m["id"] for m in replayed[1::2]]
    first_user = original[0]
    assert replayed[0]["id"] == first_user["id"]  # the fork: the first answer is a sibling of the old one
    assert [m["id"] for m in chat.get_branches(first_user["id"])] == [original[1]["id"], replayed[1]["id"]]
    for copy, source in zip(replayed[2::2], original[2::2]):
        assert copy["id"] != source["id"] and copy["parts"] == source["parts"]
        assert copy["metadata"]["replay"] == {"of": source["id"], "source_leaf": leaf, "model": "claude-haiku-4-5"}
    for answer, source in zip(replayed[1::2], original[1::2]):
        assert texts(answer) == ["Replayed answer."] and answer["metadata"]["model"] == "claude-haiku-4-5"
        assert answer["metadata"]["replay"] == {"of": source["id"], "source_leaf": leaf, "model": "claude-haiku-4-5"}
        assert answer["metadata"]["usage"]["completion_tokens"] > 0
    assert "replay" not in replayed[0]["metadata"]  # the original first question is not rewritten
    assert chat.get_history(leaf) == original
    assert [m["id"] for m in replays_of(chat, leaf)] == [result.leaf_id]


def test_the_replay_keeps_the_runners_model_and_arguments_unless_overridden(chat):
    runner, leaf = converse(chat, QUESTIONS[:2])
    same = runner.replay(leaf)
    answers = [chat.get_message(answer_id) for answer_id in same.answer_ids]
    assert [texts(a) for a in answers] == [["Original answer."]] * 2
    assert {a["metadata"]["model"] for a in answers} == {"gpt-4o-mini"} and same.model == "gpt-4o-mini"
    assert runner.model == "gpt-4o-mini" and runner.completion_kwargs == {"mock_response": "Original answer."}


def test_a_replayed_tool_call_runs_again_through_the_sessions_tools(chat, script):
    script({"calls": [tool_call("call_1", "set_context", label="memory", content="Ana drinks tea.")]},
           {"text": "Noted: tea."},
           {"calls": [tool_call("call_2", "set_context", label="memory", content="Ana drinks coffee.")]},
           {"text": "Noted: coffee."})
    runner = ChatRunner(chat, model="scripted/demo")
    runner.send("Remember what I drink.")
    assert chat.get_context_block("memory")["content"] == "Ana drinks tea."

    result = runner.replay(chat.get_latest_leaf_id())

    answer = chat.get_message(result.leaf_id)
    tool_part, text_part = answer["parts"]
    assert tool_part["toolCallId"] == "call_2" and tool_part["output"].startswith("Replaced memory")
    assert text_part == {"type": "text", "text": "Noted: coffee."}
    assert chat.get_context_block("memory")["content"] == "Ana drinks coffee."
    assert answer["metadata"]["tool_rounds"] == 1


def test_a_failed_turn_stops_the_replay_and_keeps_what_was_stored(chat, script, litellm):
    _, leaf = converse(chat)
    script({"text": "First, replayed."},
           {"calls": [tool_call("call_1", "set_context", label="memory", content="Tea.")]},
           litellm.Timeout(message="read timed out", model="demo", llm_provider="scripted"))

    result = ChatRunner(chat, model="scripted/demo").replay(leaf)

    assert (result.answered, result.total, result.stopped, result.cancelled) == (1, 3, True, False)
    assert "did not answer in time" in result.error
    replayed = chat.get_history(result.leaf_id)
    assert roles(replayed) == ["user", "assistant", "user", "assistant"]
    partial = replayed[-1]  # the tool round before the failure is kept, marked like a full answer
    assert partial["metadata"]["error"] and partial["metadata"]["replay"]["model"] == "scripted/demo"
    assert partial["parts"][0]["output"].startswith("Replaced memory") and result.answer_ids == [replayed[1]["id"]]
    assert chat_errors(chat)[-1]["model"] == "scripted/demo"


def test_a_first_turn_that_fails_stores_nothing(chat):
    runner, leaf = converse(chat)
    before = len(chat.get_all_messages())
    result = runner.replay(leaf, mock_response="litellm.RateLimitError")
    assert (result.leaf_id, result.answered, result.stopped) == (None, 0, True)
    assert "rate limiting" in result.error and len(chat.get_all_messages()) == before


def test_progress_counts_answers_and_cancel_stops_between_turns(chat):
    runner, leaf = converse(chat)
    seen = []
    complete = runner.replay(leaf, on_progress=lambda done, total: seen.append((done, total)))
    assert seen == [(0, 3), (1, 3), (2, 3), (3, 3)] and complete.complete

    cancel, seen = threading.Event(), []

    def cancel_after_one(done, total):
        seen.append((done, total))
        if done == 1:
            cancel.set()

    cancelled = runner.replay(leaf, on_progress=cancel_after_one, cancel=cancel)
    assert seen == [(0, 3), (1, 3)]
    assert (cancelled.answered, cancelled.cancelled, cancelled.stopped, cancelled.error) == (1, True, True, None)
    assert cancelled.leaf_id == cancelled.answer_ids[0]
    assert chat.get_message(cancelled.leaf_id)["parent_id"] == chat.get_history(leaf)[0]["id"]


def test_memories_are_recalled_but_nothing_is_extracted_after_a_replayed_turn(chat):
    long_term = RecordingLongTerm([{"summary": "Ana drinks tea.", "scope": "GLOBAL_MEMORY"}])
    runner, leaf = converse(chat, long_term=long_term)
    assert len(long_term.turns) == 3

    result = runner.replay(leaf, model="claude-haiku-4-5")

    assert len(long_term.turns) == 3
    assert {chat.get_message(i)["metadata"]["long_term_memories"] for i in result.answer_ids} == {1}


def test_a_replay_job_runs_in_the_background(chat):
    runner, leaf = converse(chat)
    job = ReplayJob(runner, leaf, model="claude-haiku-4-5").start()
    assert job.wait(60)
    assert job.error is None and job.result.complete and (job.done, job.total) == (3, 3)
    assert job.model == "claude-haiku-4-5" and job.source_leaf_id == leaf and job.elapsed > 0
    assert chat.get_message(job.result.leaf_id)["metadata"]["replay"]["source_leaf"] == leaf


def test_compare_branches_lines_up_answers_by_turn_with_totals(chat):
    runner, leaf = converse(chat)
    result = runner.replay(leaf, model="claude-haiku-4-5", mock_response="Replayed <b>answer</b>.")

    comparison = compare_branches(chat, leaf, result.leaf_id)

    assert isinstance(comparison, BranchComparison)
    assert [row["user"] for row in comparison.rows] == list(QUESTIONS)
    assert {row["answer_a"] for row in comparison.rows} == {"Original answer."}
    assert {row["answer_b"] for row in comparison.rows} == {"Replayed <b>answer</b>."}
    assert {row["model_b"] for row in comparison.rows} == {"claude-haiku-4-5"}
    for side, branch in (("a", leaf), ("b", result.leaf_id)):
        answers = [m["metadata"] for m in chat.get_history(branch) if m["role"] == "assistant"]
        totals = comparison.totals[side]
        assert totals["answers"] == 3
        assert totals["input_tokens"] == sum(a["usage"]["prompt_tokens"] for a in answers)
        assert totals["output_tokens"] == sum(a["usage"]["completion_tokens"] for a in answers)
        assert totals["cost"] == pytest.approx(sum(a["cost"] for a in answers))
        assert totals["latency_ms"] == sum(a["latency_ms"] for a in answers)
    assert comparison.totals["b"]["cost"] > comparison.totals["a"]["cost"]  # Haiku costs more than GPT-4o mini
    assert not any(row["shared"] for row in comparison.rows)
    frame = comparison.frame()
    assert len(frame) == 3 and list(frame["output_tokens_b"]) == [row["output_tokens_b"] for row in comparison.rows]
    page = comparison._repr_html_()
    assert "Replayed &lt;b&gt;answer&lt;/b&gt;." in page and "<b>answer" not in page


def test_compare_counts_unanswered_turns_unpriced_answers_and_shared_turns(chat):
    runner, _ = converse(chat, QUESTIONS[:1])
    shared_answer = chat.get_latest_leaf_id()
    edited = runner.send("What do I drink?")  # branch A: answered by the model
    question = chat.append_message({"role": "user", "parts": [{"type": "text", "text": "What do I eat?"}]},
                                   parent_id=shared_answer)
    imported = chat.append_message({"role": "assistant", "parts": [{"type": "text", "text": "Bread."}]},
                                   parent_id=question["id"])
    unanswered = chat.append_message({"role": "user", "parts": [{"type": "text", "text": "And later?"}]},
                                     parent_id=imported["id"])

    comparison = compare_branches(chat, edited["id"], unanswered["id"])

    first, second, third = comparison.rows
    assert first["shared"] and first["answer_a"] == first["answer_b"] == "Original answer."
    assert second["user"] == "What do I drink?" and second["user_b"] == "What do I eat?"
    assert second["input_tokens_b"] is None and second["cost_b"] is None
    assert second["output_tokens_b"] == imported["tokens"]  # no usage stored: the estimate stands in
    assert third["user"] == "And later?" and third["answer_a"] is None and third["answer_b"] is None
    assert comparison.totals["b"]["answers"] == 2 and comparison.totals["a"]["answers"] == 2
    assert comparison.totals["b"]["cost"] == pytest.approx(first["cost_b"])


def test_wrong_leaves_models_and_branches_are_refused(chat):
    runner, leaf = converse(chat, QUESTIONS[:1])
    with pytest.raises(NotFoundError, match="no message 'msg_missing'"):
        runner.replay("msg_missing")
    with pytest.raises(NotFoundError):
        compare_branches(chat, leaf, "msg_missing")
    with pytest.raises(NotFoundError):
        ReplayJob(runner, "msg_missing")
    with pytest.raises(InvalidInputError, match="api_key"):
        runner.replay(leaf, api_key="sk-nope")
    with pytest.raises(InvalidInputError, match="messages"):
        runner.replay(leaf, messages=[])
    greeting = chat.append_message({"role": "assistant", "parts": [{"type": "text", "text": "Welcome!"}]},
                                   parent_id=None)
    with pytest.raises(InvalidInputError, match="no user message"):
        runner.replay(greeting["id"])
    assert not replays_of(chat, leaf)
    with pytest.raises(ModelError):  # the runner itself is untouched by a refused replay
        ChatRunner(chat, model=runner.model, mock_response="litellm.RateLimitError").send("Still there?")
