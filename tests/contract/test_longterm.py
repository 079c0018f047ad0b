"""Long-term memory with plain-function model steps: normalization, scopes, every degraded path,
budgets and the record API, on a real SQLite file."""
import math
import sqlite3

import pytest

from memorylab import InvalidInputError, NotFoundError, Session, Store
from memorylab.memory.longterm import (
    DEFAULT_SETTINGS,
    DIAGNOSTICS_LOG_SIZE,
    GLOBAL,
    MEMORY_BLOCK_HEADER,
    SESSION,
    LongTermMemory,
    fit_budget,
    normalize_memory,
)
from memorylab.store.ddl import SQLiteDDL
from memorylab.store.migrations import MIGRATIONS, apply_migrations

SCHEMA = DEFAULT_SETTINGS["body_schema"]
SECRET = "sk-test-LONGTERM123"


def memory(store, **kwargs):
    return LongTermMemory(store, workspace="lab", **kwargs)


def codes(result):
    return [event["code"] for event in result["diagnostics"]["events"]]


def ids(memories):
    return [m["id"] for m in memories]


class Step:
    """A model step played by a script: each call answers with the next reply (an exception is raised)."""

    def __init__(self, *replies):
        self.replies, self.calls = list(replies), []

    def __call__(self, payload):
        self.calls.append(payload)
        reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        if isinstance(reply, Exception):
            raise reply
        return reply


def plan(query, *tags, include_global=True, include_session=True):
    return {"query": query, "tags": list(tags), "include_global": include_global, "include_session": include_session}


def decide(*decisions):
    return {"decisions": [dict(zip(("id", "useful", "score"), d)) for d in decisions]}


@pytest.fixture
def lab(store):
    """Ids 1-2 global, 3-4 of session "s1", 5 of session "s2"."""
    lab = memory(store)
    lab.add_record("Marta wants to be contacted by email", tags=["contact"], importance=0.9)
    lab.add_record("Marta's sister Ola is vegetarian", tags=["diet", "family"])
    lab.add_record("Refund of 49.90 for order A-4471 is pending", session_id="s1", tags=["refund"])
    lab.add_record("Order B-1093 ships with DHL", session_id="s1", tags=["shipping"])
    lab.add_record("Secret refund code 7781 of the other session", session_id="s2", tags=["refund"])
    return lab


# -- normalization ---------------------------------------------------------------------------------

@pytest.mark.parametrize("item, expected", [
    ({"scope": "global_memory", "summary": "a"}, {"scope": GLOBAL}),
    ({"scope": " Global ", "summary": "a"}, {"scope": GLOBAL}),
    ({"scope": "global memory", "summary": "a"}, {"scope": GLOBAL}),
    ({"scope": "session", "summary": "a"}, {"scope": SESSION}),
    ({"scope": "team", "summary": "a"}, {"scope": SESSION}),
    ({"scope": None, "summary": "a"}, {"scope": SESSION}),
    ({"summary": "  two\n lines  "}, {"summary": "two lines"}),
    ({"summary": "a", "tags": [" Contact ", "contact", "", "Refund  Policy", 7]},
     {"tags": ["contact", "refund policy"]}),
    ({"summary": "a", "tags": "diet, family ,diet"}, {"tags": ["diet", "family"]}),
    ({"summary": "a", "tags": 5}, {"tags": []}),
    ({"summary": "a", "tags": [f"t{i}" for i in range(20)]}, {"tags": [f"t{i}" for i in range(12)]}),
    ({"summary": "a", "importance": 3}, {"importance": 1.0}),
    ({"summary": "a", "importance": -2}, {"importance": 0.0}),
    ({"summary": "a", "importance": "0.25"}, {"importance": 0.25}),
    ({"summary": "a", "importance": "high"}, {"importance": 0.5}),
    ({"summary": "a", "importance": True}, {"importance": 0.5}),
    ({"summary": "a", "importance": math.nan}, {"importance": 0.5}),
    ({"summary": "", "body": {"evidence": " said so ", "fact": "x"}},
     {"summary": "", "body": {"fact": "x", "evidence": "said so"}}),
    ({"summary": "a", "body": "a bare string"}, {"body": {"fact": "a bare string"}}),
    ({"summary": "a", "body": {"fact": "  ", "evidence": None}}, {"body": {}}),
    ({"summary": "a", "body": {"fact": "x", "mood": "calm"}}, {"body": {"fact": "x"}}),
    ({"summary": "a", "body": {"fact": math.inf, "evidence": [1, math.nan]}},
     {"body": {"fact": "Infinity", "evidence": "[1,NaN]"}}),  # SQLite's JSON would refuse them
])
def test_the_normalization_table(item, expected):
    normalized, _ = normalize_memory(item, body_schema=SCHEMA, default_importance=0.5)
    assert {key: normalized[key] for key in expected} == expected


