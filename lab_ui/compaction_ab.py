"""The Compaction lab's Compare A/B: two arms on the active branch, run as a stored experiment.

State: the arms' widgets (``A_…`` and ``B_…``, see ``compaction_plans``), ``ab_facts:<session id>``
(the facts that must survive), ``ab_results`` (the last comparison: its branch, experiment, trial
and runs by arm) and ``exp_open`` (the experiment the Experiments page opens on).
"""
import pandas as pd
import streamlit as st

from memorylab import MemoryLabError
from memorylab.experiments import Experiments
from memorylab.experiments.branch_ab import branch_ab_spec
from memorylab.samples import sample_facts

from .compaction_plans import SUMMARIZER_HELP, SUMMARIZERS, plan_or_error, setting_controls
from .models import completion_settings, sidebar_api_hosts
from .navigation import link_to


def arm_column(name, column, branch, history):
    """Arm ``name``'s widgets in ``column`` and what its plan would do; returns (arm, whether it plans)."""
    column.markdown(f"**Arm {name}**")
    strategy = column.selectbox("Strategy", list(SUMMARIZERS), key=f"{name}_strategy", help=SUMMARIZER_HELP)
    settings = setting_controls(name, column)
    arm = {"name": name, "strategy": strategy, **settings}
    if strategy == "summarize":
        arm["model"] = column.text_input("Summarizer model", key=f"{name}_model") or None
        arm["completion"] = completion_settings()
    plan, error = plan_or_error(branch, settings, None, history)
    if error:
        column.error(error)
    elif plan is None:
        column.info("Nothing to compact with this setting.")
    else:
        column.caption(f"Summarizes {plan.from_id}..{plan.to_id} ({len(plan.middle)} messages): "
                       f"{plan.tokens_before:,} → {plan.tokens_after:,} tokens, "
                       f"saves {plan.tokens_before - plan.tokens_after:,}")
    return arm, plan is not None


def facts_to_keep(session):
    """The facts typed (one per line), each a probe; the sample session's own at first."""
    text = st.text_area("Facts that must survive (one per line)", "\n".join(sample_facts(session.session_id)),
                        height=150, key=f"ab_facts:{session.session_id}")
    facts = [fact.strip() for fact in text.splitlines() if fact.strip()]
    if not facts:
        st.info("List at least one fact: each becomes a probe of the experiment.")
    return facts


def run_comparison(store, session, leaf_id, branch_id, arms, facts):
    """Run the two arms as an experiment, keeping its trial for the Experiments page."""
    spec = branch_ab_spec(session, leaf_id, arms, facts)
    progress = st.progress(0.0, text="Running A and B…")
    try:
        results = Experiments(store, tenant_id=session.tenant_id, allowed_hosts=sidebar_api_hosts()).run(
            spec, progress=lambda done, total, run: progress.progress(done / total, text=f"{run['arm']} done"))
    except MemoryLabError as failure:
        st.error(str(failure))
        return
    progress.empty()
    st.session_state["ab_results"] = {"branch": branch_id, "experiment": spec["name"], "trial": results.trial,
                                      "runs": {run["arm"]: run for run in results.runs}}
    st.session_state["exp_open"] = spec["name"]  # the Experiments page opens on it


def comparison_results(branch_id):
    """Each arm's summary and the facts it kept, from the last comparison on this branch."""
    ab = st.session_state.get("ab_results")
    if not ab or ab["branch"] != branch_id:
        return
    for column, name in zip(st.columns(2), ("A", "B")):
        run = ab["runs"].get(name)
        column.markdown(f"**Summary {name}**")
        if run is None:
            continue
        if run["error"]:
            column.error(run["error"])
            continue
        kept = sum(score["score"] == 1 for score in run["scores"])
        column.metric("Facts kept", f"{kept} / {len(run['scores'])}",
                      help="Held by the context the model would see next: the head, the summary and the tail")
        column.code(run["summary"] or "(empty)", language=None, wrap_lines=True)
        column.dataframe(pd.DataFrame({"fact": fact["fact"], "kept": fact["kept"]}
                                      for score in run["scores"] for fact in score["facts"]),
                         hide_index=True, width="stretch")
    link_to("experiments", f"Trial {ab['trial']} of “{ab['experiment']}” is kept on the Experiments page", "🧪")
