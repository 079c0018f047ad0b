import pandas as pd
import streamlit as st

from memorylab import MemoryLabError, plan_compaction, truncate_older_messages
from memorylab.experiments import Experiments, default_tail_budget
from memorylab.history.compaction import DEFAULT_SUMMARY_TEMPLATE
from memorylab.history.truncation import stored_bytes
from memorylab.display.frames import to_dataframe
from memorylab.samples import sample_facts
from memorylab.display.viz import compaction_figure
from pages.audit_panel import audit_caption, dropped_panel, proposal_audit, session_audits
from pages.common import (active_leaf, branch_history, branch_key, changed_since_loaded, completion_settings, link_to,
                          session_page, sidebar_api_hosts)

# Plan setting -> the suffix of its widget keys, main_tail, A_head…: the Experiments page's "Use this arm"
# writes the main_ ones, main_template and main_model.
SETTING_KEYS = {"protect_head": "head", "tail_token_budget": "tail", "min_tail_messages": "min_tail"}


def branch_defaults(history, share=4):
    """Plan settings that compact something on a branch of any size: the tail keeps a ``share``-th of
    its tokens (a quarter, as an experiment arm without a tail budget), rounded to 100."""
    tail = max(round(default_tail_budget(history) * 4 / share, -2), 100)
    return {"protect_head": 3, "tail_token_budget": int(tail), "min_tail_messages": 2}


def seed_settings(prefix, defaults, branch_id, *, keep=False):
    """Fill the widgets of ``prefix`` that hold nothing with ``defaults``; on another branch than they
    were set for, the tail budget too (it is relative to the branch), unless ``keep``."""
    moved = st.session_state.get(f"{prefix}_branch") != branch_id
    st.session_state[f"{prefix}_branch"] = branch_id
    for setting, suffix in SETTING_KEYS.items():
        key = f"{prefix}_{suffix}"
        if key not in st.session_state or (moved and not keep and setting == "tail_token_budget"):
            st.session_state[key] = defaults[setting]


store, session = session_page(
    "Compaction lab",
    "Tune how the active branch would be summarized. The preview is a dry run: nothing is sent "
    "to a model and nothing is written until you run it and accept the summary.",
)

leaf_id = active_leaf(session)
branch = branch_key(session, leaf_id)
history = branch_history(session, leaf_id)
model = st.session_state.get("model")
handed_over = st.session_state.pop("main_settings_from", None)
branch_id = (session.tenant_id, session.agent_id, session.session_id, leaf_id)
seed_settings("main", branch_defaults(history), branch_id, keep=bool(handed_over))
seed_settings("A", branch_defaults(history), branch_id)
seed_settings("B", branch_defaults(history, share=8) | {"protect_head": 1}, branch_id)
st.session_state.setdefault("main_template", DEFAULT_SUMMARY_TEMPLATE)
for name in ("main", "A", "B"):
    st.session_state.setdefault(f"{name}_model", model or "")
if handed_over:
    st.success(f"Settings of {handed_over}, on the branch that case ran on.")


# Everything below the widgets is a pure function of the branch and the settings, so each is computed
# once per branch version and settings (cache_resource: shared, read-only) and reruns reuse it.
@st.cache_resource(max_entries=16, show_spinner=False)
def plan_or_error(branch, settings, template, _history):
    try:
        return plan_compaction(_history, prompt_template=template, **settings), None
    except MemoryLabError as error:
        return None, str(error)


@st.cache_resource(max_entries=16, show_spinner=False)
def plan_table_and_figure(branch, settings, template, _plan):
    return to_dataframe(_plan), compaction_figure(_plan)


@st.cache_resource(max_entries=8, show_spinner=False)
def stored_sizes(branch, _history):
    return [stored_bytes(message) for message in _history]


@st.cache_resource(max_entries=16, show_spinner=False)
def shortened_messages(branch, settings, _history):
    """``(original, shortened)`` of each message that micro-compaction with ``settings`` cuts."""
    truncated = truncate_older_messages(_history, **settings)
    return [(before, after) for before, after in zip(_history, truncated) if before is not after]


# Characters of the summary prompt drawn on the page: a long branch's prompt runs to megabytes. (A
# comment, not a docstring: Streamlit would draw a bare string in a page.)
PROMPT_PREVIEW_CHARS = 20_000


