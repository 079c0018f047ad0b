import streamlit as st

from memorylab import to_dataframe

from pages.common import link_to, offer_samples, select_session, setup_page
from pages.importing import import_panel

store, session = setup_page("Sessions")
sessions = store.sessions.list()

st.title("Sessions")
st.caption(f"Every conversation in `{store.path}`, with its branches and stored token estimate. "
           "Select a row to open it on every page.")
import_panel(store, expanded=not sessions)
if not sessions:
    offer_samples(store)

totals = st.columns(4)
totals[0].metric("Sessions", len(sessions))
totals[1].metric("Messages", f"{sum(s['message_count'] for s in sessions):,}")
totals[2].metric("Branches", f"{sum(s['branch_count'] for s in sessions):,}")
totals[3].metric("Tokens (estimate)", f"{sum(s['tokens'] for s in sessions):,}")

table = to_dataframe(sessions)[["session_id", "title", "agent_id", "tenant_id", "message_count", "branch_count",
                                  "tokens", "updated_at"]].rename(columns={
    "session_id": "session", "agent_id": "agent", "tenant_id": "tenant", "message_count": "messages",
    "branch_count": "branches", "updated_at": "updated"})
event = st.dataframe(
    table,
    hide_index=True,
    width="stretch",
    on_select="rerun",
    selection_mode="single-row",
    key="sessions_table",
    column_config={
        "messages": st.column_config.NumberColumn(help="Stored messages on all branches"),
        "branches": st.column_config.NumberColumn(help="Leaves: one per root-to-leaf path"),
        "tokens": st.column_config.ProgressColumn(
            help="Estimated tokens of every stored message", format="%d",
            min_value=0, max_value=max(int(table["tokens"].max()), 1),
        ),
        "updated": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm"),
    },
)
selected = event.selection.rows if event else []
if selected:
    row = sessions[selected[0]]
    ref = (row["tenant_id"], row["agent_id"], row["session_id"])
    if ref != st.session_state.get("session_ref"):
        select_session(ref)
        st.rerun()

if session is not None:
    description = session.info["metadata"].get("description")
    st.subheader(session.info["metadata"].get("title") or session.session_id)
    if description:
        st.write(description)
    link_to("pages/chat.py", "Chat on this session", "💬")
    link_to("pages/tree.py", "See its tree", "🌳")
