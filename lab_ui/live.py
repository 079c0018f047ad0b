"""Live pages: the selected session redraws by itself when another writer (``memorylab watch``,
``memorylab collect``, an agent of your own) adds to it.

``live_updates(session)`` draws, in the sidebar, a "Live" toggle (on unless paused) and, while it is on,
a fragment that every ``LIVE_SECONDS`` reads the session's change mark (two one-row reads, so an idle
session costs next to nothing) and reruns the page only when the mark moved since the page was drawn.
A rerun keeps every widget's state, so what the user is typing or editing stays; a branch that grew
under the active leaf is followed to its new end. State: ``live_updates`` (the toggle) and
``live_drawn`` (the mark the page was drawn at: read by the fragment's first run, inside the page's).
"""
import streamlit as st

from .selection import select_leaf

LIVE_SECONDS = 1.0
DRAWN = "live_drawn"


def change_mark(session):
    """What moves when the session gains, loses or changes a message: its newest leaf, its update time."""
    return session.get_latest_leaf_id(), session.info["updated_at"]


def live_updates(session):
    """The live indicator and its pause; while live, the page reruns when ``session`` changed."""
    with st.sidebar:
        live = st.toggle("Live", value=True, key="live_updates",
                         help="Redraw this page when new messages arrive (from memorylab watch, collect or any "
                              "other writer). Off: the page stays as it is until you act.")
        if live:
            st.session_state.pop(DRAWN, None)  # a page run: the fragment's run inside it reads the mark anew
            _follow(session)
        else:
            st.caption("⏸️ Paused: new messages show when you turn Live on again")


@st.fragment(run_every=LIVE_SECONDS)
def _follow(session):
    st.caption(f"🟢 Live: checking for new messages every {LIVE_SECONDS:g} s")
    mark = change_mark(session)
    if st.session_state.setdefault(DRAWN, mark) == mark:
        return
    leaf_id = st.session_state.get("leaf_id")
    if leaf_id is not None and session.get_message(leaf_id) is not None:
        select_leaf(session.get_leaf_for(leaf_id))  # the branch grew: show its new end
    st.rerun()
