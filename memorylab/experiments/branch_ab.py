"""A two-arm comparison on one branch, as a spec: each fact that must survive becomes a recall probe.

The Compaction lab's Compare A/B runs it; so can a notebook (``Experiments(store).run(spec)``), and
every run is kept as a trial of ``quick-ab-<session id>`` like any other experiment's.
"""


def fact_probes(facts) -> list[dict]:
    """One recall probe per fact, asking whether the context still holds it."""
    return [{"id": f"fact-{number}", "kind": "recall", "question": f"Does the context still hold “{fact}”?",
             "facts": [fact]} for number, fact in enumerate(facts, 1)]


def branch_ab_spec(session, leaf_id, arms, facts) -> dict:
    """The experiment of ``arms`` (spec dicts) on the branch of ``session`` ending at ``leaf_id``,
    each of ``facts`` a probe."""
    case = {"name": session.session_id, "session": session.session_id, "agent": session.agent_id,
            "tenant": session.tenant_id, "leaf": leaf_id, "probes": fact_probes(facts)}
    return {"name": f"quick-ab-{session.session_id}", "arms": arms, "cases": [case],
            "description": f"A/B from the Compaction lab on {session.session_id}, branch {leaf_id}."}
