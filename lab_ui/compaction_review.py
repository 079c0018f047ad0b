"""The Compaction lab's preview of one plan, the summarizer run, and the review of what it proposed.

State: ``proposal`` (the summary proposed for review: its text, the leaf, settings and template it
was made with, its ``strategy``, and the ``span`` it was written from, see ``plan_span``), ``proposal_text`` (the
summary as edited before accepting), ``proposal_refused`` (an accept the branch refused, for one run)
and the accept dialog's (``confirmations``).
"""
import streamlit as st

from memorylab import MemoryLabError
from memorylab.audit import summary_warnings
from memorylab.experiments.extractive import extractive_summary

from .audit_panel import audit_caption, dropped_panel, proposal_audit
from .compaction_plans import plan_span, plan_table_and_figure
from .confirmations import ask_first
from .guarded_edits import changed_since_loaded
from .models import sidebar_summarizer

PROMPT_PREVIEW_CHARS = 20_000
"""Characters of the summary prompt drawn on the page: a long branch's prompt runs to megabytes."""


def render_plan(branch, settings, template, plan):
    """What the plan would do: its token counts, chart and table, and the exact prompt."""
    metrics = st.columns(4)
    metrics[0].metric("Tokens before", f"{plan.tokens_before:,}")
    metrics[1].metric("Tokens after (target)", f"{plan.tokens_after:,}",
                      delta=f"{plan.tokens_after - plan.tokens_before:,}", delta_color="inverse")
    metrics[2].metric("Messages summarized", len(plan.middle))
    metrics[3].metric("Summary target", f"{plan.target_summary_tokens:,} tok")
    table, figure = plan_table_and_figure(branch, settings, template, plan)
    st.plotly_chart(figure, width="stretch", config={"displaylogo": False})
    st.dataframe(table, hide_index=True, width="stretch", height=260)
    if plan.previous_summary:
        st.info("An earlier summary lies in this span: the model is asked to update it, not start over.")
    if plan.kept:
        st.info(f"{len(plan.kept)} pinned message(s) in this span ({plan.kept_tokens:,} tokens) stay out of the "
                "summary and are read whole right after it. Pin or unpin messages on the Chat or Tree page.",
                icon="📌")
    with st.expander("The exact prompt"):
        shown = plan.prompt[:PROMPT_PREVIEW_CHARS]
        st.code(shown, language=None, wrap_lines=True)
        if len(shown) < len(plan.prompt):
            st.caption(f"The first {len(shown):,} of {len(plan.prompt):,} characters.")
            st.download_button("Download the whole prompt", plan.prompt, "summary-prompt.txt", "text/plain",
                               on_click="ignore", icon="⬇️")


def run_summarizer(plan, leaf_id, settings, template, strategy, summarizer_model):
    """The button that writes the summary, by ``summarizer_model`` or, for the ``extractive``
    ``strategy``, from the span's own sentences; kept as the ``proposal`` to review."""
    if not st.button("Run the summarizer", type="primary"):
        return
    writer = "extractively, no model" if strategy == "extractive" else f"with {summarizer_model}"
    with st.status(f"Summarizing {len(plan.middle)} messages {writer}…", expanded=True) as status:
        try:
            summary = (extractive_summary(plan.middle, plan.target_summary_tokens) if strategy == "extractive"
                       else sidebar_summarizer(summarizer_model)(plan.prompt).strip())
            st.session_state["proposal"] = {"summary": summary, "leaf": leaf_id, "settings": settings,
                                            "template": template, "strategy": strategy, "span": plan_span(plan)}
            status.update(label="Summary ready for review", state="complete")
        except MemoryLabError as failure:
            status.update(label="The summarizer failed", state="error")
            st.error(str(failure))


def accept_summary(session, plan, summary, leaf_id, span):
    """Store the reviewed summary as an overlay if the branch still plans the ``span`` it was made
    from (or the one shown when overwriting); True when it does not."""
    if plan_span(plan) != span:
        return True
    try:
        overlay = session.accept_compaction(plan, summary, leaf_id)
    except MemoryLabError as failure:
        st.error(str(failure))
        return False
    st.session_state.pop("proposal", None)
    st.success(f"Overlay {overlay['id']} added. Originals stay stored.")
    st.rerun()


