"""The Chat page's replay panel: ask the active branch's user turns again under another model or
other settings, in the background, then compare two branches' answers side by side.

State: ``replay_job`` (the replay running, a ``ReplayJob``; one at a time per browser tab),
``replay_compare:<session id>:<leaf id>`` (the branch the active one is compared with) and
``COMPARISON_OPEN`` (whether the comparison is open: it reads both branches whole, so it is built
only when asked for, and opens by itself when a replay stored something to compare).
"""
import json

import streamlit as st

from memorylab import MemoryLabError, compare_branches
from memorylab.llm.replay import ReplayJob, describe_totals, is_replay_of, replay_mark

from .escaping import escape_markdown
from .job_progress import job_progress
from .models import completion_settings
from .selection import branch_key, select_leaf

COMPARISON_OPEN = "replay_compare_open"
PICKER_LEAVES = 200
"""Leaves the comparison picker lists, newest first (with the one chosen)."""
SHOWN_COLUMNS = {
    "turn": st.column_config.NumberColumn("#", width="small"),
    "user": st.column_config.TextColumn("User", width="small"),
    "answer_a": st.column_config.TextColumn("A: answer", width="medium"),
    "answer_b": st.column_config.TextColumn("B: answer", width="medium"),
    "output_tokens_a": st.column_config.NumberColumn("A: tokens out", width="small"),
    "output_tokens_b": st.column_config.NumberColumn("B: tokens out", width="small"),
    "cost_a": st.column_config.NumberColumn("A: cost ($)", format="%.6f", width="small"),
    "cost_b": st.column_config.NumberColumn("B: cost ($)", format="%.6f", width="small"),
}
"""Both answers side by side within a wide page's main area (about 900 pixels beside the sidebar):
the answers medium, the rest small, so none is pushed off-screen; the table stretches them to fill the row,
and a cell's whole text shows on hover."""


def render_replay(session, leaf_id, *, long_term=None):
    """The panel for the branch ending at ``leaf_id``: the replay form (or the running replay's
    progress), then the comparison. ``long_term`` is the Chat page's long-term memory, recalled by the
    replayed turns (nothing is extracted from them)."""
    st.subheader("Replay this branch with…")
    if not _job_outcome():
        _replay_form(session, leaf_id, long_term)
    _comparison(session, leaf_id)


def _job_outcome():
    """The running replay's progress (True while it runs); once it ended, what came of it, shown once."""
    job = st.session_state.get("replay_job")
    if job is None:
        return False
    if job.running:
        job_progress(job, lambda job: f"Replaying turn {min(job.done + 1, job.total)} of {job.total} with "
                              f"`{escape_markdown(job.model)}`", cancel_key="replay_cancel",
                     cancel_label="Cancel the replay",
                     cancel_help="Stops after the turn being answered; the answers stored so far stay on the replay "
                                 "branch.")
        return True
    del st.session_state["replay_job"]
    result = job.result
    if job.error:
        st.error(f"The replay stopped: {job.error}")
        return False
    if result.error:
        st.warning(f"Turn {result.answered + 1} of {result.total} failed, so the replay stopped: {result.error}. "
                   f"The {result.answered} answers before it are kept on the replay branch.")
    elif result.cancelled:
        st.warning(f"Cancelled: {result.answered} of {result.total} turns were replayed and are kept.")
    else:
        st.success(f"Replayed {result.total} turns with `{escape_markdown(job.model)}` in {job.elapsed:.1f} s: "
                   "the comparison below shows the new branch.")
    if result.leaf_id:
        st.session_state[_compare_key(job.session_id, job.source_leaf_id)] = result.leaf_id
        st.session_state[COMPARISON_OPEN] = True
    return False


def _replay_form(session, leaf_id, long_term):
    with st.form("replay_form"):
        model_column, temperature_column = st.columns([3, 1])
        model = model_column.text_input(
            "Model", value=st.session_state.get("model") or "",
            help="Any litellm model string; empty: the model picked in the sidebar. Keys come from the environment.")
        temperature = temperature_column.number_input(
            "Temperature", min_value=0.0, max_value=2.0, value=None, step=0.1, placeholder="as set",
            help="Empty: the completion arguments decide (the sidebar's, then the ones below).")
        extra = st.text_area("Other completion arguments (JSON)", "{}",
                             help='Merged over the sidebar\'s, e.g. {"max_tokens": 256}. Never put keys here.')
        start = st.form_submit_button("Start the replay", type="primary",
                                      help="Every user turn of this branch is asked again; the answers are stored "
                                           "as a new branch beside this one.")
    if start:
        _start(session, leaf_id, long_term, model.strip() or None, _arguments(extra, temperature))


