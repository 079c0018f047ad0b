# Long-term memory: durable records extracted from turns (global ones shared by every session of the
# workspace, session ones seen only by their own session), a retrieval run step by step, and adding a
# record by hand.
#
# State: ``ltm_workspace``; the records tab's ``ltm_scope``, ``ltm_session``, ``ltm_table`` (the record
# selected) and its form (``ltm_summary``, ``ltm_tags``, ``ltm_importance``, loaded as editor
# ``ltm_record``); the retrieval tab's ``ltm_prompt``, ``ltm_target``, ``ltm_use_model`` and
# ``ltm_result`` (the last run's result); the add tab's ``ltm_new_session``.
import json

import streamlit as st

from lab_ui.deep_links import stop_showing_view
from lab_ui.escaping import escape_markdown
from lab_ui.guarded_edits import changed_since_loaded, guarded_save, loaded_version
from lab_ui.models import completion_settings
from lab_ui.navigation import open_message
from lab_ui.sidebar import PICKER_SIZE, setup_page
from lab_ui.tables import selected_rows, table_key
from memorylab import MemoryLabError, Session, to_dataframe
from memorylab.memory.longterm import LongTermMemory
from memorylab.samples import LONGTERM_WORKSPACE


def session_choice(label, key):
    """A session id from the newest ``PICKER_SIZE`` sessions whose id or title holds what is typed
    beside it (searched in SQL), the session selected in the sidebar first."""
    left, right = st.columns(2)
    search = left.text_input(f"Find a session ({label.lower()})", key=f"{key}_search", placeholder="id or title")
    ids = [row["session_id"] for row in store.sessions.list(search=search.strip() or None, limit=PICKER_SIZE)]
    if session is not None and not search.strip():
        ids = [session.session_id] + [i for i in ids if i != session.session_id]
    return right.selectbox(label, ids, key=key)


def record_text(summary, tags, importance):
    """A record's editable fields as the conflict view compares them."""
    return f"summary: {summary}\ntags: {tags}\nimportance: {importance:.2f}"


def save_record(record_id, expected):
    """Write the form's fields if the record is still at version ``expected`` (``guarded_save``)."""
    return guarded_save("ltm_record", lambda: viewer.update_record(
        record_id, expected=expected, summary=st.session_state["ltm_summary"], tags=st.session_state["ltm_tags"],
        importance=st.session_state["ltm_importance"]), f"Saved record {record_id}")


def record_editor(record):
    """The selected record's form, loaded with its version: a save over someone else's newer edit is
    refused and both are shown, until the person reloads or overwrites."""
    base = loaded_version("ltm_record", (workspace, record["id"]), record["version"], {
        "ltm_summary": record["summary"], "ltm_tags": ", ".join(record["tags"]),
        "ltm_importance": float(record["importance"])})
    with st.form("ltm_edit"):
        st.text_input("Summary", key="ltm_summary")
        st.text_input("Tags (comma-separated)", key="ltm_tags")
        st.slider("Importance", 0.0, 1.0, key="ltm_importance")
        save, delete = st.columns(2)
        refused = save.form_submit_button("Save changes", type="primary") and save_record(record["id"], base)
        if delete.form_submit_button("Delete record"):
            viewer.delete_record(record["id"])
            st.rerun()
    if refused or base != record["version"]:
        changed_since_loaded(
            "ltm_record", f"Record {record['id']}", version=record["version"],
            stored=record_text(record["summary"], ", ".join(record["tags"]), record["importance"]),
            yours=record_text(st.session_state["ltm_summary"], st.session_state["ltm_tags"],
                              st.session_state["ltm_importance"]),
            refused=refused, overwrite=lambda expected: save_record(record["id"], expected))