@pytest.mark.parametrize("item, reason", [
    ({"summary": "", "body": {}}, "empty_memory"),
    ({"summary": "   ", "body": {"fact": " ", "mood": "calm"}}, "empty_memory"),
    ({"scope": "GLOBAL_MEMORY"}, "empty_memory"),
    ("a string", "not_an_object"),
    (None, "not_an_object"),
])
def test_items_with_nothing_to_remember_are_skipped(item, reason):
    assert normalize_memory(item, body_schema=SCHEMA, default_importance=0.5) == (None, {"reason": reason})


def test_unknown_body_keys_are_dropped_and_reported_and_an_empty_schema_keeps_them(store):
    item = {"scope": "global", "summary": "Marta likes tea", "body": {"fact": "tea", "mood": "calm"}}
    result = memory(store, extractor=Step({"memories": [item]})).after_turn("s1", "I like tea", "Noted")
    assert result["stored"][0]["body"] == {"fact": "tea"}
    assert result["diagnostics"]["normalized"] == [{"index": 0, "dropped_body_keys": ["mood"]}]
    free = memory(store, extractor=Step({"memories": [{**item, "summary": "x"}]}), settings={"body_schema": {}})
    assert free.after_turn("s1", "I like tea", "Noted")["stored"][0]["body"] == {"fact": "tea", "mood": "calm"}


# -- after_turn ------------------------------------------------------------------------------------

def test_after_turn_stores_scoped_records_with_provenance_from_the_stored_turn(store):
    session = Session.create(store, "s1")
    user = session.append_message({"role": "user", "parts": [{"type": "text", "text": "Email me, never call."}]})
    answer = session.append_message({"role": "assistant", "parts": [{"type": "text", "text": "Email it is."}]})
    extractor = Step({"memories": [
        {"scope": "GLOBAL_MEMORY", "summary": "Marta wants email, not calls", "tags": ["contact"], "importance": 0.9},
        {"scope": "SESSION_MEMORY", "summary": "This ticket is about contact preferences"},
    ]})
    lab = memory(store, extractor=extractor)
    result = lab.after_turn("s1", "Email me, never call.", "Email it is.")
    first, second = result["stored"]
    assert (first["scope"], first["kind"], first["session_id"]) == (GLOBAL, "global_memory", None)
    assert (second["scope"], second["kind"], second["session_id"]) == (SESSION, "session_memory", "s1")
    assert first["collection"] == "memory" and first["workspace"] == "lab"
    assert first["provenance"] == {"source": "after_turn", "session_id": "s1", "extractor": "Step",
                                   "message_ids": [user["id"], answer["id"]], "turn_index": 1,
                                   "tenant_id": "default", "agent_id": "default"}
    assert first["vector_index"] == {"requested": False, "backend": store.search_engine.name, "available": True}
    assert result["skipped"] == [] and result["diagnostics"]["stored"] == [first["id"], second["id"]]
    assert extractor.calls == [{"session_id": "s1", "user_content": "Email me, never call.",
                                "assistant_content": "Email it is.", "body_schema": SCHEMA, "max_memories": 5,
                                "instruction": DEFAULT_SETTINGS["extract_instruction"]}]
    assert lab.get_record(first["id"]) == first
    explicit = memory(store, extractor=Step({"memories": [{"summary": "another"}]}))
    stored = explicit.after_turn("s1", "x", "y", message_ids=["m1", "m2"])["stored"][0]
    assert stored["provenance"]["message_ids"] == ["m1", "m2"] and "turn_index" not in stored["provenance"]


def test_without_an_extractor_extraction_is_disabled(store):
    result = memory(store).after_turn("s1", "I like tea", "Noted")
    assert result["stored"] == [] and result["skipped"] == [{"reason": "extract_disabled"}]
    assert codes(result) == ["extract_disabled"] and result["diagnostics"]["extractor"] is None