def _arguments(raw, temperature):
    """The form's completion arguments, or None (after saying why) when the JSON is no object."""
    try:
        arguments = json.loads(raw or "{}")
    except ValueError as error:
        st.error(f"Not started: the completion arguments are not JSON ({error}).")
        return None
    if not isinstance(arguments, dict):
        st.error('Not started: the completion arguments must be a JSON object, such as {"max_tokens": 256}.')
        return None
    return arguments if temperature is None else {**arguments, "temperature": temperature}


def _start(session, leaf_id, long_term, model, arguments):
    if arguments is None:
        return
    from memorylab.llm.chat import ChatRunner  # the model layer loads when a replay starts

    try:
        runner = ChatRunner(session, model=st.session_state.get("model"), long_term=long_term,
                            **completion_settings())
        st.session_state["replay_job"] = ReplayJob(runner, leaf_id, model=model, **arguments).start()
    except MemoryLabError as error:
        st.error(f"Not started: {error}")
        return
    select_leaf(leaf_id)  # the chat stays on this branch, not on the newest leaf the replay writes
    st.rerun()


# -- the comparison ------------------------------------------------------------------------------


def _compare_key(session_id, leaf_id):
    return f"replay_compare:{session_id}:{leaf_id}"


@st.cache_resource(max_entries=8, show_spinner=False)
def _leaves(key, _session):
    """The session's leaves, newest first, read once per version of the session (``branch_key``)."""
    return _session.get_leaves()


@st.cache_resource(max_entries=16, show_spinner="Lining up the two branches…")
def _compared(key_a, key_b, _session, _leaf_a, _leaf_b):
    return compare_branches(_session, _leaf_a, _leaf_b)


def _default_other(leaf, leaf_id, others):
    """What the active branch is compared with at first: the branch it replays, else its newest
    replay, else the newest other branch."""
    source = (replay_mark(leaf) or {}).get("source_leaf") if leaf else None
    if source in others:
        return source
    return next((other for other, message in others.items() if is_replay_of(message, leaf_id)), next(iter(others)))


def _describe(leaf, leaf_id):
    mark = replay_mark(leaf) or {}
    model = mark.get("model") or (leaf.get("metadata") or {}).get("model")
    origin = (" · replay of this branch" if mark.get("source_leaf") == leaf_id
              else " · a replay" if mark else "")
    return f"{leaf['id']} · {leaf['role']}{f' · {model}' if model else ''}{origin} · {leaf['created_at'][:16]}"


def _comparison(session, leaf_id):
    try:
        leaves = _leaves(branch_key(session, None), session)
    except MemoryLabError as error:
        st.error(f"Cannot list the branches to compare: {error}")
        return
    key = _compare_key(session.session_id, leaf_id)
    others = {leaf["id"]: leaf for leaf in leaves if leaf["id"] != leaf_id}
    if not others:
        st.caption("This session has a single branch: replay it to get another one to compare it with.")
        return
    panel = st.expander(f"Compare this branch with another, answer by answer ({len(others):,} other "
                        f"{'branch' if len(others) == 1 else 'branches'})", key=COMPARISON_OPEN, on_change="rerun")
    if panel.open:
        with panel:
            _compare_with(session, leaf_id, leaves, others, key)


def _compare_with(session, leaf_id, leaves, others, key):
    """The comparison's picker, the two branches side by side, and the button that opens B."""
    if st.session_state.get(key) not in others:
        active = next((leaf for leaf in leaves if leaf["id"] == leaf_id), None)
        st.session_state[key] = _default_other(active, leaf_id, others)
    shown = dict(list(others.items())[:PICKER_LEAVES])
    shown.setdefault(st.session_state[key], others[st.session_state[key]])
    other = st.selectbox("Compare this branch (A) with (B)", list(shown), key=key,
                         format_func=lambda leaf: _describe(shown[leaf], leaf_id),
                         help=f"Every leaf of the session, newest first ({min(len(others), PICKER_LEAVES)} "
                              f"of {len(others)} listed); a replay is marked with its model.")
    try:
        comparison = _compared(branch_key(session, leaf_id), branch_key(session, other), session, leaf_id, other)
    except MemoryLabError as error:
        st.error(f"Cannot compare these branches: {error}")
        return
    _side_by_side(comparison)
    if st.button("Open branch B in the chat", key="replay_open", icon="🌿",
                 help="Make B the active branch; this panel then compares it with the others."):
        select_leaf(other)
        st.rerun()


def _side_by_side(comparison):
    column_a, column_b = st.columns(2)
    for column, side, leaf in ((column_a, "a", comparison.leaf_a), (column_b, "b", comparison.leaf_b)):
        column.markdown(f"**{side.upper()}** · `{leaf}`")
        column.caption(describe_totals(comparison.totals[side]))
    if not comparison.rows:
        st.info("Neither branch has a user message yet.")
        return
    st.dataframe(comparison.frame()[list(SHOWN_COLUMNS)], column_config=SHOWN_COLUMNS, hide_index=True,
                 width="stretch")