def setting_controls(prefix, container):
    """One set of plan settings as widgets (seeded by ``seed_settings``); returns the settings dict."""
    columns = container.columns(3)
    return {
        "protect_head": columns[0].number_input("Protect head (messages)", 0, 50, key=f"{prefix}_head"),
        "tail_token_budget": columns[1].number_input("Tail token budget", 0, 500_000, step=100, key=f"{prefix}_tail",
                                                     help="Defaults to a quarter of the branch's tokens."),
        "min_tail_messages": columns[2].number_input("Min tail messages", 0, 100, key=f"{prefix}_min_tail"),
    }


def quick_ab_spec(session, leaf_id, arms, facts):
    """The experiment the A/B tab runs: its two arms on one branch, each fact a probe."""
    probes = [{"id": f"fact-{number}", "kind": "recall", "question": f"Does the context still hold “{fact}”?",
               "facts": [fact]} for number, fact in enumerate(facts, 1)]
    case = {"name": session.session_id, "session": session.session_id, "agent": session.agent_id,
            "tenant": session.tenant_id, "leaf": leaf_id, "probes": probes}
    return {"name": f"quick-ab-{session.session_id}", "arms": arms, "cases": [case],
            "description": f"A/B from the Compaction lab on {session.session_id}, branch {leaf_id}."}


def plan_span(plan):
    """What a summary is written from: the span it replaces and the earlier summary it updates. A
    summary made before someone else changed the branch (a new overlay, new messages) covers another."""
    earlier = f"\nupdating the earlier summary: {plan.previous_summary}" if plan.previous_summary else ""
    return f"summarizes {plan.from_id} … {plan.to_id} ({len(plan.middle)} messages){earlier}"


def accept_summary(plan, summary, leaf_id, span):
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


def summarize(plan, summarizer_model):
    from memorylab.llm.models import make_summarizer

    return make_summarizer(summarizer_model, **completion_settings())(plan.prompt).strip()


AUDIT_ON_RENDER_MESSAGES = 2000  # a session up to this long has its overlays audited as the tab draws


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


def overlay_audit(container, audit):
    """What one stored overlay's summary dropped, folded: the tab lists every overlay."""
    whole = len(audit.kept) + len(audit.lost)
    lost = f"{len(audit.lost)} of {whole} artifacts" if audit.lost else f"nothing (kept all {whole} artifacts)"
    with container.expander(f"What this summary dropped: {lost}" if whole else
                            "What this summary dropped: its span states no artifact"):
        dropped_panel(audit, session, f"overlay_lost_{audit.overlay_id}", heading=None)


preview_tab, ab_tab, overlays_tab, micro_tab = st.tabs(
    ["Preview and run", "Compare A/B", "Overlay history", "Micro-compaction"])

with preview_tab:
    settings = setting_controls("main", st)
    extra = st.columns(3)
    threshold = extra[0].number_input("Auto-compact threshold (tokens)", 100, 1_000_000, 6000, step=500,
                                      help="compact_after(threshold): compaction runs after an append that puts "
                                           "history plus system prompt strictly over it.")
    summarizer_model = extra[1].text_input("Summarizer model", key="main_model")
    row_limit = extra[2].number_input("Row size limit (bytes)", 1024, 10_000_000, 1_800_000, step=100_000,
                                      help="Messages larger than this are shrunk before they are stored.")
    template = st.text_area("Summary prompt template", height=200, key="main_template",
                            help="Placeholders: {transcript}, {previous_summary}, {target_tokens}.")
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
        if st.button("Run the summarizer", type="primary"):
            with st.status(f"Summarizing {len(plan.middle)} messages with {summarizer_model}…", expanded=True) as status:
                try:
                    st.session_state["proposal"] = {"summary": summarize(plan, summarizer_model), "leaf": leaf_id,
                                                    "settings": settings, "template": template,
                                                    "span": plan_span(plan)}
                    status.update(label="Summary ready for review", state="complete")
                except MemoryLabError as failure:
                    status.update(label="The summarizer failed", state="error")
                    st.error(str(failure))
        proposal = st.session_state.get("proposal")
        if proposal and proposal["leaf"] == leaf_id:
            st.subheader("Review the proposed summary")
            edited = st.text_area("Summary (edit before accepting if you like)", proposal["summary"], height=220,
                                  key="proposal_text")
            audit = proposal_audit(branch, edited, plan.from_id, plan.to_id, session)
            st.caption(f"{audit_caption(audit, 'The proposed summary')} What it would drop is listed below the buttons.")
            accept, reject = st.columns(2)
            refused = False
            if accept.button("Accept: add as an overlay", type="primary"):
                if proposal["settings"] != settings or proposal["template"] != template:
                    st.warning("The settings changed since this summary was made; run it again first.")
                else:
                    refused = accept_summary(plan, edited, leaf_id, proposal["span"])
            if reject.button("Reject"):
                drop_proposal()
            if refused or proposal["span"] != plan_span(plan):
                changed_since_loaded("compaction", "The branch", stored=plan_span(plan), version=plan_span(plan),
                                     yours=proposal["span"], refused=refused, reload=drop_proposal,
                                     overwrite=lambda shown: accept_summary(plan, edited, leaf_id, shown))
            with st.container(border=True):
                dropped_panel(audit, session, "proposal_lost", heading="What this summary would drop",
                              subject="The proposed summary")