def test_an_empty_turn_is_skipped_without_calling_the_model(store):
    extractor = Step({"memories": [{"summary": "x"}]})
    result = memory(store, extractor=extractor).after_turn("s1", "  \n", "")
    assert result["skipped"] == [{"reason": "empty_turn"}] and codes(result) == ["empty_turn"]
    assert extractor.calls == []


@pytest.mark.parametrize("reply, message", [
    (RuntimeError(f"provider down, key {SECRET}"), "RuntimeError: provider down, key [redacted]"),
    ({"items": []}, "a 'memories' list"),
    (["not", "a", "dict"], "a 'memories' list"),
])
def test_a_failing_extractor_is_retried_once_then_reported_with_its_error(store, reply, message):
    extractor = Step(reply)
    result = memory(store, extractor=extractor).after_turn("s1", "I like tea", "Noted")
    assert len(extractor.calls) == 2 and result["diagnostics"]["attempts"] == 2
    assert result["stored"] == [] and codes(result) == ["extract_failed"]
    [skip] = result["skipped"]
    assert skip["reason"] == "extract_failed" and message in skip["error"] and SECRET not in skip["error"]


def test_a_retry_that_succeeds_stores_the_memories(store):
    extractor = Step(RuntimeError("flaky"), {"memories": [{"summary": "tea"}]})
    result = memory(store, extractor=extractor).after_turn("s1", "I like tea", "Noted")
    assert [r["summary"] for r in result["stored"]] == ["tea"] and result["diagnostics"]["attempts"] == 2


def test_extra_items_duplicates_and_empty_items_are_skipped_with_reasons(store):
    memory(store).add_record("Marta likes tea")
    items = [{"scope": "global", "summary": "marta likes TEA"}, {"summary": ""}, {"summary": "Ola is vegetarian"},
             {"summary": "ola is vegetarian"}, {"summary": "one too many"}]
    lab = memory(store, extractor=Step({"memories": items}), settings={"max_memories": 4})
    result = lab.after_turn("s1", "tea and food", "Noted")
    assert [r["summary"] for r in result["stored"]] == ["Ola is vegetarian"]
    assert [(s["index"], s["reason"]) for s in result["skipped"]] == [
        (0, "duplicate"), (1, "empty_memory"), (3, "duplicate"), (4, "over_max_memories")]
    assert result["skipped"][0]["of_id"] == 1 and result["skipped"][2]["of_index"] == 2


def test_long_turns_are_cut_with_a_visible_marker(store):
    extractor = Step({"memories": []})
    result = memory(store, extractor=extractor, settings={"max_input_chars": 100}).after_turn("s1", "u" * 500, "ok")
    assert extractor.calls[0]["user_content"] == "u" * 100 + "... [truncated 400 chars]"
    assert extractor.calls[0]["assistant_content"] == "ok"
    assert result["diagnostics"]["truncated"] == {"user_content": 400}


# -- prepare_request -------------------------------------------------------------------------------

def test_session_memories_never_reach_another_session(lab):
    for prompt in ("refund code 7781 other session", "nothing matches this at all", ""):
        for session_id in ("s1", "s3"):
            found = lab.prepare_request(session_id, prompt)
            assert all(m["session_id"] in (None, session_id) for m in found["memories"])
            assert "7781" not in found["rendered"]
    assert ids(lab.prepare_request("s2", "refund")["SESSION_MEMORY"]) == [5]
    assert lab.prepare_request("s3", "refund")["SESSION_MEMORY"] == []
    assert ids(lab.records(session_id="s2")) == [5] and ids(lab.records(scope="global")) == [2, 1]


def test_the_request_package_is_global_first_with_rendered_lines(lab):
    found = lab.prepare_request("s1", "How do I get my refund, and by email?")
    assert ids(found["GLOBAL_MEMORY"]) == [1] and ids(found["SESSION_MEMORY"]) == [3]
    assert found["memories"] == found["GLOBAL_MEMORY"] + found["SESSION_MEMORY"]
    assert found["rendered"] == (f"{MEMORY_BLOCK_HEADER}\n- [global] Marta wants to be contacted by email\n"
                                 "- [session] Refund of 49.90 for order A-4471 is pending")
    diagnostics = found["diagnostics"]
    assert diagnostics["plan"]["source"] == "prompt" and diagnostics["index"]["backend"] == lab.store.search_engine.name
    assert diagnostics["scopes"][GLOBAL]["candidate_source"] == "keyword"
    assert diagnostics["selected"] == {GLOBAL: [1], SESSION: [3]}
    assert lab.last_diagnostics is diagnostics


