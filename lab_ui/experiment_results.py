"""The Experiments page's results: leaderboard, Pareto chart, trials and their comparison, one case
arm by arm (``experiment_runs``), downloads, and "Use this arm in the Compaction lab".

Everything read from the store is cached per experiment, trial and *stamp* (its run count and last
run), so a rerun that changes no result reads nothing again and a new run is never hidden.
"""
from types import SimpleNamespace

import pandas as pd
import streamlit as st

from memorylab import MemoryLabError
from memorylab.experiments import against_best_text, interval_text, percent_text, whole_percent
from memorylab.history.compaction import DEFAULT_SUMMARY_TEMPLATE
from memorylab.llm.models import DEFAULT_LOCAL_MODEL

from .experiment_decay import render_decay
from .experiment_labels import label_verdicts, labels_stamp
from .experiment_runs import drill_down
from .navigation import switch_to
from .selection import select_leaf, select_session

ARM_CHANGE_COLUMNS = ("arm", "arm_cases", "arm_change", "arm_change_low", "arm_change_high", "arm_verdict")
"""``compare_trials``' per-arm columns, shown once per arm above its case-by-case rows."""


@st.cache_resource(max_entries=8, show_spinner="Reading the results…")
def _trial_view(stamp, _experiments, name, trial):
    """One trial's results and everything drawn from them, built once: read-only, shared."""
    results = _experiments.results(name, trial)
    board = results.leaderboard()
    board["verdict"] = [_verdict(passed, threshold) for passed, threshold in zip(board["passed"], board["min_score"])]
    rows = board.to_dict("records")
    board["interval"], board["vs_best"] = [interval_text(r) for r in rows], [against_best_text(r) for r in rows]
    board["saved_pct"] = board["saved_pct"].map(whole_percent).astype("Int64")  # the headline's rounding
    return SimpleNamespace(results=results, leaderboard=board, figure=results.pareto_figure(),
                           probes=results.probes_frame())


@st.cache_resource(max_entries=8, show_spinner=False)
def _comparison(stamp, _experiments, name, trial, other):
    return _experiments.compare(name, other, trial)


def _verdict(passed, threshold):
    if passed is None or pd.isna(threshold):
        return "no threshold"
    return f"passed (≥ {threshold:.2f})" if passed else f"FAILED (< {threshold:.2f})"


def results_panel(experiments, name, trials, stamp, branches):
    """Everything about the ``trials`` (how many) of experiment ``name``; ``stamp`` changes whenever a
    run is added, ``branches`` maps each case's name to its session ref (tenant, agent, session)."""
    if not trials:
        st.info("Not run yet. Check the arms and the cases in their tabs, then press **Run** above. Arms that need "
                "no model (none, window, truncate, extractive) finish in about a second; a summarize arm calls its "
                "model for each case (a span longer than half its window in several requests).")
        return
    numbers = list(range(trials, 0, -1))  # a trial number is taken by its first stored run, so none is skipped
    pick, versus = st.columns(2)
    trial = pick.selectbox("Trial", numbers, key=f"exp_trial:{name}", format_func=lambda n: f"Trial {n}",
                           help="Each Run adds a trial; older ones stay to compare with.")
    other = versus.selectbox("Compare with trial", [None, *[n for n in numbers if n != trial]],
                             key=f"exp_versus:{name}:{trial}",
                             format_func=lambda n: "—" if n is None else f"Trial {n}")
    stamp = (*stamp, labels_stamp())  # a saved label changes the leaderboard's trust and the calibration
    try:
        view = _trial_view(stamp, experiments, name, trial)
    except MemoryLabError as error:
        st.error(str(error))
        return
    results = view.results
    _headline(results, view.leaderboard)
    _leaderboard(view)
    if other is not None:
        try:
            _comparison_table(_comparison(stamp, experiments, name, trial, other), trial, other)
        except MemoryLabError as error:
            st.error(str(error))
    _use_arm(results, view.leaderboard, name, branches)
    drill_down(experiments, view, f"{name}:{trial}")
    label_verdicts(experiments, results, name, st.session_state.get(f"exp_case:{name}:{trial}") or results.cases[0])
    _downloads(results, name)


