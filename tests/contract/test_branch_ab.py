"""The Compaction lab's quick A/B as the engine builds it: two arms on one branch, each fact a probe."""
from memorylab import Session
from memorylab.experiments import Experiments
from memorylab.experiments.branch_ab import branch_ab_spec
from memorylab.io import import_session, read_export
from memorylab.samples import SAMPLE_DIR

FACTS = ["Priya Raman", "48 GB", "a fact no message states"]


def test_two_arms_on_a_branch_run_as_an_experiment_with_one_probe_per_fact(store):
    import_session(store, read_export(SAMPLE_DIR / "sessions" / "long_project.json"))
    session = Session.open(store, "long-migration-project", agent_id="project-assistant")
    leaf_id = session.get_latest_leaf_id()
    arms = [{"name": "A", "strategy": "none"},
            {"name": "B", "strategy": "extractive", "protect_head": 1, "tail_token_budget": 100,
             "min_tail_messages": 1}]
    spec = branch_ab_spec(session, leaf_id, arms, FACTS)
    results = Experiments(store).run(spec)
    assert results.trial == 1 and {run["arm"] for run in results.runs} == {"A", "B"}
    (case,) = Experiments(store).get("quick-ab-long-migration-project").cases
    assert (case.session, case.agent, case.tenant, case.leaf) == (session.session_id, "project-assistant", "default",
                                                                  leaf_id)
    kept = {run["arm"]: {fact["fact"]: fact["kept"] for score in run["scores"] for fact in score["facts"]}
            for run in results.runs}
    assert kept["A"] == {"Priya Raman": True, "48 GB": True, "a fact no message states": False}
    assert kept["B"]["a fact no message states"] is False and sum(kept["B"].values()) <= sum(kept["A"].values())