def test_when_no_keyword_matches_the_whole_scope_is_the_candidate_list(lab):
    found = lab.prepare_request("s1", "zebra")
    assert ids(found["GLOBAL_MEMORY"]) == [1, 2]  # importance first
    assert ids(found["SESSION_MEMORY"]) == [4, 3]  # then the newest
    assert [(e["scope"], e["source"]) for e in found["diagnostics"]["events"]
            if e["code"] == "memory_candidates_fallback"] == [(GLOBAL, "all"), (SESSION, "all")]


def test_tag_filters_narrow_the_candidates_and_fall_back_step_by_step(lab):
    result = memory(lab.store, planner=Step(plan("Marta", "Diet"))).prepare_request("s1", "anything")
    assert ids(result["GLOBAL_MEMORY"]) == [2]  # both mention Marta; only one carries the tag
    assert result["diagnostics"]["scopes"][GLOBAL]["candidate_source"] == "keyword"
    by_tag_only = memory(lab.store, planner=Step(plan("zebra", "shipping"))).prepare_request("s1", "x")
    assert ids(by_tag_only["SESSION_MEMORY"]) == [4]
    assert by_tag_only["diagnostics"]["scopes"][SESSION]["candidate_source"] == "tags"
    assert by_tag_only["diagnostics"]["scopes"][GLOBAL]["candidate_source"] == "all"


def test_every_tag_of_the_plan_must_be_on_a_record_or_the_tags_are_ignored(lab):
    lab.add_record("Marta's diet is low-carb", tags=["diet"])
    both = memory(lab.store, planner=Step(plan("Marta", "family", "diet"))).prepare_request("s1", "x")
    assert ids(both["GLOBAL_MEMORY"]) == [2]  # 6 carries only one of the two tags
    assert both["diagnostics"]["scopes"][GLOBAL]["candidate_source"] == "keyword"
    apart = memory(lab.store, planner=Step(plan("Marta", "diet", "contact"))).prepare_request("s1", "x")
    assert apart["diagnostics"]["scopes"][GLOBAL]["candidate_source"] == "all"  # no record carries both
    assert sorted(ids(apart["GLOBAL_MEMORY"])) == [1, 2, 6]


def test_a_fragment_that_no_word_matches_is_found_as_a_substring(lab):
    pizza = lab.add_record("Marta's favourite food is pizza")
    lunch = lab.add_record("Usual lunch order", body={"fact": "a quattro formaggi"}, importance=0.9)
    found = lab.prepare_request("s1", "IZZA")
    assert ids(found["GLOBAL_MEMORY"]) == [pizza["id"]]
    assert found["diagnostics"]["scopes"][GLOBAL]["candidate_source"] == "substring"
    assert ids(lab.prepare_request("s1", "ormagg")["GLOBAL_MEMORY"]) == [lunch["id"]]  # body values too
    for literal in ("fact", "%", "_", "\\", "izz%"):  # not the body's keys; LIKE's wildcards are plain characters
        assert lab.prepare_request("s1", literal)["diagnostics"]["scopes"][GLOBAL]["candidate_source"] == "all"


def test_the_plan_can_leave_a_scope_out(lab):
    result = memory(lab.store, planner=Step(plan("refund", include_global=False))).prepare_request("s1", "x")
    assert result["GLOBAL_MEMORY"] == [] and result["diagnostics"]["scopes"][GLOBAL] == {"included": False}
    assert ids(result["SESSION_MEMORY"]) == [3]


@pytest.mark.parametrize("reply", [RuntimeError("planner offline"), {"tags": []},
                                   {"query": "x", "include_global": "yes"}, "not a dict"])
def test_a_failing_planner_falls_back_to_the_prompt_as_the_query(lab, reply):
    planner = Step(reply)
    result = memory(lab.store, planner=planner).prepare_request("s1", "refund")
    assert len(planner.calls) == 2 and codes(result)[0] == "memory_plan_failed"
    assert result["diagnostics"]["events"][0]["attempts"] == 2
    assert result["diagnostics"]["plan"] == {"query": "refund", "tags": [], "include_global": True,
                                             "include_session": True, "source": "fallback"}
    assert ids(result["SESSION_MEMORY"]) == [3]


