"""Buttons that ask before they change what the agent reads: a dialog says what will happen, and the
action runs only from its confirm button.

State: ``confirming`` (the key of the button whose dialog is open; one at a time).
"""
import streamlit as st


def ask_first(container, label, *, key, title, body, confirm, action, acknowledge=None, **button):
    """``container``'s button ``label``; clicked, it opens the dialog ``title``: ``body()`` draws what
    will happen, ``confirm`` runs ``action()``, Cancel closes it. Given ``acknowledge`` (a checkbox's
    label), the confirm button waits until it is ticked."""
    if container.button(label, key=key, **button):
        st.session_state["confirming"] = key
    if st.session_state.get("confirming") == key:
        st.dialog(title, on_dismiss=_close)(_ask)(key, body, confirm, action, acknowledge)


def _close():
    st.session_state.pop("confirming", None)


def _ask(key, body, confirm, action, acknowledge):
    body()
    ticked = st.checkbox(acknowledge, key=f"{key}:acknowledged") if acknowledge else True
    yes, cancel = st.columns(2)
    if yes.button(confirm, key=f"{key}:confirm", type="primary", disabled=not ticked):
        _close()
        action()  # reruns the page when it has written; an error it shows stays in the dialog
    if cancel.button("Cancel", key=f"{key}:cancel"):
        _close()
        st.rerun()
