"""The Experiments page's labels: a person marks each probe verdict of one arm on one case right or
wrong (and grades a graded answer from 0 to 1), sees how far each scorer agrees with the labels, and
re-grades the trial with another judge model.

State: ``exp_labeller`` (the name labels are saved under) and ``exp_labels_saved`` (counts saves, so
the cached results view is read again after one).
"""
import pandas as pd
import streamlit as st

from memorylab import MemoryLabError
from memorylab.experiments.calibration import verdict_scorer
from memorylab.experiments.labels import passes

from .escaping import escape_markdown

MARKS = ("", "right", "wrong")
"""What a person can say of a verdict: nothing yet, or that it is right or wrong."""


def labels_stamp() -> int:
    """Changes whenever this browser session saved labels or a re-grade: part of the results' cache key."""
    return st.session_state.get("exp_labels_saved", 0)


def label_verdicts(experiments, results, name, case):
    """The labelling table for one arm on ``case``, the calibration, and the re-grade form."""
    st.subheader("Label the verdicts")
    st.caption("Say whether each probe's verdict is right: does this arm's output really keep (or, graded, does "
               "its answer really state) what the probe asks? A label stays with the output it judges: a re-run "
               "that leaves the same output shows it again; one that leaves another output shows it as stale.")
    arms = [arm for arm in results.arms if (run := results.run(arm, case)) and run["error"] is None]
    if not arms:
        st.info("No arm finished on this case in this trial: nothing to label.")
        return
    left, right = st.columns([2, 1])
    arm = left.selectbox("Arm to label", arms, key=f"exp_label_arm:{name}:{results.trial}:{case}")
    by = right.text_input("Your name", key="exp_labeller", placeholder="who labels (default: the OS user)")
    run = results.run(arm, case)
    table = _label_table(results, run)
    edited = st.data_editor(table, hide_index=True, width="stretch", key=f"exp_labels:{name}:{results.trial}:{case}:"
                            f"{arm}", disabled=[c for c in table.columns if c not in ("mark", "grade")],
                            column_config=_COLUMNS)
    if st.button("Save labels", icon="🏷️", disabled=edited[["mark", "grade"]].equals(table[["mark", "grade"]])):
        _save(experiments, name, results.trial, run, table, edited, by)
    _calibration(results)
    _regrade(experiments, name, results.trial)


_COLUMNS = {
    "mark": st.column_config.SelectboxColumn("your mark", options=MARKS, help="Is the verdict right or wrong?"),
    "grade": st.column_config.NumberColumn("your grade", min_value=0.0, max_value=1.0, step=0.1, format="%.1f",
                                           help="Graded probes: your own 0–1 grade of the answer"),
    "scored": st.column_config.TextColumn("verdict", help="What the scorer said: pass at 0.5 or more"),
    "asked": st.column_config.TextColumn("question", width="large"),
    "answer": st.column_config.TextColumn(width="medium", help="The grader's answer from this context (graded only)"),
    "label": st.column_config.TextColumn("stored label", help="The label shown on this output, by whom and when"),
}


def _label_table(results, run):
    rows = []
    for score in run["scores"]:
        label = results.labels.get((run["case_name"], run["arm"], score["probe"]))
        passed = passes(score["score"])
        mark = "" if label is None or label["stale"] else ("right" if label["correct"] == passed else "wrong")
        rows.append({"probe": score["probe"], "scored": f"{'pass' if passed else 'fail'} {score['score']:.2f}",
                     "mark": mark, "grade": None if label is None or label["stale"] else label["grade"],
                     "label": _label_text(label), "asked": score["question"], "kind": score["kind"],
                     "scorer": verdict_scorer(score), "answer": score.get("answer")})
    return pd.DataFrame(rows)


def _label_text(label):
    if label is None:
        return ""
    said = "should pass" if label["correct"] else "should fail"
    stale = "stale, on an earlier output: " if label["stale"] else ""
    return f"{stale}{said} — {label['labelled_by']}, {label['labelled_at'][:16].replace('T', ' ')}"


def _save(experiments, name, trial, run, table, edited, by):
    """Store the rows whose mark or grade changed; a verdict marked wrong means the probe should have
    gone the other way."""
    saved = 0
    for (_, before), (_, after) in zip(table.iterrows(), edited.iterrows()):
        grade = None if pd.isna(after["grade"]) else float(after["grade"])
        if not after["mark"] or (after["mark"] == before["mark"] and grade == before["grade"]):
            continue
        passed = after["scored"].startswith("pass")
        try:
            experiments.label(name, trial, run["case_name"], run["arm"], after["probe"],
                              passed if after["mark"] == "right" else not passed, grade=grade, by=by.strip() or None)
        except MemoryLabError as error:
            st.error(str(error))
            return
        saved += 1
    st.session_state["exp_labels_saved"] = labels_stamp() + 1
    st.session_state["exp_flash"] = f"Saved {saved} label{'' if saved == 1 else 's'}."
    st.rerun()


def _calibration(results):
    calibration = results.calibration
    if calibration is None or not calibration.items:
        st.caption("No labels on this trial's outputs yet: each scorer's agreement with people shows here.")
        return
    st.markdown("**How far each scorer can be trusted**: " + "; ".join(
        escape_markdown(line) for line in calibration.summary_lines()) + ".")
    st.dataframe(calibration.frame(), hide_index=True, width="stretch", column_config={
        "agreement": st.column_config.NumberColumn(format="%.2f"),
        "kappa": st.column_config.NumberColumn("Cohen's kappa", format="%.2f",
                                               help="Agreement beyond chance: 1 perfect, 0 no better than chance"),
        "false_pass": st.column_config.NumberColumn("false passes", help="Passed by the scorer, failed by people"),
        "false_fail": st.column_config.NumberColumn("false fails", help="Failed by the scorer, passed by people")})
    with st.expander("False passes and false fails", icon="🔎"):
        for agreement in calibration.agreements():
            if agreement.kind == "all" and (agreement.false_pass or agreement.false_fail):
                st.markdown(f"**{escape_markdown(agreement.scorer)}**: false passes "
                            f"{_keys(agreement.false_pass)}; false fails {_keys(agreement.false_fail)}")


def _keys(keys):
    return escape_markdown(", ".join(f"{probe} ({arm} on {case})" for case, arm, probe in keys) or "none")


def _regrade(experiments, name, trial):
    """Judge this trial's stored answers again with another model and show how far the scores move."""
    with st.expander("Re-grade this trial with another judge", icon="⚖️"):
        st.caption("The answers the grader's model gave are judged again by this model: nothing is summarized or "
                   "answered anew. Only a trial run with a grader holds answers.")
        left, right = st.columns([3, 1], vertical_alignment="bottom")
        model = left.text_input("Judge model", key=f"exp_regrade_model:{name}", placeholder="openai/gpt-4o")
        if right.button("Re-grade", disabled=not model.strip(), width="stretch"):
            try:
                regrading = experiments.regrade(name, model.strip(), trial=trial)
            except MemoryLabError as error:
                st.error(str(error))
                return
            st.session_state["exp_labels_saved"] = labels_stamp() + 1
            change = regrading.mean_change()
            st.write(f"Mean change per graded probe: {'n/a' if change is None else f'{change:+.2f}'}")
            st.dataframe(regrading.arm_changes(), hide_index=True, width="stretch")