def test_the_planner_sees_the_prompt_and_the_tags_this_session_can_reach(lab):
    planner = Step(plan("refund"))
    memory(lab.store, planner=planner).prepare_request("s1", "my refund?")
    assert planner.calls == [{"session_id": "s1", "prompt": "my refund?",
                              "tags": ["contact", "diet", "family", "refund", "shipping"]}]


def test_rerank_is_skipped_below_the_minimum_and_without_a_reranker(lab):
    reranker = Step(decide((1, False)))
    result = memory(lab.store, reranker=reranker).prepare_request("s1", "email")  # one global candidate
    assert ids(result["GLOBAL_MEMORY"]) == [1]
    assert [c["scope"] for call in reranker.calls for c in call["candidates"]] == [SESSION, SESSION]
    skipped = [e for e in result["diagnostics"]["events"] if e["code"] == "memory_rerank_skipped"]
    assert skipped[0] == {"code": "memory_rerank_skipped", "scope": GLOBAL, "reason": "too_few_candidates",
                          "candidates": 1, "min": 2}
    plain = lab.prepare_request("s1", "zebra")
    assert [e["reason"] for e in plain["diagnostics"]["events"] if e["code"] == "memory_rerank_skipped"] == [
        "no_reranker", "no_reranker"]


def test_rerank_orders_by_score_keeps_undecided_candidates_and_drops_rejected_ones(lab):
    reranker = Step({"decisions": [{"id": "3", "useful": True, "score": 0.2, "reason": "weak"},
                                   {"id": 99, "useful": False}, {"id": 1, "useful": "no"}]})
    result = memory(lab.store, reranker=reranker, settings={"rerank_min_candidates": 1}).prepare_request("s1", "zebra")
    assert ids(result["GLOBAL_MEMORY"]) == [2]  # 1 rejected, 2 undecided and kept
    assert ids(result["SESSION_MEMORY"]) == [3, 4]  # scored before undecided
    assert reranker.calls[1] == {"query": "zebra", "candidates": [
        {"id": 4, "summary": "Order B-1093 ships with DHL", "tags": ["shipping"], "scope": SESSION},
        {"id": 3, "summary": "Refund of 49.90 for order A-4471 is pending", "tags": ["refund"], "scope": SESSION}]}
    decisions = result["diagnostics"]["scopes"][SESSION]["rerank"]["decisions"]
    assert decisions == [{"id": 4, "useful": True, "score": None, "reason": "no decision: kept"},
                         {"id": 3, "useful": True, "score": 0.2, "reason": "weak"}]
    scored = memory(lab.store, reranker=Step(decide((1, True, 0.1), (2, True, 0.8))))
    assert ids(scored.prepare_request("s1", "zebra")["GLOBAL_MEMORY"]) == [2, 1]


@pytest.mark.parametrize("reply, error", [
    (RuntimeError("rerank timeout"), "rerank timeout"),
    ({"decisions": []}, "no decisions"),  # an empty answer is a failure too, not "keep everything"
    ({"decisions": [{"useful": False}, "drop 1"]}, "no decisions"),
])
def test_a_failing_reranker_is_retried_then_the_keyword_order_is_kept(lab, reply, error):
    reranker = Step(reply)
    result = memory(lab.store, reranker=reranker).prepare_request("s1", "zebra")
    assert len(reranker.calls) == 4  # two scopes, two attempts each
    assert ids(result["GLOBAL_MEMORY"]) == [1, 2] and ids(result["SESSION_MEMORY"]) == [4, 3]
    failures = [e for e in result["diagnostics"]["events"] if e["code"] == "memory_rerank_failed"]
    assert [(e["scope"], e["attempts"]) for e in failures] == [(GLOBAL, 2), (SESSION, 2)]
    assert error in failures[0]["error"]
    recovering = Step(RuntimeError("flaky"), decide((1, True, 0.1), (2, True, 0.9)))
    result = memory(lab.store, reranker=recovering).prepare_request("s1", "zebra")
    assert ids(result["GLOBAL_MEMORY"]) == [2, 1]
    assert result["diagnostics"]["scopes"][GLOBAL]["rerank"]["attempts"] == 2
    assert "memory_rerank_failed" not in codes(result)


