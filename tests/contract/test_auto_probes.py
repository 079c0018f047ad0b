"""Experiments on sessions nobody wrote probes for, on both backends: cases selected from the store,
probes drawn from each branch's artifact ledger, and a ``recorded`` arm that replays the agent's own
compactions beside memorylab's strategies."""
from pathlib import Path

import pytest

from memorylab import InvalidInputError, Session
from memorylab.experiments import Experiments, parse_spec
from memorylab.experiments.auto_probes import auto_probes
from memorylab.importers import import_source
from memorylab.io import import_session, read_export
from memorylab.samples import SAMPLE_DIR

CLAUDE_CODE = Path(__file__).parents[1] / "data" / "claude_code"
MODEL_FREE_ARMS = [
    {"name": "full", "strategy": "none"},
    {"name": "truncate", "strategy": "truncate", "keep_recent": 2, "max_tool_output_chars": 40},
    {"name": "window", "strategy": "window", "max_length": 600},
    {"name": "extractive", "strategy": "extractive", "protect_head": 1, "tail_token_budget": 30},
    {"name": "extractive-long-tail", "strategy": "extractive", "protect_head": 1, "tail_token_budget": 90},
    {"name": "mask", "strategy": "mask", "keep_recent": 2},
    {"name": "agent", "strategy": "recorded"},
]
"""Every strategy that needs no model (none, truncate, window, extractive, mask) and the recorded one."""


@pytest.fixture
def claude_code_store(store):
    for name in ("compacted.jsonl", "compacted-mid-file.jsonl", "tool-use.jsonl"):
        import_source(store, CLAUDE_CODE / name)
    import_session(store, read_export(SAMPLE_DIR / "sessions" / "support_order.json"))
    return store


def selection_spec(**select):
    return {"name": "own-sessions", "arms": MODEL_FREE_ARMS,
            "cases": [{"select": {"source": "claude-code", **select}, "limit": 10}]}


def test_auto_probes_come_from_the_ledger_before_the_kept_tail_and_are_deterministic(store):
    import_session(store, read_export(SAMPLE_DIR / "sessions" / "support_order.json"))
    history = Session.open(store, "support-order-4471", agent_id="support-bot").get_history(apply_compactions=False)
    probes = auto_probes(history)
    assert probes == auto_probes(history)
    assert {"A-4471", "€49.90", "2026-10-09"} <= {fact for probe in probes for fact in probe.facts}
    assert {probe.kind for probe in probes} == {"artifact", "recall", "decision"}
    assert len({probe.id for probe in probes}) == len(probes)
    tail_only = auto_probes(history[-2:])
    assert tail_only == ()
    assert len(auto_probes(history, limit=5)) == 5


def test_a_selection_by_source_runs_offline_with_the_model_free_arms_and_the_recorded_one(claude_code_store):
    results = Experiments(claude_code_store).run(selection_spec())
    cases = results.cases
    imported = {row["session_id"] for row in claude_code_store.sessions.list(agent_id="claude-code")}
    asked = {session_id for session_id in imported if auto_probes(
        Session.open(claude_code_store, session_id, agent_id="claude-code").get_history(apply_compactions=False))}
    assert len(asked) >= 2 and sorted(cases) == sorted(asked), "a session with nothing to ask about is left out"
    assert "support-order-4471" not in cases  # a memorylab sample, not a Claude Code import
    assert results.complete
    runs = results.runs_frame()
    recorded = runs[runs["arm"] == "agent"]
    compacted = {case for case in cases if Session(claude_code_store, case, agent_id="claude-code").get_compactions()}
    assert compacted
    assert set(recorded[recorded["error"].isna()]["case"]) == compacted
    assert set(recorded[recorded["error"].notna()]["case"]) == set(cases) - compacted
    assert all("no compaction is recorded" in error for error in recorded["error"].dropna())
    full = runs[runs["arm"] == "full"]
    assert (full["score"] == 1.0).all(), "the full history holds every fact its own ledger lists"
    board = results.leaderboard()
    assert set(board["arm"]) == {arm["name"] for arm in MODEL_FREE_ARMS}
    assert {arm["strategy"] for arm in MODEL_FREE_ARMS} == {"none", "truncate", "window", "extractive", "mask",
                                                             "recorded"}
    # Two cases or more: every arm's mean comes with its 95% interval around it.
    assert (board["score_low"] <= board["score"]).all() and (board["score"] <= board["score_high"]).all()


