"""The Experiments page's drill-down: one case of a trial arm by arm (outputs, the probes each arm
missed), two arms' whole contexts compared message by message, and the probe matrix."""
import streamlit as st

from memorylab import MemoryLabError
from memorylab.display.treeview import preview

from .escaping import escape_markdown
from .store import database_target

TAIL_MESSAGES = 4
"""Messages of a compacted context shown for an arm that wrote no summary."""
SIDE_BY_SIDE = 4


def _run_key(run):
    """What names a stored run across reruns: its database and its pk, with when it started, since
    a pk is only unique in one database and a deleted trial's pk can be taken again."""
    return database_target(), run["pk"], run["started_at"]


@st.cache_resource(max_entries=256, show_spinner=False)
def _context(key, _experiments, _run):
    """The compacted context of one run (a stored run never changes, so its key is enough)."""
    return _experiments.context(_run)


def drill_down(experiments, view, key):
    """One case's runs side by side; ``key`` (experiment and trial) keeps each trial's choices apart,
    since trials can differ in arms and cases."""
    results = view.results
    st.subheader("One case, arm by arm")
    left, right = st.columns([1, 3])
    case = left.selectbox("Case", results.cases, key=f"exp_case:{key}")
    ranked = list(view.leaderboard["arm"])
    shown = right.multiselect("Arms side by side", ranked, default=ranked[:min(3, len(ranked))],
                              max_selections=SIDE_BY_SIDE, key=f"exp_side_by_side:{key}")
    outputs = {}
    for arm, column in zip(shown, st.columns(max(len(shown), 1))):
        run = results.run(arm, case)
        with column:
            outputs[arm] = _arm_output(experiments, run, view.probes, arm, case)
    _diff(results, experiments, case, outputs, key)
    _probe_matrix(view.probes, case)


def _arm_output(experiments, run, probes, arm, case):
    """One arm's column: its score, its output, the probes it missed. Returns the output's text."""
    st.markdown(f"**{escape_markdown(arm)}**")
    if run is None:
        st.info("No run of this arm on this case in this trial (cancelled).")
        return ""
    saved = run["tokens_before"] - run["tokens_after"]
    st.caption(f"{run['strategy']} · score {run['score'] or 0:.2f} · {run['tokens_after']:,} tokens after "
               f"({saved:,} saved)" + (f" · {run['model']}" if run["model"] else ""))
    if run["error"]:
        st.error(run["error"])
        return ""
    text = _output_text(experiments, run)
    st.code(text, language=None, wrap_lines=True, height=260)
    missed = probes[(probes["arm"] == arm) & (probes["case"] == case) & (probes["score"] < 1)]
    if missed.empty:
        st.success("Kept every probe.")
    else:
        st.dataframe(missed[["probe", "kind", "missed"]], hide_index=True, width="stretch",
                     column_config={"missed": st.column_config.TextColumn("missing facts")})
    return text


def _output_text(experiments, run):
    """What to read of a run: its summary, else the newest messages of the context it left ("" when
    it has none)."""
    if run is None or run["error"]:
        return ""
    if run["summary"]:
        return run["summary"]
    try:
        context = _context(_run_key(run), experiments, run)
    except MemoryLabError as error:
        return f"(its context cannot be read: {error})"
    lines = [f"[{m['role']}] {preview(m, 400)}" for m in context[-TAIL_MESSAGES:]]
    if len(context) > TAIL_MESSAGES:
        lines.insert(0, f"… {len(context) - TAIL_MESSAGES:,} earlier messages of {len(context):,}")
    return "\n\n".join(lines)


def _diff(results, experiments, case, outputs, key):
    arms = results.arms
    if len(arms) < 2:
        return
    with st.expander("Compare two arms' contexts on this case", icon="🔀"):
        shown = list(outputs) or arms
        left, right = st.columns(2)
        first = left.selectbox("From arm", arms, index=arms.index(shown[0]), key=f"exp_diff_from:{key}")
        second = right.selectbox("To arm", arms, index=arms.index(shown[1] if len(shown) > 1 else arms[1]),
                                 key=f"exp_diff_to:{key}")
        runs = [results.run(arm, case) for arm in (first, second)]
        missing = [arm for arm, run in zip((first, second), runs) if run is None or run["error"]]
        if missing:
            st.info(f"No context to compare: {escape_markdown(', '.join(missing))} did not run on this case "
                    "(cancelled, or its run failed).")
            return
        try:
            comparison = _comparison(tuple(map(_run_key, runs)), experiments, runs)
        except MemoryLabError as error:
            st.error(f"The contexts cannot be read: {error}")
            return
        _show_comparison(comparison)


@st.cache_resource(max_entries=64, show_spinner=False)
def _comparison(keys, _experiments, _runs):
    """Two runs' contexts compared (stored runs never change, so their keys are enough)."""
    return _experiments.compare_runs(*_runs)


def _show_comparison(comparison):
    """The verdict, every message that differs with its tokens on each side, and each changed message's diff."""
    (st.success if comparison.identical else st.warning)(escape_markdown(comparison.summary()))
    if comparison.identical:
        return
    rows = comparison.frame()
    st.dataframe(rows[rows["status"] != "same"], hide_index=True, width="stretch", height=240, column_config={
        "first": st.column_config.NumberColumn(f"# in {comparison.first_name}"),
        "second": st.column_config.NumberColumn(f"# in {comparison.second_name}"),
        "first_tokens": st.column_config.NumberColumn(f"tokens in {comparison.first_name}", format="localized"),
        "second_tokens": st.column_config.NumberColumn(f"tokens in {comparison.second_name}", format="localized")})
    diff = comparison.diff_text()
    if diff:
        st.code(diff, language="diff", wrap_lines=True, height=400)


def _probe_matrix(probes, case):
    on_case = probes[probes["case"] == case]
    if on_case.empty:
        return
    matrix = on_case.pivot_table(index=["probe", "kind", "question"], columns="arm", values="score", sort=False)
    st.markdown("**Probes on this case**: 1 = every fact kept, 0 = none.")
    st.dataframe(matrix.reset_index(), hide_index=True, width="stretch",
                 column_config={"question": st.column_config.TextColumn(width="large")})
