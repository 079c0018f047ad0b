# Audit: what the store's compactions forgot. Retention per kind of artifact over every compaction,
# the compactions worst first, and for the one selected what its summary dropped.
#
# State: ``audit_table`` (the row selected in the table, the worst one while none is; a new key
# whenever the rows listed change, see lab_ui/tables.py); until a row is selected, the compaction a link's
# ``overlay`` names (lab_ui/deep_links.py). The audits are worked out once per state of
# the store (``store.sessions.stamp()``, one cheap read) and shared by every rerun and browser tab.
import streamlit as st

from lab_ui.audit_panel import dropped_panel, open_on_tree
from lab_ui.damaged_rows import named_again, recording_damaged_rows
from lab_ui.deep_links import linked_audit, stop_showing_view
from lab_ui.navigation import link_to
from lab_ui.sidebar import setup_page
from lab_ui.store import database_target
from lab_ui.tables import selected_rows, table_key
from memorylab import MemoryLabError, Session
from memorylab.audit import iter_store_audits, retention_totals
from memorylab.display.frames import audit_table, worst_first
from memorylab.display.viz import retention_figure

COLUMNS = {
    "session_id": st.column_config.TextColumn("session"),
    "overlay_id": st.column_config.NumberColumn("overlay", help="The overlay's id in its session"),
    "retained": st.column_config.NumberColumn("retained", format="percent",
                                              help="Share of the span's artifacts the request after it still held"),
    "lost": st.column_config.NumberColumn("lost"),
    "kept": st.column_config.NumberColumn("kept"),
    "span_messages": st.column_config.NumberColumn("span msgs", help="Messages the summary replaced"),
    "span_tokens": st.column_config.NumberColumn("span tokens"),
    "summary_tokens": st.column_config.NumberColumn("summary tokens"),
}


def store_audits(store):
    """(audits worst first, their table, retention per kind, its figure) of every compaction in ``store``;
    damaged rows the audit skipped are named in the page's banner on every run."""
    return named_again(_store_audits(database_target(), store.sessions.stamp(), store))


@st.cache_resource(max_entries=2, show_spinner="Auditing every compaction in the store…")
def _store_audits(target, stamp, _store):
    with recording_damaged_rows() as skipped:
        audits = worst_first(iter_store_audits(_store))
        by_kind = retention_totals(audits)
        return (audits, audit_table(audits), by_kind, retention_figure(by_kind)), skipped


def audited_session(store, audit):
    """The session ``audit`` was made of (its id may repeat under other agents or tenants: the one
    holding that overlay), or None once it is gone."""
    for row in store.sessions.list(session_id=audit.session_id):
        session = Session(store, row["session_id"], tenant_id=row["tenant_id"], agent_id=row["agent_id"])
        if any(overlay["id"] == audit.overlay_id for overlay in session.get_compactions()):
            return session
    return None


def render_empty(store):
    st.info(f"`{store.path}` holds no compaction yet, so there is nothing to audit. Make one in the **Compaction lab** "
            "(preview a summary of a branch, run the summarizer, accept it), or import an agent history that was "
            "compacted, such as a Claude Code transcript (`~/.claude/projects/…/*.jsonl`): on the Sessions page or "
            f"with `memorylab --db {store.path} import PATH`. `memorylab audit PATH` audits transcripts without "
            "importing them.")
    link_to("compaction_lab", "Open the Compaction lab", "🗜️")


def render_overview(audits, by_kind, figure):
    kept = sum(counts["kept"] for counts in by_kind.values())
    lost = sum(counts["lost"] for counts in by_kind.values())
    metrics = st.columns(3)
    metrics[0].metric("Compactions", f"{len(audits):,}")
    metrics[1].metric("Artifacts lost", f"{lost:,}", help="Stated in a compacted span, held by nothing the agent "
                                                          "read after it")
    metrics[2].metric("Retained overall", f"{kept / (kept + lost):.0%}" if kept + lost else "–")
    st.markdown("#### Retention per kind of artifact")
    st.plotly_chart(figure, width="stretch", config={"displaylogo": False})


def render_worst(audits, table):
    """The compactions worst first; returns the one selected, or None."""
    st.markdown("#### Compactions, worst first")
    st.caption("Sorted by the share of artifacts kept, then by how many were lost. Select one to see what it dropped; "
               "until then the worst is shown.")
    event = st.dataframe(table, hide_index=True, width="stretch", column_config=COLUMNS, on_select="rerun",
                         selection_mode="single-row",
                         key=table_key("audit_table", [(a.session_id, a.overlay_id) for a in audits]))
    chosen = selected_rows(event, audits)
    return chosen[0] if chosen else None


def render_selected(store, audit):
    session = audited_session(store, audit)
    if session is None:
        st.warning(f"Session `{audit.session_id}` or its overlay {audit.overlay_id} is gone: it changed since the "
                   "audit. The table is audited again on the next change.")
        return
    with st.container(border=True):
        title, action = st.columns([3, 1], vertical_alignment="center")
        title.markdown(f"**Session `{audit.session_id}`, overlay {audit.overlay_id}**")
        if action.button("Open on the Tree", key="audit_open_band", width="stretch",
                         help="The Tree with this compaction's band selected"):
            open_on_tree(session, audit.overlay_id)
        dropped_panel(audit, session, "audit_lost")


store, _ = setup_page("Audit")
st.title("Audit")
st.caption("What each compaction forgot: the paths, commands, URLs, ids, numbers, dates, versions, errors and "
           "decisions a compacted span stated that neither its summary, a pinned message, the head nor the tail "
           "still held.")
try:
    audits, table, by_kind, figure = store_audits(store)
except MemoryLabError as failure:
    st.error(f"The audit stopped: {failure}")
    stop_showing_view()
if not audits:
    render_empty(store)
    stop_showing_view()
render_overview(audits, by_kind, figure)
render_selected(store, linked_audit(audits, render_worst(audits, table)) or audits[0])
