"""The session and leaf every page shows, and the branch history they read.

They live in ``st.session_state``, so they survive page switches: ``session_ref`` (tenant_id,
agent_id, session_id) and ``leaf_id`` (None = the newest leaf).
"""
import streamlit as st

from memorylab import DamagedRowError

from .damaged_rows import named_again, recording_damaged_rows
from .store import database_target


def ref_of(row):
    """The (tenant_id, agent_id, session_id) of a session's listing row."""
    return (row["tenant_id"], row["agent_id"], row["session_id"])


def select_session(ref):
    """Make ``ref`` the session every page shows, starting at its newest leaf."""
    st.session_state["session_ref"] = ref
    st.session_state["leaf_id"] = None


def select_leaf(leaf_id):
    st.session_state["leaf_id"] = leaf_id


def session_row(store, ref):
    """The listing row of one session, or None when it is gone."""
    rows = store.sessions.list(tenant_id=ref[0], agent_id=ref[1], session_id=ref[2])
    return rows[0] if rows else None


def active_leaf(session):
    """The selected leaf when it belongs to ``session``, else the newest leaf. A leaf whose row is
    damaged is still a leaf: its history reads without it, and the page says so."""
    leaf_id = st.session_state.get("leaf_id")
    try:
        if leaf_id and session.get_message(leaf_id) is not None:
            return leaf_id
        latest = session.get_latest_leaf()
    except DamagedRowError as error:
        st.warning(f"{error}. The history below leaves that message out.")
        return leaf_id or session.get_latest_leaf_id()
    return latest["id"] if latest else None


def branch_key(session, leaf_id):
    """What names the overlaid history of a branch between reruns: the database, the session, the
    leaf, and what changes when the session gains a message (its newest one), loses one (its update
    time) or gains or loses an overlay. Three one-row reads, so every rerun can afford it."""
    overlays = tuple(overlay["id"] for overlay in session.get_compactions())
    return (database_target(), session.tenant_id, session.agent_id, session.session_id, leaf_id,
            session.get_latest_leaf_id(), session.info["updated_at"], overlays)


def branch_history(session, leaf_id):
    """The overlaid history of the branch ending at ``leaf_id``, read once per ``branch_key`` and
    shared by every rerun and page: read-only, callers must not change it or its messages. Rows the
    read skipped are named in the page's banner on every run, not only the one that read them."""
    return named_again(_branch_history(branch_key(session, leaf_id), session, leaf_id))


@st.cache_resource(max_entries=8, show_spinner="Reading the branch…")
def _branch_history(key, _session, _leaf_id):
    with recording_damaged_rows() as skipped:
        return _session.get_history(_leaf_id), skipped