def render_records():
    filters = st.columns(2)
    scope = filters[0].selectbox("Scope", ["all", "GLOBAL_MEMORY", "SESSION_MEMORY"], key="ltm_scope")
    sessions = sorted({r["session_id"] for r in viewer.records() if r["session_id"]})
    only_session = filters[1].selectbox("Session", ["all"] + sessions, key="ltm_session")
    records = viewer.records(scope=None if scope == "all" else scope,
                             session_id=None if only_session == "all" else only_session)
    if not records:
        st.info("No records here yet. They appear after chat turns when the chat uses long-term memory, "
                "or add one by hand.")
    table = to_dataframe(records).fillna({"session_id": ""})  # a global record belongs to no session
    table["provenance"] = [", ".join(p.get("message_ids", [])) or p.get("source", "") for p in table["provenance"]]
    listed = table_key("ltm_table", [record["id"] for record in records])
    event = st.dataframe(
        table.drop(columns=["body", "created_at"]), hide_index=True, width="stretch", on_select="rerun",
        selection_mode="single-row", key=listed, column_config={
            "session_id": "session", "tags": st.column_config.ListColumn("tags"),
            "importance": st.column_config.ProgressColumn(min_value=0, max_value=1, format="%.2f"),
            "provenance": "source", "updated_at": st.column_config.DatetimeColumn("updated")})
    chosen = next(iter(selected_rows(event, records)), None)
    if chosen:
        st.markdown(f"**Record {chosen['id']}** · {chosen['scope']}")
        st.json({"body": chosen["body"], "provenance": chosen["provenance"], "vector_index": chosen["vector_index"]},
                expanded=False)
        message_ids = chosen["provenance"].get("message_ids") or []
        if chosen["session_id"] and message_ids:
            source = store.sessions.list(session_id=chosen["session_id"], limit=1)
            if source and st.button(f"Open the source message {message_ids[0]} in the tree"):
                ref = (source[0]["tenant_id"], source[0]["agent_id"], chosen["session_id"])
                open_message(ref, message_ids[0], Session.open(store, ref[2], tenant_id=ref[0], agent_id=ref[1]))
        record_editor(chosen)


def render_retrieval():
    prompt = st.text_area("Prompt", "Where is my refund for A-4471, and how will you contact me?", height=80,
                          key="ltm_prompt")
    target = session_choice("As session", "ltm_target")
    use_model = st.checkbox(f"Plan and rerank with the model ({st.session_state['model']})", key="ltm_use_model",
                            help="Off: the prompt is the query and candidates keep their keyword order.")
    if st.button("Run prepare_request", type="primary"):
        with st.status("Planning, finding candidates, reranking…", expanded=False) as status:
            try:
                runner = LongTermMemory(
                    store, workspace=workspace, model=st.session_state["model"] if use_model else None,
                    settings={"model_kwargs": completion_settings()} if use_model else None)
                st.session_state["ltm_result"] = runner.prepare_request(target, prompt)
                status.update(label="Done", state="complete")
            except MemoryLabError as error:
                status.update(label="Failed", state="error")
                st.error(str(error))
    result = st.session_state.get("ltm_result")
    if result:
        diagnostics = result["diagnostics"]
        plan = diagnostics.get("plan", {})
        st.markdown(f"**Plan** ({plan.get('source', '')}): query `{escape_markdown(str(plan.get('query', '')))}`, "
                    f"tags {plan.get('tags') or 'none'}")
        for scope_name, report in diagnostics.get("scopes", {}).items():
            with st.container(border=True):
                st.markdown(f"**{scope_name}** · candidates from {report.get('candidate_source', '—')} · "
                            f"rerank {report.get('rerank', {}).get('status', '—')}")
                st.json(report, expanded=False)
        st.subheader("Injected into the system prompt")
        st.code(result["rendered"] or "(nothing)", language=None, wrap_lines=True)
        events = diagnostics.get("events", [])
        if events:
            st.dataframe(to_dataframe([{"code": e.get("code"), "details": json.dumps(
                {k: v for k, v in e.items() if k != "code"}, ensure_ascii=False)} for e in events]),
                hide_index=True, width="stretch")
        with st.expander("All diagnostics"):
            st.json(diagnostics)


def render_add():
    new_session = session_choice("Session (for SESSION_MEMORY)", "ltm_new_session")
    with st.form("ltm_add", clear_on_submit=True):
        summary = st.text_input("Summary")
        columns = st.columns(2)
        new_scope = columns[0].selectbox("Scope", ["GLOBAL_MEMORY", "SESSION_MEMORY"])
        importance = columns[1].slider("Importance", 0.0, 1.0, 0.5)
        tags = st.text_input("Tags (comma-separated)")
        if st.form_submit_button("Add record", type="primary"):
            try:
                viewer.add_record(summary, scope=new_scope, tags=tags, importance=importance,
                                  session_id=new_session if new_scope == "SESSION_MEMORY" else None)
                st.toast("Record added")
            except MemoryLabError as error:
                st.error(str(error))


store, session = setup_page("Long-term memory")
st.title("Long-term memory")
st.caption("Durable records extracted from turns: global ones shared by every session of the workspace, "
           "session ones seen only by their own session. Retrieval plans a query, finds keyword "
           "candidates per scope, reranks them and fits them into a character budget.")

workspace = st.text_input("Workspace", LONGTERM_WORKSPACE, key="ltm_workspace")
try:
    viewer = LongTermMemory(store, workspace=workspace)
except MemoryLabError as error:
    st.error(str(error))
    stop_showing_view()
records_tab, retrieval_tab, add_tab = st.tabs(["Records", "Retrieval run", "Add a record"])
with records_tab:
    render_records()
with retrieval_tab:
    render_retrieval()
with add_tab:
    render_add()