def drop_proposal(_editor=None):
    st.session_state.pop("proposal", None)
    st.rerun()


def render_guardrails(audit, warnings):
    """The proposed summary's tokens against its span's, the share of the span's artifacts the next
    request keeps, and each reason not to accept it."""
    columns = st.columns(3)
    columns[0].metric("Span it replaces", f"{audit.span_tokens:,} tokens", help=f"{audit.span_messages:,} messages")
    columns[1].metric("Proposed summary", f"{audit.summary_tokens:,} tokens",
                      delta=f"{audit.summary_tokens - audit.span_tokens:+,} tokens", delta_color="inverse")
    whole = len(audit.kept) + len(audit.lost)
    columns[2].metric("Artifacts kept", f"{len(audit.kept)} of {whole} ({len(audit.kept) / whole:.0%})" if whole
                      else "none stated",
                      help="Paths, commands, URLs, ids, numbers, dates, versions, errors and decisions the span "
                           "states that the summary, a pin, the head or the tail still holds")
    for warning in warnings:
        st.error(warning, icon=":material/warning:")


def confirm_accept(audit, warnings, plan):
    """What accepting does, in the dialog that asks for it."""
    st.markdown(f"Messages `{plan.from_id}` … `{plan.to_id}` ({audit.span_messages:,} messages, "
                f"{audit.span_tokens:,} tokens) are read as this {audit.summary_tokens:,}-token summary on every "
                "later request of the branch.")
    st.caption(audit_caption(audit, "The proposed summary"))
    for warning in warnings:
        st.error(warning, icon=":material/warning:")
    st.caption("The originals stay stored. Undo on Overlay history removes the summary again and keeps it, so it "
               "can be restored.")


def accept_confirmed(session, plan, summary, leaf_id, span):
    """Accept from the dialog; a branch that changed meanwhile is said on the page, under the buttons."""
    if accept_summary(session, plan, summary, leaf_id, span):
        st.session_state["proposal_refused"] = True
        st.rerun()


def review_proposal(session, branch, plan, leaf_id, settings, template, strategy):
    """The proposed summary to edit, audited as it is typed and flagged when it loses what its span
    said, then accepted as an overlay once confirmed, or rejected; while the branch no longer plans
    the span it was written from, both spans and reload or overwrite."""
    proposal = st.session_state.get("proposal")
    if not proposal or proposal["leaf"] != leaf_id:
        return
    st.subheader("Review the proposed summary")
    edited = st.text_area("Summary (edit before accepting if you like)", proposal["summary"], height=220,
                          key="proposal_text")
    audit = proposal_audit(branch, edited, plan.from_id, plan.to_id, session)
    warnings = summary_warnings(audit)
    render_guardrails(audit, warnings)
    st.caption("What it would drop is listed below the buttons.")
    outdated = (proposal["settings"], proposal["template"], proposal["strategy"]) != (settings, template, strategy)
    if outdated:
        st.warning("The settings changed since this summary was made; run it again first.")
    accept, reject = st.columns(2)
    refused = st.session_state.pop("proposal_refused", False)
    ask_first(accept, "Accept: add as an overlay", key="accept_summary", type="primary", disabled=outdated,
              title="Accept this summary?", body=lambda: confirm_accept(audit, warnings, plan),
              confirm="Yes, accept it", acknowledge="Accept it although it is flagged" if warnings else None,
              action=lambda: accept_confirmed(session, plan, edited, leaf_id, proposal["span"]))
    if reject.button("Reject"):
        drop_proposal()
    if refused or proposal["span"] != plan_span(plan):
        changed_since_loaded("compaction", "The branch", stored=plan_span(plan), version=plan_span(plan),
                             yours=proposal["span"], refused=refused, reload=drop_proposal,
                             overwrite=lambda shown: accept_summary(session, plan, edited, leaf_id, shown))
    with st.container(border=True):
        dropped_panel(audit, session, "proposal_lost", heading="What this summary would drop",
                      subject="The proposed summary")
