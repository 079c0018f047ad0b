"""Moving between the lab's pages: the sidebar's menu, links and jumps from one page to another,
each carrying the view it opens in its query parameters (``deep_links``). A page script run on its
own (outside ``app.py``'s navigation) gets a hint instead of a link."""
import streamlit as st
import streamlit.components.v1 as components

from .deep_links import PAGE, PageEnded, current_view, selection_view, show_view_in_url
from .selection import select_leaf, select_session

PAGE_DIR = "app_pages"
SWITCHED = "nav_switched"
"""Set by ``switch_to`` for the run of the page it opens, which starts at the top."""
_SCROLL_TO_TOP = """<script>
for (let element = window.parent.document.querySelector('[data-testid="stMainBlockContainer"]'); element;
     element = element.parentElement) element.scrollTop = 0;
</script>"""
"""Streamlit keeps the page's scroll position across a switch: a jump from the foot of a long page
would open the next one scrolled down, its title out of sight."""


def run_page(page, pages):
    """Run ``page`` (of ``pages``, from ``st.navigation`` with its own menu hidden), then draw the
    sidebar's menu and write the view into the URL. Not when the page asked for a rerun: that starts
    from the URL as it was when asked, and writes the view."""
    st.session_state[PAGE] = page.url_path
    menu = st.sidebar.empty()  # the top of the sidebar
    drawn = _draw_menu(menu, pages)  # at once, so a long page's run never leaves the sidebar without it
    start_at_the_top()
    try:
        page.run()
    except PageEnded:
        pass
    if _menu_views(pages) != drawn:  # the run picked another session, branch or experiment
        _draw_menu(menu, pages)
    show_view_in_url(page.url_path)


def _menu_views(pages):
    return [current_view(page.url_path) for page in pages]


def _draw_menu(slot, pages):
    """The menu's links in ``slot``, each carrying the view it opens; returns those views."""
    views = _menu_views(pages)
    with slot.container():
        for page, view in zip(pages, views):
            st.page_link(page, query_params=view)
        st.divider()
    return views


def page_path(name):
    """The script of the page ``name`` (``"tree"``), as ``st.page_link`` and ``st.switch_page`` take it."""
    return f"{PAGE_DIR}/{name}.py"


def link_to(page, label, icon):
    """A link to the page ``page`` (``"tree"``) of the app; a hint instead when this page runs on its own.
    Links, jumps and the menu carry the selection (a jump, not the experiment it may open): opened
    without it, a page's run writes it into the URL as a second step of the browser's history, and
    Back takes two presses."""
    try:
        st.page_link(page_path(page), label=label, icon=icon, query_params=selection_view())
    except st.errors.StreamlitAPIException:
        st.caption(f"{icon} {label}: open it from the app's navigation.")


def switch_to(page, hint):
    """Go to the page ``page``; ``hint`` says what to open when this page runs on its own."""
    try:
        st.session_state[SWITCHED] = True
        st.switch_page(page_path(page), query_params=selection_view())
    except st.errors.StreamlitAPIException:  # the page runs on its own, outside the app's navigation
        st.session_state.pop(SWITCHED)
        st.info(hint)


def start_at_the_top():
    """Scroll the page to its top when ``switch_to`` opened it, as its run starts: before the person
    can scroll the new page, and before its elements arrive (the frame it takes sits in the sidebar,
    where it moves no page element)."""
    if st.session_state.pop(SWITCHED, False):
        with st.sidebar:
            components.html(_SCROLL_TO_TOP, height=0)


def open_message(ref, message_id, session, page="tree"):
    """Select the branch that shows ``message_id`` and go to the Tree or the Chat page; the Chat page
    draws its branch back to that message (``focus_message``) however long the branch is."""
    select_session(ref)
    select_leaf(session.get_leaf_for(message_id))
    if page == "chat":
        st.session_state["focus_message"] = message_id
    switch_to(page, f"Selected. Open the {page.capitalize()} page to see the message on its branch.")