def test_the_agents_own_summaries_are_scored_on_the_stored_branch(claude_code_store):
    session_id = "b8e14d20-6f3a-4c97-a5d2-7e90c1f38b64"  # compacted.jsonl: two compactions
    spec = {"name": "one", "arms": [{"name": "agent", "strategy": "recorded"}, {"name": "full", "strategy": "none"}],
            "cases": [{"name": "httpkit", "session": session_id, "agent": "claude-code", "probes": "auto"}]}
    results = Experiments(claude_code_store).run(spec)
    agent, full = results.run("agent", "httpkit"), results.run("full", "httpkit")
    overlays = Session.open(claude_code_store, session_id, agent_id="claude-code").get_compactions()
    assert overlays[-1]["summary"] in agent["summary"]  # the agent's newest summary is what the arm replays
    assert agent["tokens_before"] == full["tokens_before"]
    assert agent["tokens_after"] < agent["tokens_before"]
    assert agent["score"] < full["score"] == 1.0


def test_automatic_probes_are_saved_with_the_experiment_so_trials_compare(claude_code_store):
    experiments = Experiments(claude_code_store)
    first = experiments.run(selection_spec())
    second = experiments.run(selection_spec())
    saved = experiments.get("own-sessions")
    assert not saved.selections and all(case.probes for case in saved.cases)
    assert first.probes_frame()["probe"].tolist() == second.probes_frame()["probe"].tolist()
    assert first.leaderboard()["score"].tolist() == second.leaderboard()["score"].tolist()


def test_spec_level_auto_fills_cases_without_probes_and_keeps_written_ones(claude_code_store):
    spec = parse_spec({"name": "mixed", "probes": "auto", "arms": [{"name": "full", "strategy": "none"}], "cases": [
        {"name": "support", "session": "support-order-4471", "agent": "support-bot"},
        {"name": "written", "session": "support-order-4471", "agent": "support-bot",
         "probes": [{"id": "order", "question": "Which order?", "facts": ["A-4471"]}]}]})
    assert spec.case("support").auto_probes and not spec.case("written").auto_probes
    results = Experiments(claude_code_store).run(spec)
    assert [p.id for p in Experiments(claude_code_store).get("mixed").case("written").probes] == ["order"]
    assert len(Experiments(claude_code_store).get("mixed").case("support").probes) > 5
    assert results.complete


def test_selection_and_auto_probe_mistakes_are_refused_before_anything_runs(claude_code_store):
    experiments = Experiments(claude_code_store)
    with pytest.raises(InvalidInputError, match="matches no session"):
        experiments.run(selection_spec(min_messages=100_000))
    with pytest.raises(InvalidInputError) as refused:
        parse_spec({"name": "bad", "probes": "some", "arms": [{"name": "full", "strategy": "none"}],
                    "cases": [{"select": {"origin": "x", "min_messages": -1}, "limit": 0, "probes": []}]})
    message = str(refused.value)
    for expected in ("probes can only be 'auto'", "unknown key 'origin'", "min_messages", "limit"):
        assert expected in message
    assert experiments.listing() == []


def test_a_branch_with_nothing_to_ask_about_says_so(store):
    session = Session.create(store, "small-talk")
    for i, text in enumerate(["hello there", "hi, how can I help", "just saying hi", "nice"]):
        session.append_message({"id": f"m{i}", "role": "user" if i % 2 == 0 else "assistant",
                                "parts": [{"type": "text", "text": text}]})
    spec = {"name": "empty", "arms": [{"name": "full", "strategy": "none"}],
            "cases": [{"name": "chat", "session": "small-talk", "probes": "auto"}]}
    with pytest.raises(InvalidInputError, match="write its probes by hand"):
        Experiments(store).run(spec)


def test_a_selection_stays_in_the_experiments_tenant(store):
    import_source(store, CLAUDE_CODE / "compacted.jsonl", tenant_id="other")
    with pytest.raises(InvalidInputError, match="matches no session of tenant 'default'"):
        Experiments(store).run(selection_spec())
    with pytest.raises(InvalidInputError, match="case_tenants"):
        Experiments(store).run(selection_spec(tenant="other"))
    assert Experiments(store, case_tenants=["other"]).run(selection_spec(tenant="other")).complete
