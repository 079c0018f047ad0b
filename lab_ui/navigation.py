"""Links between the lab's pages. A page script run on its own (outside ``app.py``'s navigation)
gets a hint instead of a link."""
import streamlit as st

from .selection import select_leaf, select_session

PAGE_DIR = "app_pages"


def page_path(name):
    """The script of the page ``name`` (``"tree"``), as ``st.page_link`` and ``st.switch_page`` take it."""
    return f"{PAGE_DIR}/{name}.py"


def link_to(page, label, icon):
    """A link to the page ``page`` (``"tree"``) of the app; a hint instead when this page runs on its own."""
    try:
        st.page_link(page_path(page), label=label, icon=icon)
    except st.errors.StreamlitAPIException:
        st.caption(f"{icon} {label}: open it from the app's navigation.")


def switch_to(page, hint):
    """Go to the page ``page``; ``hint`` says what to open when this page runs on its own."""
    try:
        st.switch_page(page_path(page))
    except st.errors.StreamlitAPIException:  # the page runs on its own, outside the app's navigation
        st.info(hint)


def open_message(ref, message_id, session, page="tree"):
    """Select the branch that shows ``message_id`` and go to the Tree or the Chat page; the Chat page
    draws its branch back to that message (``focus_message``) however long the branch is."""
    select_session(ref)
    select_leaf(session.get_leaf_for(message_id))
    if page == "chat":
        st.session_state["focus_message"] = message_id
    switch_to(page, f"Selected. Open the {page.capitalize()} page to see the message on its branch.")
