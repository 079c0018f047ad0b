# Tree: every branch of the session as a chart (collapsed runs open on a click, compaction bands audit
# what their summary dropped), tool-pair problems, pins, the active branch and its path.
#
# State: ``leaf_id`` (the active branch, lab_ui/selection.py); ``tree_open_runs`` (the runs drawn
# opened) and ``tree_focus`` (where the chart opens); ``tree_clicks`` (a fresh chart key per handled
# click); ``tree_band`` and ``tree_overlay`` (the band whose audit is shown, the second set by a click
# or another page); ``tree_message`` (a message opened from the audit, ringed); ``tree_path_rows``
# (rows of the active path shown); ``tree_pins_table`` and ``tree_pin_note`` (the pins' table and form).
import pandas as pd
import streamlit as st

from lab_ui.audit_panel import dropped_panel, session_audits
from lab_ui.experiment_from_here import add_branch_button
from lab_ui.live import live_updates
from lab_ui.pin_manager import pin_manager
from lab_ui.selection import active_leaf, branch_key, select_leaf
from lab_ui.sidebar import session_page
from memorylab import DamagedRowError
from memorylab.display.frames import to_dataframe
from memorylab.display.treeview import SessionTree, preview
from memorylab.display.viz import VIEW_COLUMNS, tree_layout_figure
from memorylab.history.overlays import SUMMARY_ID_PREFIX, is_summary_message
from memorylab.shapes import Messages

PATH_PAGE = 50  # rows of the active path shown at first, and added by each "Show earlier" click


@st.cache_resource(max_entries=4, show_spinner="Reading the session's tree…")
def session_tree(key, _session):
    """The session's messages indexed once per version of the session (``branch_key`` without a leaf)
    and shared by every rerun: read-only."""
    return SessionTree.of(_session)


@st.cache_resource(max_entries=4, show_spinner="Checking tool calls and results…")
def tool_pair_findings(key, _tree, _overlays):
    """The tool-pair lint of the tree already read, once per version of the session: read-only."""
    return _tree.tool_pair_findings(_overlays)


@st.cache_resource(max_entries=16, show_spinner=False)
def tree_view(key, _tree, leaf_id, overlays, opened, focus, flagged, ringed):
    """(layout, figure, overlaid history) of one way of looking at the tree: read-only, shared."""
    layout = _tree.layout(overlays, active_leaf=leaf_id, opened=opened)
    figure = tree_layout_figure(layout, focus=focus, flagged=flagged, opened=ringed)
    return layout, figure, _tree.history(leaf_id, overlays)


@st.cache_resource(max_entries=16, show_spinner=False)
def shown_messages(key, leaf_id, shown, _session, _outlined):
    """The stored messages of the path rows on show (the tree holds outlines: no tool inputs), read
    once per version of the branch and rows shown; a summary, or a row that cannot be read in full,
    shows as outlined."""
    return [message if is_summary_message(message) else stored_or(_session, message) for message in _outlined]


def stored_or(session, outlined):
    try:
        return session.get_message(outlined["id"]) or outlined
    except DamagedRowError:
        return outlined


def choose_leaf(leaf_id):
    select_leaf(leaf_id)
    st.session_state.pop("tree_focus", None)
    st.rerun()


def focus_on_opened_run():
    """A run just picked in "Opened runs" is where the chart opens."""
    opened = st.session_state["tree_open_runs"]
    st.session_state["tree_focus"] = opened[-1] if opened else None


def opened_message(tree):
    """The message a lost artifact of the audit was opened on (``tree_message``), with its text."""
    message = tree.messages.get(st.session_state.get("tree_message"))
    if message is None:
        return
    with st.container(border=True):
        text, close = st.columns([6, 1], vertical_alignment="center")
        text.markdown(f"**Opened from the audit:** message `{message['id']}` ({message['role']}), ringed on the "
                      "tree below: a message of the span the audited summary replaced.")
        text.text(preview(message, 600))  # user content: plain text
        if close.button("Close", key="tree_message_close"):
            st.session_state.pop("tree_message", None)
            st.rerun()


def band_audit(session, overlays):
    """Pick a compaction band (or click a summary's label on the chart: ``tree_overlay``) and see what
    its summary dropped. The pick is the widget ``tree_band``, reset when it names no overlay here."""
    ids = [overlay["id"] for overlay in overlays]
    asked = st.session_state.pop("tree_overlay", st.session_state.get("tree_band"))
    st.session_state["tree_band"] = asked if asked in ids else None
    spans = {overlay["id"]: f"summary {overlay['id']} · {overlay['from_id']} … {overlay['to_id']}"
             for overlay in overlays}
    chosen = st.selectbox("Compaction band: what did its summary drop?", ids, key="tree_band", format_func=spans.get,
                          placeholder="Pick a band, or click a summary's label on the tree")
    if chosen is not None:
        with st.container(border=True):
            dropped_panel(session_audits(session)[chosen], session, "tree_lost")


def render_metrics(tree, layout, history, leaves):
    left, middle, right, far = st.columns(4)
    left.metric("Messages", f"{len(tree):,}")
    middle.metric("Branches", len(leaves))
    right.metric("Active path", f"{len(layout.active_path):,} msgs")
    far.metric("History tokens", f"{sum(m['tokens'] for m in history):,}",
               help="Estimated tokens of the active path as sent: overlays applied, stored estimates summed")


