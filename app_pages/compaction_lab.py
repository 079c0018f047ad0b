# Compaction lab: tune how the active branch would be summarized, preview the plan (a dry run), run the
# summarizer, review and accept its summary as an overlay; compare two arms; see and undo overlays.
#
# State: the plan settings' widgets (``main_…``, ``A_…``, ``B_…``, see lab_ui/compaction_plans.py),
# ``main_template`` and ``main_model``; ``proposal`` (the summary under review, see
# lab_ui/compaction_review.py); ``ab_results`` (see lab_ui/compaction_ab.py);
# ``lab_audit_overlays:<session>`` (a long session's overlays audited on request); Accept and Undo ask
# first (lab_ui/confirmations.py).
import pandas as pd
import streamlit as st

from lab_ui.audit_panel import dropped_panel, session_audits
from lab_ui.compaction_ab import arm_column, comparison_results, facts_to_keep, run_comparison
from lab_ui.compaction_plans import (
    SUMMARIZER_HELP,
    SUMMARIZERS,
    plan_or_error,
    seed_lab,
    setting_controls,
    shortened_messages,
    stored_sizes,
)
from lab_ui.compaction_review import render_plan, review_proposal, run_summarizer
from lab_ui.confirmations import ask_first
from lab_ui.selection import active_leaf, branch_history, branch_key
from lab_ui.sidebar import session_page
from memorylab import MemoryLabError
from memorylab.display.frames import overlay_table
from memorylab.history.compaction import DEFAULT_SUMMARY_TEMPLATE
from memorylab.history.overlays import shown_overlay_ids

AUDIT_ON_RENDER_MESSAGES = 2000  # a session up to this long has its overlays audited as the tab draws


def render_preview(branch, history, leaf_id):
    """The main plan's settings, its dry run, and the summary proposed from it."""
    settings = setting_controls("main", st)
    extra = st.columns(4)
    threshold = extra[0].number_input("Auto-compact threshold (tokens)", 100, 1_000_000, 6000, step=500,
                                      help="compact_after(threshold): compaction runs after an append that puts "
                                           "history plus system prompt strictly over it.")
    strategy = extra[1].selectbox("Summarizer", list(SUMMARIZERS), format_func=SUMMARIZERS.get, key="main_strategy",
                                  help=SUMMARIZER_HELP)
    extractive = strategy == "extractive"
    summarizer_model = extra[2].text_input("Summarizer model", key="main_model", disabled=extractive,
                                           help="The extractive summarizer calls no model" if extractive else None)
    row_limit = extra[3].number_input("Row size limit (bytes)", 1024, 10_000_000, 1_800_000, step=100_000,
                                      help="Messages larger than this are shrunk before they are stored.")
    template = st.text_area("Summary prompt template", height=200, key="main_template", disabled=extractive,
                            help="The extractive summarizer sends no prompt: it picks the span's own sentences"
                            if extractive else "Placeholders: {transcript}, {previous_summary}, {target_tokens}.")
    # The default template as None, as the A/B arms pass it: an arm set as the preview reuses its plan.
    plan, error = plan_or_error(branch, settings, None if template == DEFAULT_SUMMARY_TEMPLATE else template, history)
    estimate = session.estimate_context_tokens(leaf_id, history=history)
    oversized = sum(size > row_limit for size in stored_sizes(branch, history))
    st.caption(f"Request estimate now: {estimate:,} tokens ({'over' if estimate > threshold else 'under'} the "
               f"threshold of {threshold:,}). Messages over the row size limit on this branch: {oversized}.")
    if error:
        st.error(error)
    elif plan is None:
        st.info("Nothing to compact with these settings: the head and the tail cover the whole branch "
                "(or only an earlier summary lies between them). Lower the tail budget or the protected head."
                + (" The summary proposed before covers a span the branch no longer plans, so it was not added."
                   if st.session_state.get("proposal") else ""))
    else:
        render_plan(branch, settings, template, plan)
        run_summarizer(plan, leaf_id, settings, template, strategy, summarizer_model)
        review_proposal(session, branch, plan, leaf_id, settings, template, strategy)


def render_ab(branch, history, leaf_id, branch_id):
    st.caption("Two arms on the active branch, run as an experiment: each fact below is a probe, kept when the "
               "context the model would see next (head, summary, tail) still holds it. Extractive needs no model.")
    columns = st.columns(2)
    (arm_a, ready_a), (arm_b, ready_b) = (arm_column(name, column, branch, history)
                                          for name, column in (("A", columns[0]), ("B", columns[1])))
    facts = facts_to_keep(session)
    if st.button("Summarize both and compare", disabled=not (ready_a and ready_b and facts)):
        run_comparison(store, session, leaf_id, branch_id, [arm_a, arm_b], facts)
    comparison_results(branch_id)


def overlay_audits(overlays):
    """``{overlay id: CompactionAudit}``: at once on a session of ordinary length, else after the
    person asks (auditing spans of thousands of messages takes seconds), then kept for the branch."""
    if not overlays:
        return {}
    asked = f"lab_audit_overlays:{session.tenant_id}/{session.agent_id}/{session.session_id}"
    if session.get_path_length() > AUDIT_ON_RENDER_MESSAGES and not st.session_state.get(asked):
        if st.button("Audit these summaries", key="lab_audit_overlays", help="What each summary dropped of the span "
                     "it replaced: on a session this long it takes a few seconds, so it runs when you ask"):
            st.session_state[asked] = True
        else:
            return {}
    return session_audits(session)