@pytest.mark.parametrize("decision", [
    {"useful": "drop"}, {"useful": 0}, {"useful": False}, {"useful": "irrelevant"}, {"useful": " Discard "},
    {"useful": "not_useful"}, {"useful": "false"}, {"keep": False}, {"decision": "dropped"},
])
def test_a_decision_that_says_drop_in_any_of_its_words_drops_the_record(lab, decision):
    reranker = Step({"decisions": [{"id": 1, **decision}, {"id": 2, "useful": True, "score": 0.5}]})
    assert ids(memory(lab.store, reranker=reranker).prepare_request("s1", "Marta")["GLOBAL_MEMORY"]) == [2]


def test_a_useful_decision_without_a_score_counts_as_fully_relevant(lab):
    unscored = Step({"decisions": [{"id": 1, "useful": True, "score": 0.4}, {"id": 2, "useful": "yes"}]})
    result = memory(lab.store, reranker=unscored).prepare_request("s1", "Marta")
    assert ids(result["GLOBAL_MEMORY"]) == [2, 1]
    verdicts = result["diagnostics"]["scopes"][GLOBAL]["rerank"]["decisions"]
    assert {v["id"]: v["score"] for v in verdicts} == {1: 0.4, 2: 1.0}
    as_text = Step({"decisions": [{"id": 1, "useful": True, "score": "0.9"}, {"id": 2, "useful": True, "score": 0.5}]})
    assert ids(memory(lab.store, reranker=as_text).prepare_request("s1", "Marta")["GLOBAL_MEMORY"]) == [1, 2]


def test_a_rerank_that_drops_everything_falls_back_to_the_candidates(lab):
    rejecting = Step(decide((1, False), (2, False), (3, False), (4, False)))
    result = memory(lab.store, reranker=rejecting).prepare_request("s1", "zebra")
    assert ids(result["GLOBAL_MEMORY"]) == [1, 2] and ids(result["SESSION_MEMORY"]) == [4, 3]
    assert codes(result).count("memory_rerank_empty_fallback") == 2
    assert result["diagnostics"]["scopes"][GLOBAL]["rerank"]["status"] == "empty_fallback"


def test_without_the_safeguard_a_rerank_that_drops_everything_leaves_the_scope_empty(lab):
    rejecting = Step(decide((1, False), (2, False), (3, True, 0.5)))
    result = memory(lab.store, reranker=rejecting,
                    settings={"keep_candidates_on_empty_rerank": False}).prepare_request("s1", "zebra")
    assert result["GLOBAL_MEMORY"] == [] and ids(result["SESSION_MEMORY"]) == [3, 4]
    assert [e["scope"] for e in result["diagnostics"]["events"] if e["code"] == "memory_rerank_empty"] == [GLOBAL]
    assert "memory_rerank_empty_fallback" not in codes(result)


# -- budgets ---------------------------------------------------------------------------------------

def record(record_id, summary, **body):
    return {"id": record_id, "scope": GLOBAL, "summary": summary, "body": body}


def test_an_item_over_the_total_budget_is_skipped_and_later_ones_still_fit():
    items = [record(1, "a" * 30), record(2, "b" * 60), record(3, "c" * 20)]
    kept, report = fit_budget(items, max_total_chars=80, max_item_chars=100)
    assert ids(kept) == [1, 3] and report["used_chars"] == len("[global] " + "a" * 30) + len("[global] " + "c" * 20)
    assert report["skipped"] == [{"id": 2, "reason": "over_total_budget", "chars": 69}]


def test_an_item_over_its_budget_loses_its_body_first_then_is_skipped():
    items = [record(1, "short", fact="x" * 100), record(2, "s" * 120), record(3, "fits", fact="small")]
    kept, report = fit_budget(items, max_total_chars=1000, max_item_chars=60)
    assert [m["rendered"] for m in kept] == ["[global] short", "[global] fits (fact: small)"]
    assert report["compacted"] == [1]
    assert report["skipped"] == [{"id": 2, "reason": "over_item_budget", "chars": 129}]


def test_when_no_memory_fits_whole_the_best_ranked_one_is_shortened_to_fit():
    items = [record(1, "a" * 100), record(2, "b" * 90)]
    kept, report = fit_budget(items, max_total_chars=50, max_item_chars=400)
    assert [m["rendered"] for m in kept] == ["[global] " + "a" * 40 + "…"]
    assert report["shortened"] == [1] and report["used_chars"] == 50
    assert report["skipped"] == [{"id": 2, "reason": "over_total_budget", "chars": 99}]
    short_behind = fit_budget([record(1, "a" * 100), record(2, "b" * 10)], max_total_chars=50, max_item_chars=400)
    assert ids(short_behind[0]) == [2] and short_behind[1]["shortened"] == []  # a whole line is still preferred
    assert fit_budget(items, max_total_chars=10, max_item_chars=400)[0] == []  # no room for a single letter
    [cut], report = fit_budget(items, max_total_chars=1000, max_item_chars=30)
    assert len(cut["rendered"]) == 30 and report["shortened"] == [1]