def _headline(results, board):
    # the full history always wins; the question is what else comes close
    saving = board[board["saved_pct"].fillna(0) > 0]
    best = (saving if len(saving) else board).iloc[0]
    errors = int(board["errors"].sum())
    started = min(run["started_at"] for run in results.runs)
    columns = st.columns(4)
    columns[0].metric("Best arm that saves tokens" if len(saving) else "Best arm", best["arm"],
                      help="Highest mean probe score among the arms whose context is smaller than the history")
    # the interval rides in the delta: a metric's value is drawn large and is cut off past about ten characters
    beside = [f"95% {interval_text(best)}"] + ([f"saves {percent_text(best['saved_pct'])}"] if len(saving) else [])
    columns[1].metric("Its score", f"{best['score']:.2f}", delta=" · ".join(beside), delta_color="off",
                      help="Mean over cases of the share of probes kept, with its 95% interval (n/a with one case)")
    columns[2].metric("Runs", len(results.runs), delta=f"{errors} errors" if errors else None, delta_color="inverse",
                      help=f"Trial {results.trial} started {started[:19].replace('T', ' ')} UTC")
    failing = int(board["passed"].eq(False).sum())  # None is "no threshold", not a failure
    columns[3].metric("Under their threshold", failing, help="Arms whose mean score is under their min_score")
    if not results.complete:
        st.warning("This trial is incomplete: it is still running, or it was cancelled or interrupted. Only the runs "
                   "that finished are shown.")


def _leaderboard(view):
    st.subheader("Leaderboard")
    st.dataframe(
        view.leaderboard, hide_index=True, width="stretch", height=min(38 + 35 * len(view.leaderboard), 740),
        column_order=("arm", "strategy", "score", "interval", "vs_best", "trust", "spread", "min_case", "saved_pct",
                      "tokens_after", "cost", "errors", "verdict", "tokens_before", "summary_tokens", "latency_s",
                      "max_case"),
        column_config={
            "score": st.column_config.ProgressColumn(
                min_value=0.0, max_value=1.0, format="%.2f",
                help="Mean over cases of the share of probes kept (failed runs count 0)"),
            "interval": st.column_config.TextColumn(
                "95% interval", help="Where the mean would likely fall on other cases like these (a bootstrap over "
                                     "cases; n/a with one case). More cases make it narrower."),
            "vs_best": st.column_config.TextColumn(
                "against the best", help="This arm against the top arm, case by case: worse when the whole 95% "
                                         "interval of the difference is under 0, else no clear difference"),
            "spread": st.column_config.NumberColumn(format="%.2f", help="Standard deviation of the score over cases"),
            "min_case": st.column_config.NumberColumn("worst case", format="%.2f"),
            "max_case": st.column_config.NumberColumn("best case", format="%.2f"),
            "tokens_before": st.column_config.NumberColumn("tokens before", format="localized"),
            "tokens_after": st.column_config.NumberColumn("tokens after", format="localized",
                                                          help="Mean tokens of the context the arm leaves"),
            "saved_pct": st.column_config.NumberColumn("saved", format="%d%%", help="Tokens saved, in whole percent "
                                                        "of the branch (under 0: the arm adds tokens)"),
            "summary_tokens": st.column_config.NumberColumn("summary tokens", format="localized"),
            "cost": st.column_config.NumberColumn(format="$%.4f", help="Blank where litellm does not know the price"),
            "latency_s": st.column_config.NumberColumn("latency", format="%.2f s", help="Mean per case"),
            "verdict": st.column_config.TextColumn(help="Against the arm's min_score (or the experiment's)"),
            "trust": st.column_config.TextColumn(help="People's labels on this arm's probes against the scorer "
                                                      "of its score, and Cohen's kappa (label verdicts below)"),
        })
    st.plotly_chart(view.figure, width="stretch", config={"displaylogo": False})
    st.caption("Probe score against tokens saved, one point per arm: up and right is better, and the dotted line "
               "joins the arms no other arm beats on both.")
    render_decay(view.results)


def _comparison_table(frame, trial, other):
    st.subheader(f"Trial {trial} against trial {other}")
    _arm_changes(frame.drop_duplicates("arm")[list(ARM_CHANGE_COLUMNS)], trial, other)
    changed = frame["score_change"].dropna()
    st.caption(f"Case by case: {int((changed < 0).sum())} runs scored lower, {int((changed > 0).sum())} higher, "
               f"mean change {changed.mean():+.3f}." if len(changed) else "No arm ran on the same case in both trials.")
    by_case = frame.drop(columns=list(ARM_CHANGE_COLUMNS[1:]))
    st.dataframe(by_case.sort_values("score_change", na_position="last"), hide_index=True, width="stretch", height=300,
                 column_config={"score_change": st.column_config.NumberColumn("score change", format="%+.2f"),
                                f"score_{trial}": st.column_config.NumberColumn(format="%.2f"),
                                f"score_{other}": st.column_config.NumberColumn(format="%.2f")})


