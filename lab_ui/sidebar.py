"""Every page's start: page config, the sidebar (database, session and model pickers) and the shared state.

Every page calls ``setup_page`` (or ``session_page``) first, which also makes it runnable on its own.
State: ``database`` (the target opened in the sidebar), ``session_ref`` and ``leaf_id`` (see
``selection``; a link's query parameters select them, see ``deep_links``), ``model`` and
``completion_kwargs`` (see ``models``).
"""
from urllib.parse import parse_qsl, urlsplit

import streamlit as st

from memorylab import MemoryLabError, NotFoundError, load_samples
from memorylab.shapes import SessionRows
from memorylab.store import is_postgres_url

from .damaged_rows import report_damaged_rows
from .deep_links import follow_selection_link, stop_showing_view
from .models import model_picker
from .selection import ref_of, select_session, session_row
from .session_context import lab_context_switch
from .store import cached_store, lab_session, open_store

PREFERRED_SESSION = "support-order-4471"
PICKER_SIZE = 50
"""Sessions the sidebar lists at once; a larger store is searched instead of listed."""


def _has_password(target):
    parts = urlsplit(target)
    return bool(parts.password) or any(key == "password" for key, _ in parse_qsl(parts.query))


def _database_picker(store):
    """Switch the lab to another SQLite file or a PostgreSQL URL; a failure keeps the current one."""
    with st.sidebar.expander("Open another database", expanded=False):
        # Cleared on submit: a URL typed with a password in it does not stay on the screen.
        with st.form("open_database", border=False, clear_on_submit=True):
            typed = st.text_input(
                "SQLite file or PostgreSQL URL", placeholder="lab.db or postgresql://user@host/db",
                help="A PostgreSQL password comes from PGPASSWORD or ~/.pgpass, never from this box.")
            opened = st.form_submit_button("Open")
        typed = typed.strip()
        if not opened or not typed:
            return
        if is_postgres_url(typed) and _has_password(typed):
            st.error("Leave the password out of the URL: set PGPASSWORD or add it to ~/.pgpass, which the "
                     "lab reads without ever showing it. The current database stays open.")
            return
        try:
            cached_store(typed)
        except MemoryLabError as error:
            st.error(f"Could not open it, so the current database stays open: {error}")
            return
        st.session_state["database"] = typed
        st.session_state.pop("session_ref", None)
        st.session_state["leaf_id"] = None
        st.rerun()


def _session_picker(store):
    """The sidebar's session choice, as its listing row (None when the store has none). A store with
    more sessions than ``PICKER_SIZE`` gets a search box: the list shows the newest matches (filtered
    and paged in SQL), plus the session already chosen."""
    total = store.sessions.count()
    if not total:
        st.sidebar.info("No sessions yet.")
        return None
    search = ""
    if total > PICKER_SIZE:
        search = st.sidebar.text_input("Find a session", key="session_search", placeholder="id or title",
                                       help=f"{total:,} sessions: type part of an id or a title, then Enter.")
    rows = store.sessions.list(search=search.strip() or None, limit=PICKER_SIZE)
    current = st.session_state.get("session_ref")
    current_row = next((row for row in rows if ref_of(row) == current), None)
    if current_row is None and current is not None:
        current_row = session_row(store, current) or session_gone(current, rows)
    if current_row is None:
        current_row = session_row(store, ("default", "support-bot", PREFERRED_SESSION)) or (
            rows or store.sessions.list(limit=1))[0]
        select_session(ref_of(current_row))
        current = ref_of(current_row)
    if current_row not in rows:
        rows = SessionRows([current_row, *rows])
    if search and len(rows) > 1:
        st.sidebar.caption(f"{store.sessions.count(search=search.strip()):,} of {total:,} sessions match.")

    def describe(row):
        title = row["metadata"].get("title") or row["session_id"]
        return (f"{title} · {row['message_count']} msgs · {row['branch_count']} branches · {row['tokens']:,} tok"
                f" [{row['session_id']}]")

    # Options are plain strings (AppTest and the browser both handle them); each maps back to its row.
    labels = {describe(row): row for row in rows}
    names = list(labels)
    choice = st.sidebar.selectbox("Session", names, index=[ref_of(row) for row in labels.values()].index(current),
                                  help="Every page shows this session. Its id, agent and tenant are below.")
    chosen = ref_of(labels[choice])
    if chosen != current:
        select_session(chosen)
    st.sidebar.caption(f"`{chosen[2]}` · agent `{chosen[1]}` · tenant `{chosen[0]}`")
    return labels[choice]


def session_gone(ref, rows):
    """The selected session was deleted (by another process or person) while a page showed it: say
    so, offer the others, and stop the page before it writes anything."""
    choices = {f"{row['metadata'].get('title') or row['session_id']} [{row['session_id']}]": ref_of(row)
               for row in rows if ref_of(row) != ref}
    choice = st.sidebar.selectbox("Session", list(choices), index=None, placeholder="Pick another session",
                                  help="The session selected before no longer exists.")
    if choice is not None:
        select_session(choices[choice])
        st.rerun()
    st.error(f"Session `{ref[2]}` (agent `{ref[1]}`, tenant `{ref[0]}`) no longer exists: it was deleted while "
             "this page was open. Nothing was written. Pick another session in the sidebar.", icon="🗑️")
    stop_showing_view()


def setup_page(title, *, wide=True):
    """Page config, the sidebar and the shared state; returns (store, session or None). A page whose
    selected session was deleted stops here (``session_gone``); damaged rows the page's reads skip
    are named in a banner at its top (``report_damaged_rows``)."""
    st.set_page_config(page_title=f"{title} · memorylab", page_icon="🧠", layout="wide" if wide else "centered")
    store = open_store()
    report_damaged_rows(store)
    st.session_state.setdefault("leaf_id", None)
    st.sidebar.markdown("### 🧠 memorylab")
    st.sidebar.caption(f"Database `{store.path}`")
    _database_picker(store)
    follow_selection_link(store)
    row = _session_picker(store)
    ref = ref_of(row) if row is not None else None
    lab_context = lab_context_switch(row)
    model_picker()
    if ref is None:
        return store, None
    try:
        return store, lab_session(store, ref, lab_context)
    except NotFoundError:  # deleted between the picker's read and this one
        session_gone(ref, store.sessions.list(limit=PICKER_SIZE))


def session_page(title, caption=None):
    """``setup_page`` plus the title and caption; stops the page when there is no session to show."""
    store, session = setup_page(title)
    st.title(title)
    if caption:
        st.caption(caption)
    if session is None:
        offer_samples(store)
    return store, session


def offer_samples(store):
    """What an empty database shows: how to fill it, and a button for the sample data. Stops the page."""
    st.info(f"`{store.path}` holds no session yet. Load the sample conversations here, run "
            f"`memorylab --db {store.path} demo`, or import your agent's memory on the Sessions page or with "
            f"`memorylab --db {store.path} import PATH`.")
    if st.button("Load the sample conversations", type="primary"):
        with st.spinner("Loading the samples…"):
            load_samples(store)
        st.rerun()
    stop_showing_view()
