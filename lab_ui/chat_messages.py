"""How the Chat page draws a stored message: its parts, and the switch between its sibling branches."""
import streamlit as st

from memorylab.messages import is_tool_part

from .selection import select_leaf


def render_parts(message):
    """Text as markdown, reasoning and tool calls folded (a tool's input and output as data, not markdown)."""
    for part in message["parts"]:
        if part["type"] == "text":
            st.markdown(part["text"])
        elif part["type"] == "reasoning":
            with st.expander("Reasoning"):
                st.text(part["text"])
        elif is_tool_part(part):
            state = "✓" if "output" in part else "…"
            with st.expander(f"🔧 {part.get('toolName') or 'tool'} {state}"):
                if "input" in part:
                    st.json(part["input"], expanded=False)
                if "output" in part:
                    output = part["output"]
                    st.code(output if isinstance(output, str) else str(output), language=None, wrap_lines=True)


@st.cache_data(max_entries=32, show_spinner=False)
def sibling_ids(branch, parent_ids, _session):
    """``{parent id: its children's ids, oldest first}`` for the drawn messages, read once per branch
    version (a regeneration or an edit is a new message, so it makes a new version)."""
    return {parent_id: [m["id"] for m in _session.get_branches(parent_id)] for parent_id in parent_ids}


def branch_switcher(session, message, row, siblings):
    """Previous / branch n/m / Next between the siblings of ``message`` (regenerations and edits), in
    the horizontal container ``row``."""
    if len(siblings) < 2:
        return
    index = siblings.index(message["id"])
    if row.button("Previous", key=f"prev_{message['id']}", icon=":material/chevron_left:", disabled=index == 0):
        select_leaf(session.get_leaf_for(siblings[index - 1]))
        st.rerun()
    row.caption(f"branch {index + 1}/{len(siblings)}")
    if row.button("Next", key=f"next_{message['id']}", icon=":material/chevron_right:",
                  disabled=index == len(siblings) - 1):
        select_leaf(session.get_leaf_for(siblings[index + 1]))
        st.rerun()