def test_a_budget_smaller_than_every_memory_still_injects_the_best_one_shortened(lab):
    result = memory(lab.store, settings={"max_total_chars": 30}).prepare_request("s1", "email")
    assert ids(result["memories"]) == [1]
    assert result["rendered"] == f"{MEMORY_BLOCK_HEADER}\n- [global] Marta wants to be co…"
    assert result["diagnostics"]["budget"]["shortened"] == [1]


def test_budgets_apply_to_the_request_and_are_reported(lab):
    lab.add_record("Marta " + "rambles " * 80, tags=["contact"])
    result = memory(lab.store, settings={"max_item_chars": 100, "max_total_chars": 60}).prepare_request("s1", "Marta")
    assert 6 not in ids(result["memories"]) and ids(result["GLOBAL_MEMORY"]) == [1]
    budget = result["diagnostics"]["budget"]
    assert {s["id"]: s["reason"] for s in budget["skipped"]} == {
        6: "over_item_budget", 2: "over_total_budget", 4: "over_total_budget", 3: "over_total_budget"}
    assert sum(len(m["rendered"]) for m in result["memories"]) == budget["used_chars"] <= 60


# -- hostile input ---------------------------------------------------------------------------------

HOSTILE = ['"', '""', "AND", "OR NOT", "NEAR(a b)", "summary:x", "body:*", "*", "^start", "a OR", "(", ")",
           "'; DROP TABLE memory_records; --", "ünïcødé 日本語 🎉", "\x00\x1f", "tags: {refund}", "-refund", "+",
           "a" * 5000, " ".join(f"w{i}" for i in range(500)), ""]


@pytest.mark.parametrize("prompt", HOSTILE)
def test_hostile_prompts_and_plans_never_raise(lab, prompt):
    assert lab.prepare_request("s1", prompt)["diagnostics"]["plan"]["source"] == "prompt"
    planned = memory(lab.store, planner=Step(plan(prompt or "x", prompt)))
    assert len(planned.prepare_request("s1", prompt)["memories"]) >= 2
    assert len(lab.records()) == 5


# -- records for the lab ---------------------------------------------------------------------------

def test_records_can_be_added_edited_and_deleted_and_the_index_follows(lab):
    added = lab.add_record("Prefers window seats", body={"fact": "seat choice"}, tags="travel", importance=0.3,
                           provenance={"note": "typed in the lab"})
    assert (added["scope"], added["session_id"], added["tags"]) == (GLOBAL, None, ["travel"])
    assert added["provenance"] == {"source": "manual", "note": "typed in the lab"}
    edited = lab.update_record(added["id"], summary="Prefers aisle seats", tags=["travel", "flights"])
    assert edited["summary"] == "Prefers aisle seats" and edited["body"] == {"fact": "seat choice"}
    assert edited["updated_at"] >= added["updated_at"]
    finder = memory(lab.store, settings={"rerank_min_candidates": 99})
    assert ids(finder.prepare_request("s1", "aisle")["GLOBAL_MEMORY"]) == [added["id"]]
    assert ids(finder.prepare_request("s1", "seat")["GLOBAL_MEMORY"]) == [added["id"]]  # the body is indexed too
    assert finder.prepare_request("s1", "window")["diagnostics"]["scopes"][GLOBAL]["candidate_source"] == "all"
    moved = lab.update_record(str(added["id"]), scope="session", session_id="s9")
    assert (moved["scope"], moved["kind"], moved["session_id"]) == (SESSION, "session_memory", "s9")
    assert lab.update_record(added["id"], scope="GLOBAL_MEMORY")["session_id"] is None
    assert lab.delete_record(added["id"]) is True and lab.delete_record(added["id"]) is False
    assert lab.get_record(added["id"]) is None
    assert ids(finder.prepare_request("s1", "aisle")["GLOBAL_MEMORY"]) == [1, 2]
    with pytest.raises(NotFoundError):
        lab.update_record(added["id"], summary="gone")


