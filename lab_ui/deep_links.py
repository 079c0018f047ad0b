"""The view in the URL: the session, its branch and, on the Experiments page, the experiment, its tab
and its trial live in the query parameters (names in ``memorylab.lab_links``), so a reload, a new
tab, back and forward, and a pasted link open the same view.

``app.py`` writes the view into the URL at the end of every run (``navigation.run_page``) and keeps
what it wrote in ``st.session_state["url_view"]``. A page that ends early calls ``stop_showing_view``
instead of ``st.stop()``: a stopped run can write nothing more, not even the URL.

A run whose URL names something else (a pasted link, a reload, back or forward) follows the URL:
the sidebar's selection in ``follow_selection_link``, the experiment in ``follow_experiment_link``.
What a link names that is not in the database is said, and the view selected before stays.
``exp_link_tab`` is the tab a link asked for, which the draft it opens keeps
(``experiment_drafts.opened_draft``), for one run.
"""
import streamlit as st

from memorylab import DamagedRowError, Session
from memorylab.lab_links import EXPERIMENT_PARAMS, SELECTION_PARAMS, session_view

from .experiment_drafts import FROM_SAMPLE, NEW, UPLOAD
from .selection import ref_of, select_leaf, select_session, session_row

WRITTEN = "url_view"
PAGE = "url_page"
"""The url path of the page ``app.py`` runs now; absent when a page script runs on its own."""
OWNED = SELECTION_PARAMS + EXPERIMENT_PARAMS
"""The parameters the lab writes; any other one in the URL stays as it is."""


def _asked(names):
    """What the URL names among ``names`` when this tab did not write it there itself; else None."""
    asked = {name: st.query_params[name] for name in names if name in st.query_params}
    written = st.session_state.get(WRITTEN, {})
    if not asked or asked == {name: written[name] for name in names if name in written}:
        return None
    return asked


def follow_selection_link(store):
    """Select the session and branch the URL names, when it names another one than this tab wrote."""
    asked = _asked(SELECTION_PARAMS)
    if asked is None:
        return
    if "session" not in asked:  # a link to an experiment names its tenant only
        _follow_tenant(store, asked.get("tenant"))
        return
    ref = (asked.get("tenant", "default"), asked.get("agent", "default"), asked["session"])
    if session_row(store, ref) is None:
        st.warning(f"The link opens session `{ref[2]}` (agent `{ref[1]}`, tenant `{ref[0]}`), which is not in "
                   f"`{store.path}`: another session is shown instead (pick one in the sidebar).", icon="🔗")
        return
    select_session(ref)
    leaf_id = asked.get("leaf")
    if leaf_id and _has_message(store, ref, leaf_id):
        select_leaf(leaf_id)
    elif leaf_id:
        st.warning(f"The link opens branch `{leaf_id}`, which session `{ref[2]}` does not hold: its newest branch "
                   "is shown instead.", icon="🔗")


def _has_message(store, ref, message_id):
    session = Session.open(store, ref[2], tenant_id=ref[0], agent_id=ref[1])
    try:
        return session.get_message(message_id) is not None
    except DamagedRowError:  # there, but unreadable: the page's banner says so
        return True


def _follow_tenant(store, tenant):
    current = st.session_state.get("session_ref")
    if not tenant or (current and current[0] == tenant):
        return
    rows = store.sessions.list(tenant_id=tenant, limit=1)
    if not rows:
        st.warning(f"The link opens tenant `{tenant}`, which holds no session in `{store.path}`: the session "
                   "shown is of another tenant (pick one in the sidebar).", icon="🔗")
        return
    select_session(ref_of(rows[0]))


def follow_experiment_link(listing, tabs):
    """Open the experiment, tab and trial the URL names (``listing``: the saved experiments by name;
    ``tabs``: the page's tab labels), when it names another one than this tab wrote."""
    asked = _asked(EXPERIMENT_PARAMS)
    if asked is None or "experiment" not in asked:
        return
    name = asked["experiment"]
    if name not in listing:
        st.warning(f"The link opens experiment “{name}”, which this tenant does not hold: pick one below.",
                   icon="🔗")
        return
    st.session_state["exp_open"] = name
    if asked.get("tab") in tabs:
        st.session_state["exp_show"] = st.session_state["exp_link_tab"] = asked["tab"]
    trial = asked.get("trial")
    if trial is None:
        return
    if trial.isdigit() and 1 <= int(trial) <= listing[name]["trials"]:
        st.session_state[f"exp_trial:{name}"] = int(trial)
    else:
        st.warning(f"The link opens trial {trial} of “{name}”, which has {listing[name]['trials']} trials: the "
                   "newest is shown instead.", icon="🔗")


def linked_audit(audits, chosen):
    """The audit the Audit page shows: the one ``chosen`` in its table (the link's ``overlay`` then
    leaves the URL), else the one of the selected session a link names (as ``memorylab audit
    --lab-url`` prints it), else None."""
    overlay = st.query_params.get("overlay")
    if chosen is not None or overlay is None:
        if overlay is not None:
            del st.query_params["overlay"]
        return chosen
    ref = st.session_state.get("session_ref")
    linked = next((audit for audit in audits if str(audit.overlay_id) == overlay
                   and (audit.tenant_id, audit.agent_id, audit.session_id) == ref), None)
    if linked is None:
        st.warning(f"The link opens overlay {overlay} of session `{ref[2]}`, which holds no such compaction now: "
                   "the worst one is shown instead.", icon="🔗")
    return linked


def current_view(page):
    """The view ``page`` (its url path) shows now, as query parameters."""
    return selection_view() | (_as_params(_experiment_view()) if page == "experiments" else {})


def selection_view():
    """The selected session and branch, as query parameters: what every page shows."""
    ref = st.session_state.get("session_ref")
    return _as_params(session_view(*ref, st.session_state.get("leaf_id")) if ref else {})


def _as_params(view):
    return {name: str(value) for name, value in view.items() if value is not None}


def _experiment_view():
    choice = st.session_state.get("exp_choice")
    if choice in (None, NEW, FROM_SAMPLE, UPLOAD):  # not saved: nothing a link could open
        return {}
    tab = st.session_state.get("exp_tab") or "Results"
    trial = st.session_state.get(f"exp_trial:{choice}") if tab == "Results" else None
    return {"experiment": choice, "tab": tab, "trial": trial}


def show_view_in_url(page):
    """Write the view into the URL (one change, so one step of the browser's history), keeping the
    parameters the lab does not own."""
    st.session_state.pop("exp_link_tab", None)
    view = current_view(page)
    others = {name: value for name, value in st.query_params.to_dict().items() if name not in OWNED}
    st.session_state[WRITTEN] = view
    if st.query_params.to_dict() != others | view:
        st.query_params.from_dict(others | view)


class PageEnded(Exception):
    """``stop_showing_view`` under ``app.py``: the page's run ends there, and ``app.py`` finishes it."""


def stop_showing_view():
    """``st.stop()``, after the menu and the view in the URL (when ``app.py`` runs the page)."""
    if PAGE in st.session_state:
        raise PageEnded
    st.stop()
