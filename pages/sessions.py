import pandas as pd
import streamlit as st

from pages.common import open_store

store = open_store()
sessions = store.list_sessions()

st.title("Sessions")
st.caption(f"Database `{store.path}`: every conversation, with its branches and stored token estimate.")

if not sessions:
    st.info("This database holds no sessions yet. Create the demo data with `memorylab --db "
            f"{store.path} demo`, or import an export with `memorylab import FILE`.")
    st.stop()

totals = st.columns(4)
totals[0].metric("Sessions", len(sessions))
totals[1].metric("Messages", f"{sum(s['message_count'] for s in sessions):,}")
totals[2].metric("Branches", f"{sum(s['branch_count'] for s in sessions):,}")
totals[3].metric("Tokens (estimate)", f"{sum(s['tokens'] for s in sessions):,}")

table = pd.DataFrame(
    {
        "session": s["session_id"],
        "title": s["metadata"].get("title", ""),
        "agent": s["agent_id"],
        "tenant": s["tenant_id"],
        "messages": s["message_count"],
        "branches": s["branch_count"],
        "tokens": s["tokens"],
        "updated": pd.to_datetime(s["updated_at"], utc=True),
    }
    for s in sessions
)
st.dataframe(
    table,
    hide_index=True,
    width="stretch",
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