@pytest.mark.parametrize("kwargs, message", [
    ({"summary": "x", "scope": "team"}, "scope must be"),
    ({"summary": "x", "scope": "SESSION_MEMORY"}, "session_id of a SESSION_MEMORY record"),
    ({"summary": "x", "scope": "GLOBAL_MEMORY", "session_id": "s1"}, "belongs to no session"),
    ({"summary": "x", "body": {"mood": "calm"}}, "not in body_schema"),
    ({"summary": "x", "body": "text"}, "body must be a dict"),
    ({"summary": "x", "importance": 2}, "importance must be"),
    ({"summary": "x", "importance": "0.5"}, "importance must be"),
    ({"summary": "  "}, "a summary or a body"),
    ({"summary": 5}, "summary must be a string"),
    ({"summary": "x", "provenance": "typed"}, "provenance must be a dict"),
    ({"summary": "x", "provenance": {"at": object()}}, "provenance must be a dict"),
])
def test_a_person_adding_a_bad_record_gets_a_clear_error(store, kwargs, message):
    kwargs = dict(kwargs)  # the parameters are shared by both backends' runs
    summary = kwargs.pop("summary")
    with pytest.raises(InvalidInputError, match=message):
        memory(store).add_record(summary, **kwargs)
    assert memory(store).records() == []


def test_the_record_api_refuses_bad_ids_fields_and_settings(store):
    lab = memory(store)
    with pytest.raises(InvalidInputError, match="integer"):
        lab.get_record("one")
    with pytest.raises(InvalidInputError, match="cannot update"):
        lab.update_record(1, workspace="other")
    with pytest.raises(InvalidInputError, match="unknown long-term memory settings"):
        memory(store, settings={"max_chars": 5})
    with pytest.raises(InvalidInputError, match="keep_candidates_on_empty_rerank"):
        memory(store, settings={"keep_candidates_on_empty_rerank": "yes"})
    with pytest.raises(InvalidInputError, match="retries"):
        memory(store, settings={"retries": -1})
    with pytest.raises(InvalidInputError, match="callable"):
        memory(store, planner="gpt-4o-mini")
    with pytest.raises(InvalidInputError, match="workspace"):
        LongTermMemory(store, workspace="")
    with pytest.raises(InvalidInputError, match="prompt must be a string"):
        lab.prepare_request("s1", None)


def test_workspaces_do_not_share_records(lab):
    other = LongTermMemory(lab.store, workspace="other")
    assert other.records() == [] and other.get_record(1) is None and other.delete_record(1) is False
    assert other.prepare_request("s1", "refund")["memories"] == []


def test_a_requested_vector_index_is_recorded_and_reported_as_served_by_keyword_search(store):
    lab = memory(store, settings={"vector_index": True})
    added = lab.add_record("Marta likes tea")
    assert added["vector_index"] == {"requested": True, "backend": store.search_engine.name, "available": True}
    result = lab.prepare_request("s1", "tea")
    assert "memory_vector_unavailable" in codes(result)
    assert result["diagnostics"]["index"]["vector_available"] is False
    assert "no embedding backend" in result["diagnostics"]["index"]["note"]


def test_diagnostics_are_kept_on_the_object_in_a_bounded_log(store):
    lab = memory(store)
    for _ in range(DIAGNOSTICS_LOG_SIZE + 5):
        lab.after_turn("s1", "x", "y")
    result = lab.prepare_request("s1", "x")
    assert len(lab.diagnostics_log) == DIAGNOSTICS_LOG_SIZE
    assert lab.diagnostics_log[-1] is lab.last_diagnostics is result["diagnostics"]
    assert lab.diagnostics_log[0]["step"] == "after_turn"


def test_the_migration_adds_memory_records_to_an_existing_database(db_path):
    conn = sqlite3.connect(db_path)
    apply_migrations(SQLiteDDL(conn), MIGRATIONS[:-1])
    conn.execute(f"PRAGMA user_version = {len(MIGRATIONS) - 1}")
    conn.commit()
    conn.close()
    with Store(db_path) as store:
        assert memory(store).add_record("survives the upgrade")["id"] == 1
    with Store(db_path) as store:
        assert [r["summary"] for r in memory(store).prepare_request("s1", "upgrade")["memories"]] == [
            "survives the upgrade"]