def _arm_changes(arms, trial, other):
    """Each arm's change from trial ``other`` to ``trial``, paired over the cases both ran, with its verdict."""
    verdicts = list(arms["arm_verdict"])
    st.caption(f"Arm by arm over the cases both trials ran: {verdicts.count('better')} arms better, "
               f"{verdicts.count('worse')} worse, {verdicts.count('no clear difference')} no clear difference "
               f"(trial {trial} against trial {other}; better or worse only when the whole 95% interval of the "
               f"change is above or under 0).")
    change = {"format": "%+.3f"}
    st.dataframe(arms, hide_index=True, width="stretch", column_config={
        "arm_cases": st.column_config.NumberColumn("cases", help="Cases the arm ran in both trials"),
        "arm_change": st.column_config.NumberColumn("change", **change, help="Mean score change over those cases"),
        "arm_change_low": st.column_config.NumberColumn("95% low", **change),
        "arm_change_high": st.column_config.NumberColumn("95% high", **change),
        "arm_verdict": st.column_config.TextColumn("verdict")})


def _use_arm(results, board, name, branches):
    """Copy a compacting arm's plan settings into the Compaction lab's widgets and open it."""
    key = f"{name}:{results.trial}"
    arms = list(board.loc[board["strategy"].isin(("summarize", "extractive")), "arm"])
    if not arms:
        return
    left, right = st.columns([3, 2], vertical_alignment="bottom")
    arm = left.selectbox("Arm to tune further in the Compaction lab", arms, key=f"exp_use_arm:{key}",
                         help="Summarize and extractive arms: their plan settings (and a summarize arm's template "
                              "and model) become the Compaction lab's, on the branch of the case shown below.")
    if right.button("Use this arm in the Compaction lab", icon="🗜️", width="stretch"):
        case = st.session_state.get(f"exp_case:{key}") or results.cases[0]
        run = results.run(arm, case) or next(r for r in results.runs if r["arm"] == arm)
        _copy_to_compaction_lab(run, branches.get(run["case_name"]), f"arm “{arm}” of “{name}”, trial {results.trial}")


def _copy_to_compaction_lab(run, ref, source):
    """The Compaction lab's widget keys set to ``run``'s arm settings, the branch it ran on (``ref``:
    tenant, agent, session) selected, and the page opened; it says the settings came from ``source``."""
    settings = run["arm_settings"]
    state = st.session_state
    state["main_head"], state["main_min_tail"] = settings["protect_head"], settings["min_tail_messages"]
    if settings["tail_token_budget"] is None:
        state.pop("main_tail", None)  # the lab's own default: a quarter of the branch, as the arm had
    else:
        state["main_tail"] = settings["tail_token_budget"]
    state["main_strategy"] = run["strategy"]
    if run["strategy"] == "summarize":
        state["main_template"] = settings["template"] or DEFAULT_SUMMARY_TEMPLATE
        state["main_model"] = settings["model"] or DEFAULT_LOCAL_MODEL
    state["main_settings_from"] = source
    if ref:
        select_session(ref)
        select_leaf(run["leaf_id"])
    switch_to("compaction_lab", "Copied. Open the Compaction lab to see the plan with these settings.")


def _downloads(results, name):
    left, right, board, _ = st.columns([1, 1, 1, 2])
    stem = f"{name}-trial-{results.trial}"
    left.download_button("Download CSV", results.to_csv, f"{stem}.csv", "text/csv", on_click="ignore", icon="⬇️")
    right.download_button("Download JSON", results.to_json, f"{stem}.json", "application/json", on_click="ignore",
                          icon="⬇️")
    board.download_button("Download leaderboard CSV", results.leaderboard_csv, f"{stem}-leaderboard.csv", "text/csv",
                          on_click="ignore", icon="⬇️", help="One row per arm: its mean, 95% interval and verdict "
                                                            "against the best")
