"""The sidebar's switch that attaches the lab's sample context to the session shown.

A session runs with its own context (``memorylab.session_context``); the sample data's blocks and
long-term memory come with a sample session, and with any other only when this switch is turned on.
State: ``lab_context_<tenant>/<agent>/<session>``, one switch per session.
"""
import streamlit as st

from memorylab.samples import LONGTERM_WORKSPACE
from memorylab.session_context import session_origin

from .selection import ref_of


def _key(ref):
    return "lab_context_" + "/".join(ref)


def lab_context_switch(row) -> bool | None:
    """The switch for the session of listing row ``row`` (the sidebar's pick, so no read of its own),
    drawn in the sidebar; returns whether the lab's sample context is attached (None, drawing
    nothing, when there is no session)."""
    if row is None:
        return None
    ref, origin = ref_of(row), session_origin(row)
    st.session_state.setdefault(_key(ref), origin.is_sample)
    attached = st.sidebar.toggle(
        "Attach the lab's sample context", key=_key(ref),
        help=f"The sample persona (soul), memory and todo blocks, knowledge base, skills and the "
             f"`{LONGTERM_WORKSPACE}` long-term memory workspace. A sample conversation has them as its own; "
             "any other session runs with what it recorded (its stored blocks and its own system messages) "
             "unless this is on.")
    st.sidebar.caption(f"Runs with {'the lab sample context' if attached else 'its own context'}: "
                       f"{origin.description}.")
    return attached


def lab_context_attached(session) -> bool:
    """Whether the session shown runs with the lab's sample context (its switch, else its default)."""
    key = _key((session.tenant_id, session.agent_id, session.session_id))
    if key in st.session_state:  # set by the sidebar's switch on every page run: no read of the session
        return st.session_state[key]
    return session_origin(session.info).is_sample