with ab_tab:
    st.caption("Two arms on the active branch, run as an experiment: each fact below is a probe, kept when the "
               "context the model would see next (head, summary, tail) still holds it. Extractive needs no model.")
    columns = st.columns(2)
    arms, ready = [], True
    for name, column in (("A", columns[0]), ("B", columns[1])):
        column.markdown(f"**Arm {name}**")
        strategy = column.selectbox("Strategy", ["summarize", "extractive"], key=f"{name}_strategy",
                                    help="summarize: a model writes the summary; extractive: the span's most "
                                         "informative sentences, no model")
        variant_settings = setting_controls(name, column)
        arm = {"name": name, "strategy": strategy, **variant_settings}
        if strategy == "summarize":
            arm["model"] = column.text_input("Summarizer model", key=f"{name}_model") or None
            arm["completion"] = completion_settings()
        arms.append(arm)
        variant_plan, variant_error = plan_or_error(branch, variant_settings, None, history)
        ready = ready and variant_plan is not None
        if variant_error:
            column.error(variant_error)
        elif variant_plan is None:
            column.info("Nothing to compact with this setting.")
        else:
            column.caption(f"Summarizes {variant_plan.from_id}..{variant_plan.to_id} ({len(variant_plan.middle)} "
                           f"messages): {variant_plan.tokens_before:,} → {variant_plan.tokens_after:,} tokens, "
                           f"saves {variant_plan.tokens_before - variant_plan.tokens_after:,}")
    facts = st.text_area("Facts that must survive (one per line)", "\n".join(sample_facts(session.session_id)),
                         height=150, key=f"ab_facts:{session.session_id}")
    facts = [fact.strip() for fact in facts.splitlines() if fact.strip()]
    if not facts:
        st.info("List at least one fact: each becomes a probe of the experiment.")
    if st.button("Summarize both and compare", disabled=not (ready and facts)):
        spec = quick_ab_spec(session, leaf_id, arms, facts)
        progress = st.progress(0.0, text="Running A and B…")
        try:
            results = Experiments(store, tenant_id=session.tenant_id, allowed_hosts=sidebar_api_hosts()).run(
                spec, progress=lambda done, total, run: progress.progress(done / total, text=f"{run['arm']} done"))
        except MemoryLabError as failure:
            st.error(str(failure))
        else:
            progress.empty()
            st.session_state["ab_results"] = {"branch": branch_id, "experiment": spec["name"], "trial": results.trial,
                                              "runs": {run["arm"]: run for run in results.runs}}
            st.session_state["exp_open"] = spec["name"]  # the Experiments page opens on it
    ab = st.session_state.get("ab_results")
    if ab and ab["branch"] == branch_id:
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
        link_to("pages/experiments.py",
                f"Trial {ab['trial']} of “{ab['experiment']}” is kept on the Experiments page", "🧪")

with overlays_tab:
    overlays = session.get_compactions()
    if not overlays:
        st.info("No overlays on this session yet.")
    audits = overlay_audits(overlays)
    visible_ids = {m["metadata"]["compaction"]["overlay_id"] for m in history if m["id"].startswith("compaction_")}
    for overlay in reversed(overlays):
        with st.container(border=True):
            head, action = st.columns([5, 1])
            state = "visible on this branch" if overlay["id"] in visible_ids else "superseded or on another branch"
            head.markdown(f"**Overlay {overlay['id']}** · `{overlay['from_id']}` … `{overlay['to_id']}` · {state}")
            head.caption(f"{overlay['created_at']} · {overlay['metadata']}")
            head.code(overlay["summary"], language=None, wrap_lines=True)
            if overlay["id"] in audits:
                overlay_audit(head, audits[overlay["id"]])
            if action.button("Undo", key=f"undo_{overlay['id']}", help="Remove the overlay; the originals show again."):
                session.remove_compaction(overlay["id"])
                st.rerun()

with micro_tab:
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
