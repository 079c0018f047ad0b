# Context blocks: what the agent carries in its system prompt, block by block (writable ones edited in
# a guarded form, searchable ones searched and added to, skills activated), their budgets, and the
# frozen prompt against a live re-render.
#
# State: ``text_<label>`` (a writable block's form, loaded as editor ``block:<label>``, see
# lab_ui/guarded_edits.py) and ``search_<label>`` (a searchable block's query).
import difflib

import pandas as pd
import streamlit as st

from lab_ui.guarded_edits import changed_since_loaded, guarded_save, loaded_version
from lab_ui.sidebar import session_page
from memorylab import MemoryLabError
from memorylab.display.viz import budget_figure

TAGS = {"readonly": "🔒 readonly", "writable": "✏️ writable", "searchable": "🔎 searchable", "skill": "📚 loadable"}


def save_block(editor, label, expected):
    """Write the form's text over the block if it is still at version ``expected`` (``guarded_save``)."""
    return guarded_save(editor, lambda: session.replace_context_block(label, st.session_state[f"text_{label}"],
                                                                      expected=expected), f"Saved {label}")


def block_editor(block):
    """A writable block's text box. It keeps the version it was loaded from, so a save over someone
    else's newer text is refused and both are shown, until the person reloads or overwrites."""
    label = block["label"]
    editor = f"block:{label}"
    base = loaded_version(editor, (session.tenant_id, session.agent_id, session.session_id),
                          block["version"], {f"text_{label}": block["content"]})
    with st.form(f"edit_{label}"):
        st.text_area("Content", height=140, key=f"text_{label}")
        refused = st.form_submit_button("Save", type="primary") and save_block(editor, label, base)
    if refused or base != block["version"]:
        changed_since_loaded(editor, f"The {label} block", stored=block["content"], version=block["version"],
                             yours=st.session_state[f"text_{label}"], refused=refused,
                             overwrite=lambda expected: save_block(editor, label, expected))


def render_searchable(block):
    label = block["label"]
    st.code(block["content"], language=None)
    query = st.text_input("Search entries", key=f"search_{label}", placeholder="e.g. refund")
    if query:
        st.code(session.search_context(label, query), language=None, wrap_lines=True)
    entries = session.get_context_entries(label)
    if not block["writable"]:
        return
    with st.expander(f"All entries ({len(entries)})"):
        st.dataframe(pd.DataFrame(entries), hide_index=True, width="stretch")
    with st.form(f"add_{label}", clear_on_submit=True):
        key = st.text_input("Key")
        content = st.text_area("Entry", height=80)
        if st.form_submit_button("Add or replace entry"):
            try:
                session.set_context_entry(label, key, content)
                st.toast(f"Stored {key}")
                st.rerun()
            except MemoryLabError as error:
                st.error(f"Not stored: {error}")


def render_skills(label):
    for skill in session.get_skill_catalog(label):
        key = skill["key"]
        name, toggle = st.columns([4, 1])
        name.markdown(f"`{key}`{' · **active**' if skill['active'] else ''}")
        name.caption(skill["description"])
        if skill["active"]:
            if toggle.button("Deactivate", key=f"off_{label}_{key}"):
                session.deactivate_skill(label, key)
                st.rerun()
        elif toggle.button("Activate", key=f"on_{label}_{key}"):
            with st.expander(f"{key}: the body the model receives", expanded=True):
                st.markdown(session.activate_skill(label, key))


def render_block(block):
    """One block: its kind, description and budget, then what its kind lets the person do."""
    with st.container(border=True):
        st.markdown(f"**{block['label'].upper()}** · {TAGS[block['kind']]}")
        if block["description"]:
            st.caption(block["description"])
        if block["max_tokens"]:
            share = block["tokens"] / block["max_tokens"]
            st.progress(min(share, 1.0), text=f"{block['tokens']:,} / {block['max_tokens']:,} tokens ({share:.0%})")
        if block["kind"] == "writable":
            block_editor(block)
        elif block["kind"] == "readonly":
            st.code(block["content"] or "(empty: left out of the prompt)", language=None, wrap_lines=True)
        elif block["kind"] == "searchable":
            render_searchable(block)
        else:
            render_skills(block["label"])


def render_prompt(blocks):
    """The budgets, and the frozen prompt against the blocks as they are now, with Refresh."""
    st.subheader("Budgets")
    st.plotly_chart(budget_figure(blocks), width="stretch", config={"displayModeBar": False})
    frozen = session.freeze_system_prompt()
    live = session.render_system_prompt()
    st.subheader("System prompt")
    if st.button("Refresh system prompt", type="primary", disabled=frozen == live,
                 help="Re-render the frozen prompt from the blocks as they are now (do this between turns)."):
        session.refresh_system_prompt()
        st.rerun()
    if frozen == live:
        st.success("The frozen prompt matches the blocks.")
    else:
        st.warning("Blocks changed since the prompt was frozen. The model still sees the frozen prompt.")
        diff = "\n".join(difflib.unified_diff(frozen.splitlines(), live.splitlines(), "frozen", "live", lineterm=""))
        st.code(diff, language="diff")
    frozen_tab, live_tab = st.tabs(["Frozen (sent to the model)", "Live re-render"])
    frozen_tab.code(frozen, language=None)
    live_tab.code(live, language=None)


store, session = session_page(
    "Context blocks",
    "What the agent carries in its system prompt. Writes are stored at once; the frozen prompt "
    "the model sees changes only when it is refreshed, between turns.",
)
blocks = session.get_context_blocks()
left, right = st.columns([3, 2], gap="large")
with left:
    for block in blocks:
        render_block(block)
with right:
    render_prompt(blocks)
