"""The litellm-backed memory steps, through litellm's real code path with ``mock_response``
standing in for the model: JSON parsing that tolerates a weak model, failures that become
diagnostics, and a full ChatRunner turn that stores a memory and recalls it on the next."""
import json

import pytest

from memorylab import ChatRunner, InvalidInputError, Session
from memorylab.errors import ModelOutputError
from memorylab.llm.models import complete
from memorylab.memory import longterm_model
from memorylab.memory.longterm import MEMORY_BLOCK_HEADER, LongTermMemory
from memorylab.memory.longterm_model import model_steps, parse_json_reply

SECRET = "sk-test-MODELSTEP42"
MEMORIES = {"memories": [{"scope": "global", "summary": "Marta wants to be contacted by email", "tags": ["contact"],
                          "body": {"fact": "email only", "evidence": "email me"}, "importance": 0.9}]}


def codes(result):
    return [event["code"] for event in result["diagnostics"]["events"]]


@pytest.mark.parametrize("reply, expected", [
    ('{"memories": []}', {"memories": []}),
    ('```json\n{"memories": [{"summary": "a"}]}\n```', {"memories": [{"summary": "a"}]}),
    ('```\n{"decisions": []}\n```\nHope this helps!', {"decisions": []}),
    ('Sure! Here is the JSON: {"memories": [{"summary": "{braces} inside"}]} Let me know.',
     {"memories": [{"summary": "{braces} inside"}]}),
    ('[{"summary": "a bare list"}]', {"memories": [{"summary": "a bare list"}]}),
    ('{broken {"memories": []}', {"memories": []}),
])
def test_replies_of_a_weak_model_are_parsed(reply, expected):
    assert parse_json_reply(reply, list_key="memories") == expected


def test_without_a_list_key_an_object_inside_a_list_is_found():
    assert parse_json_reply('[{"query": "tea"}]', list_key=None) == {"query": "tea"}


@pytest.mark.parametrize("reply", ["", "I could not find anything.", '{"memories": [', "```json\n{oops}\n```",
                                   '"just a string"', f"no json, key {SECRET}"])
def test_a_reply_without_a_json_object_is_a_clear_error(reply):
    with pytest.raises(ModelOutputError, match="holds no JSON object") as raised:
        parse_json_reply(reply, list_key=None)
    assert SECRET not in str(raised.value)


def test_each_step_asks_litellm_and_returns_the_reply_object(monkeypatch):
    sent = []

    def recording(messages, **kwargs):
        sent.append(messages)
        return complete(messages, **kwargs)

    monkeypatch.setattr(longterm_model, "complete", recording)
    extractor = model_steps("gpt-4o-mini", mock_response="```json\n" + json.dumps(MEMORIES) + "\n```")["extractor"]
    payload = {"user_content": "email me", "instruction": "Keep contact preferences."}
    assert extractor(payload) == MEMORIES
    [[system, user]] = sent
    assert system["content"].startswith("Keep contact preferences.\n\nReply with one JSON object")
    assert json.loads(user["content"]) == payload
    planner = model_steps("gpt-4o-mini", mock_response='Plan: {"query": "email", "tags": []}')["planner"]
    assert planner({"prompt": "how do I reach you?"}) == {"query": "email", "tags": []}
    reranker = model_steps("gpt-4o-mini", mock_response='[{"id": 1, "useful": true}]')["reranker"]
    assert reranker({"query": "email", "candidates": []}) == {"decisions": [{"id": 1, "useful": True}]}
    assert extractor.model == "gpt-4o-mini"


def test_model_steps_refuse_an_api_key():
    with pytest.raises(InvalidInputError, match="environment"):
        model_steps("gpt-4o-mini", api_key=SECRET)
    with pytest.raises(InvalidInputError, match="environment"):
        LongTermMemory(None, workspace="lab", model="gpt-4o-mini", settings={"model_kwargs": {"api_key": SECRET}})


def test_explicit_steps_win_over_the_model(store):
    def extractor(payload):
        return {"memories": [{"scope": "global", "summary": "from the callable"}]}

    lab = LongTermMemory(store, workspace="lab", model="gpt-4o-mini", extractor=extractor,
                         settings={"model_kwargs": {"mock_response": json.dumps(MEMORIES)}})
    assert [r["summary"] for r in lab.after_turn("s1", "hi", "hello")["stored"]] == ["from the callable"]
    assert lab.planner.model == lab.reranker.model == "gpt-4o-mini"


