# Sessions: every conversation in the store, paged and searched in SQL; selecting a row opens it on
# every page. The import panel brings in other systems' memory.
#
# State: ``sessions_search`` (the search box), ``sessions_page`` (the page of rows shown),
# ``sessions_table`` (the row selected; a new key whenever the rows listed change) and the import
# panel's (lab_ui/import_panel.py). The selection itself is ``session_ref`` (lab_ui/selection.py).
import math

import streamlit as st

from lab_ui.import_panel import import_panel
from lab_ui.navigation import link_to
from lab_ui.selection import select_session
from lab_ui.sidebar import offer_samples, setup_page
from lab_ui.tables import selected_rows, table_key
from memorylab import to_dataframe

PAGE_SIZE = 100  # rows at once: a store of thousands of sessions is paged and searched in SQL
COLUMNS = {"session_id": "session", "title": "title", "agent_id": "agent", "tenant_id": "tenant",
           "message_count": "messages", "branch_count": "branches", "tokens": "tokens", "updated_at": "updated"}


def listed_sessions(total):
    """The search box and the page picker; returns (the search, the sessions listed, how many match, pages)."""
    controls = st.columns([3, 1])
    search = controls[0].text_input("Find sessions", key="sessions_search", placeholder="part of an id or a title")
    search = search.strip() or None
    matching = store.sessions.count(search=search) if search else total
    pages = math.ceil(matching / PAGE_SIZE)
    page = 1
    if pages > 1:
        # A narrower search has fewer pages: the page chosen before may no longer exist.
        st.session_state["sessions_page"] = min(st.session_state.get("sessions_page", 1), pages)
        page = controls[1].number_input(f"Page (of {pages:,})", 1, pages, key="sessions_page")
    sessions = store.sessions.list(search=search, limit=PAGE_SIZE, offset=(page - 1) * PAGE_SIZE)
    return search, sessions, matching, pages


def render_totals(sessions, matching, total, pages):
    totals = st.columns(4)
    totals[0].metric("Sessions", f"{matching:,}" if matching == total else f"{matching:,} of {total:,}")
    shown = " on this page" if pages > 1 else ""  # sums of the rows listed, so say so when they are not all
    totals[1].metric(f"Messages{shown}", f"{sum(s['message_count'] for s in sessions):,}")
    totals[2].metric(f"Branches{shown}", f"{sum(s['branch_count'] for s in sessions):,}")
    totals[3].metric(f"Tokens{shown} (estimate)", f"{sum(s['tokens'] for s in sessions):,}")


def render_table(sessions):
    """The sessions as a table; selecting a row makes it the session every page shows."""
    table = to_dataframe(sessions)[list(COLUMNS)].rename(columns=COLUMNS)
    event = st.dataframe(
        table, hide_index=True, width="stretch", on_select="rerun", selection_mode="single-row",
        # A selection is row numbers: a new key for another page, search or order of the same rows.
        key=table_key("sessions_table", [(r["tenant_id"], r["agent_id"], r["session_id"]) for r in sessions]),
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
    selected = selected_rows(event, sessions)
    if selected:
        row = selected[0]
        ref = (row["tenant_id"], row["agent_id"], row["session_id"])
        if ref != st.session_state.get("session_ref"):
            select_session(ref)
            st.rerun()


def render_selected(session):
    description = session.info["metadata"].get("description")
    st.subheader(session.info["metadata"].get("title") or session.session_id)
    if description:
        st.write(description)
    link_to("chat", "Chat on this session", "💬")
    link_to("tree", "See its tree", "🌳")


store, session = setup_page("Sessions")
total = store.sessions.count()
st.title("Sessions")
st.caption(f"Every conversation in `{store.path}`, with its branches and stored token estimate. "
           "Select a row to open it on every page.")
import_panel(store, expanded=not total)
if not total:
    offer_samples(store)
search, sessions, matching, pages = listed_sessions(total)
render_totals(sessions, matching, total, pages)
if sessions:
    render_table(sessions)
else:
    st.info(f"No session's id or title holds “{search}”.")
if session is not None:
    render_selected(session)