def render_chart(layout, figure, opened):
    """The tree chart; a click on a node makes its branch active, on a run opens it, on a band's
    label shows its audit."""
    st.caption("Click a node to make its branch active on every page; click a square (a collapsed run of messages) "
               "to open it. Diamonds are branch points, purple bands are compaction summaries (hover for the text, "
               "click a band's label to see what its summary dropped), 📌 marks a pinned message."
               + (" Drag or use the slider below the tree to move along it, scroll to zoom."
                  if layout.width > VIEW_COLUMNS else ""))
    # A fresh chart key after each handled click: the old selection must not fire again on the next rerun.
    clicks = st.session_state.setdefault("tree_clicks", 0)
    opened_message(tree)
    event = st.plotly_chart(figure, on_select="rerun", selection_mode="points", key=f"tree_chart_{clicks}",
                            width="stretch", config={"scrollZoom": True, "displaylogo": False})
    points = (event or {}).get("selection", {}).get("points", []) if event else []
    picked = str(points[0].get("customdata")) if points else ""
    clicked = layout.nodes.get(picked)
    if clicked is None and picked.startswith(SUMMARY_ID_PREFIX):  # a band's label: its audit below
        st.session_state["tree_clicks"] = clicks + 1
        st.session_state["tree_overlay"] = int(picked.removeprefix(SUMMARY_ID_PREFIX))
        st.rerun()
    if clicked is not None:
        st.session_state["tree_clicks"] = clicks + 1
        if clicked.is_group:
            st.session_state["tree_open_runs"] = [*opened, clicked.run]
            st.session_state["tree_focus"] = clicked.run
            st.rerun()
        if clicked.id != leaf_id:
            choose_leaf(clicked.id)


def render_tool_pairs(findings):
    with st.expander(f"Tool-pair problems ({len(findings)}): nodes outlined in red", expanded=True):
        st.caption("A provider refuses a request whose history holds one of these; fix the named message, or chat "
                   "with repair_tool_pairs=True to send the branch repaired.")
        for number, finding in enumerate(findings):
            text, button = st.columns([5, 1])
            paths = f" · {finding.paths} paths" if finding.paths > 1 else ""
            text.markdown(f"**{finding.kind}**{paths}")
            text.text(finding.detail)  # names messages and calls as stored: shown as plain text
            if button.button("Select its branch", key=f"tool_pair_{number}", disabled=finding.leaf_id == leaf_id):
                choose_leaf(finding.leaf_id)


def render_opened_runs(layout, opened):
    st.session_state["tree_open_runs"] = [run for run in opened if run in layout.runs]
    st.multiselect(
        "Opened runs", list(layout.runs), key="tree_open_runs", on_change=focus_on_opened_run,
        format_func=lambda run: f"{layout.runs[run][0]} … {layout.runs[run][-1]} ({len(layout.runs[run])} msgs)",
        help="Long chains of single-child messages are drawn as one square. Pick one (or click it) to draw "
             "its messages; remove it to collapse it again.")


def render_branch_picker(tree, leaves):
    # Plain-string options (one per branch, named by its leaf) map back to leaf ids.
    branch_names = {f"{leaf} · {preview(tree.messages[leaf], 60)}": leaf for leaf in leaves}
    if leaf_id not in branch_names.values():  # a message inside a branch was clicked: chat continues from it
        branch_names = {f"{leaf_id} · the selected message (new turns fork here)": leaf_id, **branch_names}
    names = list(branch_names)
    current = next((i for i, name in enumerate(names) if branch_names[name] == leaf_id), 0)
    chosen = st.selectbox("Active branch (by its leaf)", names, index=current)
    if branch_names[chosen] != leaf_id:
        choose_leaf(branch_names[chosen])
    add_branch_button(session, leaf_id, "tree_add_case")


def render_path(tree, history):
    """The active path's newest rows (overlays applied), and "Show earlier"."""
    st.subheader("Active path")
    shown = st.session_state.setdefault("tree_path_rows", PATH_PAGE)
    window = shown_messages(key, leaf_id, shown, session, history[-shown:])
    path_table = to_dataframe(Messages(window))[["id", "role", "text", "tools", "tokens", "created_at"]]
    path_table["children"] = [len(tree.children.get(m["id"], ())) for m in window]
    st.dataframe(path_table, hide_index=True, width="stretch",
                 column_config={"text": st.column_config.TextColumn(width="large")})
    if len(window) < len(history):
        st.caption(f"The newest {len(window):,} of {len(history):,} messages on this path (overlays applied).")
        if st.button(f"Show {PATH_PAGE} earlier"):
            st.session_state["tree_path_rows"] = shown + PATH_PAGE
            st.rerun()


store, session = session_page("Tree")
live_updates(session)
leaf_id = active_leaf(session)
key = branch_key(session, None)
tree = session_tree(key, session)
overlays = session.get_compactions()
opened = tuple(st.session_state.get("tree_open_runs", ()))
findings = tool_pair_findings(key, tree, overlays)
flagged = frozenset(message_id for finding in findings for message_id in finding.message_ids)
layout, figure, history = tree_view(key, tree, leaf_id, overlays, opened, st.session_state.get("tree_focus"), flagged,
                                    st.session_state.get("tree_message"))
leaves = tree.leaves()

render_metrics(tree, layout, history, leaves)
render_chart(layout, figure, opened)
if overlays:
    band_audit(session, overlays)
if findings:
    render_tool_pairs(findings)
pin_manager(session, tree, leaf_id)
if layout.runs:
    render_opened_runs(layout, opened)
render_branch_picker(tree, leaves)
render_path(tree, history)
if overlays:
    st.subheader("Compaction overlays")
    st.dataframe(pd.DataFrame(overlays)[["id", "from_id", "to_id", "summary", "created_at"]], hide_index=True,
                 width="stretch")