def render_overlay(overlay, shown, audit):
    """One stored overlay: its span and summary, what the summary dropped (folded), and Undo (asked first)."""
    with st.container(border=True):
        head, action = st.columns([5, 1])
        state = "visible on this branch" if overlay["id"] in shown else "superseded or on another branch"
        head.markdown(f"**Overlay {overlay['id']}** · `{overlay['from_id']}` … `{overlay['to_id']}` · {state}")
        head.code(overlay["summary"], language=None, wrap_lines=True)
        if audit is not None:
            whole = len(audit.kept) + len(audit.lost)
            lost = f"{len(audit.lost)} of {whole} artifacts" if audit.lost else f"nothing (kept all {whole} artifacts)"
            with head.expander(f"What this summary dropped: {lost}" if whole else
                               "What this summary dropped: its span states no artifact"):
                dropped_panel(audit, session, f"overlay_lost_{audit.overlay_id}", heading=None)

        def undo():
            session.remove_compaction(overlay["id"])
            st.rerun()

        ask_first(action, "Undo", key=f"undo_{overlay['id']}", help="Remove the overlay; the originals show again.",
                  title=f"Undo summary {overlay['id']}?", confirm="Yes, remove it", action=undo,
                  body=lambda: st.markdown(
                      f"The messages `{overlay['from_id']}` … `{overlay['to_id']}` are read whole again instead of "
                      "this summary. The summary is kept under **Removed summaries** below, where **Restore** "
                      "brings it back over the same messages."))


def render_removed(removed):
    """The summaries an Undo removed, as a table, each with Restore."""
    st.markdown("#### Removed summaries")
    st.caption("Undone summaries, newest first (the newest 20 are kept). Restore adds one back over its messages.")
    st.dataframe(overlay_table(removed), hide_index=True, width="stretch")
    for number, record in enumerate(removed):
        text, button = st.columns([5, 1], vertical_alignment="center")
        text.text(f"Summary {record['id']} ({record['from_id']} … {record['to_id']}): "
                  + " ".join(record["summary"].split())[:160])
        if button.button("Restore", key=f"restore_{number}", help="Add this summary back over its messages"):
            try:
                session.restore_compaction(record["id"])
            except MemoryLabError as error:
                st.error(f"Cannot restore it: {error}")
            else:
                st.rerun()


def render_overlays(history):
    overlays = session.get_compactions()
    if not overlays:
        st.info("No overlays on this session yet.")
    audits = overlay_audits(overlays)
    shown = shown_overlay_ids(history)
    if overlays:
        st.dataframe(overlay_table(list(reversed(overlays)), shown=shown, audits=audits), hide_index=True,
                     width="stretch")
    for overlay in reversed(overlays):
        render_overlay(overlay, shown, audits.get(overlay["id"]))
    removed = session.removed_compactions()
    if removed:
        render_removed(removed)


def render_micro(branch, history):
    columns = st.columns(3)
    keep_recent = columns[0].number_input("Keep recent (messages)", 0, 100, 4)
    max_tool = columns[1].number_input("Max tool output chars", 0, 100_000, 500, step=100)
    max_text = columns[2].number_input("Max text chars", 0, 1_000_000, 10_000, step=1000)
    changed = shortened_messages(branch, {"keep_recent": keep_recent, "max_tool_output_chars": max_tool,
                                          "max_text_chars": max_text}, history)
    st.metric("Messages shortened before sending", len(changed),
              delta=f"{sum(a['tokens'] for _, a in changed) - sum(b['tokens'] for b, _ in changed):,} tokens",
              delta_color="inverse")
    if changed:
        st.dataframe(pd.DataFrame({"id": b["id"], "role": b["role"], "tokens before": b["tokens"],
                                   "tokens after": a["tokens"]} for b, a in changed), hide_index=True, width="stretch")
        with st.expander("What the first shortened message looks like"):
            st.json(changed[0][1]["parts"], expanded=False)


store, session = session_page(
    "Compaction lab",
    "Tune how the active branch would be summarized. The preview is a dry run: nothing is sent "
    "to a model and nothing is written until you run it and accept the summary.",
)
leaf_id = active_leaf(session)
branch = branch_key(session, leaf_id)
history = branch_history(session, leaf_id)
branch_id = (session.tenant_id, session.agent_id, session.session_id, leaf_id)
handed_over = seed_lab(history, branch_id, st.session_state.get("model"))
if handed_over:
    st.success(f"Settings of {handed_over}, on the branch that case ran on.")

preview_tab, ab_tab, overlays_tab, micro_tab = st.tabs(
    ["Preview and run", "Compare A/B", "Overlay history", "Micro-compaction"])
with preview_tab:
    render_preview(branch, history, leaf_id)
with ab_tab:
    render_ab(branch, history, leaf_id, branch_id)
with overlays_tab:
    render_overlays(history)
with micro_tab:
    render_micro(branch, history)