def test_broken_json_from_the_model_degrades_every_step_and_never_raises(store):
    lab = LongTermMemory(store, workspace="lab", model="gpt-4o-mini",
                         settings={"model_kwargs": {"mock_response": 'Sure! {"memories": [{"summary": "unfinished"'}})
    turn = lab.after_turn("s1", "Email me, please.", "Will do.")
    assert turn["stored"] == [] and codes(turn) == ["extract_failed"]
    assert "holds no JSON object" in turn["skipped"][0]["error"] and turn["diagnostics"]["attempts"] == 2
    lab.add_record("Marta wants email")
    lab.add_record("Marta is vegetarian")
    recall = lab.prepare_request("s1", "Marta")
    assert codes(recall) == ["memory_plan_failed", "memory_rerank_failed"]
    assert recall["diagnostics"]["plan"]["source"] == "fallback"
    assert [m["summary"] for m in recall["GLOBAL_MEMORY"]] == ["Marta is vegetarian", "Marta wants email"]


def recall_with(store, reply):
    lab = LongTermMemory(store, workspace="lab", model="gpt-4o-mini",
                         settings={"model_kwargs": {"mock_response": json.dumps({"query": "Marta", **reply})}})
    for summary in ("Marta wants email", "Marta is vegetarian", "Marta lives in Oslo"):
        lab.add_record(summary)
    return lab.prepare_request("s1", "Marta")


def test_a_model_reranker_may_answer_in_words_and_leave_scores_out(store):
    recall = recall_with(store, {"decisions": [{"id": 1, "useful": "drop"}, {"id": 2, "useful": "yes"},
                                               {"id": 3, "useful": True, "score": 0.3}]})
    assert [m["summary"] for m in recall["GLOBAL_MEMORY"]] == ["Marta is vegetarian", "Marta lives in Oslo"]
    assert recall["diagnostics"]["scopes"]["GLOBAL_MEMORY"]["rerank"]["status"] == "reranked"


def test_a_model_reranker_that_decides_nothing_is_a_recorded_failure(store):
    recall = recall_with(store, {"decisions": []})
    assert codes(recall) == ["memory_rerank_failed"]
    assert "no decisions" in recall["diagnostics"]["events"][0]["error"]
    assert len(recall["GLOBAL_MEMORY"]) == 3


def test_a_failing_model_call_is_reported_without_the_key(store, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    lab = LongTermMemory(store, workspace="lab", model="gpt-4o-mini",
                         settings={"model_kwargs": {"mock_response": Exception(f"invalid key {SECRET}")}})
    [skip] = lab.after_turn("s1", "Email me, please.", "Will do.")["skipped"]
    assert skip["reason"] == "extract_failed" and skip["error"].startswith("ModelError: gpt-4o-mini")
    assert SECRET not in json.dumps(lab.diagnostics_log[-1])


def memory_messages(request):
    return [m["content"] for m in request["messages"] if m["role"] == "system"
            and m["content"].startswith(MEMORY_BLOCK_HEADER)]


def test_a_chat_turn_stores_a_memory_and_the_next_turn_recalls_it(store):
    # One mock reply serves all three steps: each reads its own keys from it.
    steps_reply = json.dumps({
        "memories": [{"scope": "global", "summary": "Marta wants to be contacted by email", "tags": ["Contact"]},
                     {"scope": "GLOBAL_MEMORY", "summary": "Marta's sister Ola is vegetarian", "tags": ["diet"]}],
        "query": "email vegetarian", "tags": [], "include_global": True, "include_session": True,
        "decisions": [{"id": 1, "useful": True, "score": 0.9, "reason": "contact"},
                      {"id": 2, "useful": False, "score": 0.1, "reason": "unrelated"}],
    })
    long_term = LongTermMemory(store, workspace="lab", model="gpt-4o-mini",
                               settings={"model_kwargs": {"mock_response": steps_reply}})
    session = Session.create(store, "chat")
    runner = ChatRunner(session, model="gpt-4o-mini", long_term=long_term, mock_response="Noted.")

    first = runner.send("Please email me rather than calling. My sister Ola is vegetarian.")
    assert memory_messages(runner.last_request) == []
    stored = long_term.records()
    assert sorted(r["summary"] for r in stored) == ["Marta wants to be contacted by email",
                                                    "Marta's sister Ola is vegetarian"]
    assert stored[-1]["provenance"]["message_ids"] == [first["parent_id"], first["id"]]
    assert stored[-1]["provenance"]["turn_index"] == 1 and stored[-1]["tags"] == ["contact"]

    second = runner.send("How will you reach me?")
    assert memory_messages(runner.last_request) == [
        f"{MEMORY_BLOCK_HEADER}\n- [global] Marta wants to be contacted by email"]
    assert second["metadata"]["long_term_memories"] == 1
    recall = long_term.diagnostics_log[-2]
    assert recall["step"] == "prepare_request" and recall["plan"]["source"] == "model"
    assert recall["scopes"]["GLOBAL_MEMORY"]["rerank"]["status"] == "reranked"
    extraction = long_term.last_diagnostics
    assert extraction["step"] == "after_turn" and extraction["stored"] == []  # the same facts again: duplicates
    assert len(long_term.records()) == 2
