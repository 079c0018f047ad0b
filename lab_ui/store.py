"""The lab's store: one per database for the whole server, and the session shown from it.

``st.session_state["database"]`` is the target picked in the sidebar (see ``sidebar``).
"""
import streamlit as st

from memorylab import Session, Store, load_samples
from memorylab.session_context import with_session_context
from memorylab.store import default_database, is_postgres_url


def database_target():
    """The database the lab shows: the one opened in the sidebar, else the command line's default
    (``$MEMORYLAB_DB``, else ``lab.db``)."""
    return st.session_state.get("database") or default_database()


def open_store():
    return cached_store(database_target())


@st.cache_resource(show_spinner="Opening the lab database…")
def cached_store(target):
    """One Store per database for the whole server. A new SQLite file gets the sample data; a
    PostgreSQL database is shared, so it only gets them when asked."""
    store = Store(target)
    if not is_postgres_url(target) and not store.sessions.count():
        load_samples(store)
    return store


def lab_session(store, ref, lab_context=None):
    """The selected session with its own context (plus the lab's sample blocks when ``lab_context``;
    default: a sample session's) and a persisted frozen prompt."""
    tenant_id, agent_id, session_id = ref
    session = Session.open(store, session_id, tenant_id=tenant_id, agent_id=agent_id)
    return with_session_context(session, lab_context=lab_context)
