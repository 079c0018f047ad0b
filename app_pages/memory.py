# Memory manager: one memory per person or channel, with statuses and
# summaries), the KV store beside it, cross-agent admin, and identify().
#
# State: ``memory_tenant``, ``memory_agent`` and the memory filters (``memory_inactive``, ``memory_since``,
# ``memory_status``, ``memory_limit``, ``memory_offset``); ``memory_table`` (the memory selected) and
# ``memory_new_status`` (its status form, loaded as ``memory_status``); the KV tab's ``kv_namespace``,
# ``kv_pattern``, ``kv_offset``, ``kv_edit_key``, ``kv_delete_key`` and its form (lab_ui/kv_editor.py);
# the admin tab's ``admin_agent``, ``admin_action``, ``admin_key`` and ``admin_text``.
import datetime as dt

import streamlit as st

from lab_ui.guarded_edits import loaded_version, rebase_editor, reload_editor
from lab_ui.kv_editor import entries_table, kv_editor
from lab_ui.models import sidebar_summarizer
from lab_ui.navigation import link_to
from lab_ui.selection import select_session
from lab_ui.sidebar import setup_page
from lab_ui.tables import selected_rows, table_key
from memorylab import KVStore, Memory, MemoryAdmin, MemoryLabError, StaleWriteError, identify, to_dataframe
from memorylab.memory.admin import ACTIONS
from memorylab.memory.kv import kv_namespaces

MEMORY_TABLE = {
    "id": st.column_config.TextColumn("memory key"), "entity_type": "entity", "entity_value": "value",
    "updated_at": st.column_config.DatetimeColumn("updated"), "message_count": "messages",
    "last_role": "spoke last", "last_message": st.column_config.TextColumn("last message", max_chars=120),
    "summary": st.column_config.TextColumn(max_chars=120),
}
AGENT_CHOICES = 100  # agents the picker offers, busiest first; the admin tab reaches any other by id
KV_PAGE = 100
NEW_ENTRY = "(a new key)"


def pick_agent(admin, agents):
    names = {f"{a['agent_id']}" + (f" ({a['name']})" if a.get("name") else "") + f" · {a['session_count']} memories":
             a["agent_id"] for a in agents}
    count = admin.agent_count()
    crowded = (f"The {AGENT_CHOICES} busiest of {count:,} agents; reach any other in Cross-agent admin."
               if count > AGENT_CHOICES else None)
    return names[st.selectbox("Agent", list(names), key="memory_agent", help=crowded)]


def listed_memories(memory):
    """The agent's memories as the filters above the table ask."""
    filters = st.columns(4)
    inactive = filters[0].checkbox("Inactive since…", key="memory_inactive")
    since = filters[0].date_input("No message after", dt.date.today() - dt.timedelta(days=7),
                                  disabled=not inactive, key="memory_since")
    status = filters[1].text_input("Status", placeholder="any; in_progress; qualified…", key="memory_status")
    limit = filters[2].number_input("Limit", 1, 100, 20, key="memory_limit")
    offset = filters[3].number_input("Offset", 0, 10_000, 0, key="memory_offset")
    try:
        return memory.list(last_interaction_before=dt.datetime.combine(since, dt.time()) if inactive else None,
                           status=status.strip() or None, limit=int(limit), offset=int(offset))
    except MemoryLabError as error:
        st.error(str(error))
        return []


def render_memory(memory, chosen):
    """The chosen memory: set its status (guarded), open it in the tree, summarize it, read it."""
    key = chosen["id"]
    st.markdown(f"**{key}**")
    actions = st.columns([2, 1, 1])
    base = loaded_version("memory_status", (memory.tenant_id, memory.agent_id, key), chosen["status"],
                          {"memory_new_status": chosen["status"] or ""})
    new_status = actions[0].text_input("New status", key="memory_new_status", placeholder="empty = in progress")
    if actions[1].button("Set status"):
        try:
            memory.set_status(new_status.strip() or None, key=key, expected=base)
            reload_editor("memory_status")
        except StaleWriteError as stale:
            st.error(f"Not saved: the status changed since you loaded it, from “{base or 'in progress'}” to "
                     f"“{stale.stored or 'in progress'}” (someone else set it). Set yours again to replace it.")
            rebase_editor("memory_status", stale.stored)
        except MemoryLabError as error:
            st.error(str(error))
    if actions[2].button("Open in the tree"):
        select_session((memory.tenant_id, memory.agent_id, key))
        link_to("tree", "Open the tree", "🌳")
    if st.button("Summarize with the selected model"):
        with st.spinner(f"Summarizing with {st.session_state['model']}…"):
            try:
                Memory(store, agent_id=memory.agent_id, tenant_id=memory.tenant_id,
                       summarizer=sidebar_summarizer()).summarize(key=key)
                st.rerun()
            except MemoryLabError as error:
                st.error(str(error))
    st.text(memory.get_formatted(key=key))


def render_memories(admin, agents):
    if not agents:
        st.info("This tenant has no agents yet: an agent exists once a Memory or Session used its id.")
        return
    memory = Memory(store, agent_id=pick_agent(admin, agents), tenant_id=admin.tenant_id)
    rows = listed_memories(memory)
    table = to_dataframe(rows).fillna({"status": "in progress"})
    event = st.dataframe(table, hide_index=True, width="stretch", on_select="rerun", selection_mode="single-row",
                         key=table_key("memory_table", [r["id"] for r in rows]), column_config=MEMORY_TABLE)
    chosen = next(iter(selected_rows(event, rows)), None)
    if chosen:
        render_memory(memory, chosen)


def render_kv(tenant):
    namespaces = [n["namespace"] for n in kv_namespaces(store, tenant_id=tenant)]
    columns = st.columns([2, 2, 1])
    namespace = columns[0].selectbox("Namespace", namespaces + ["(new namespace)"], key="kv_namespace")
    if namespace == "(new namespace)":
        namespace = columns[0].text_input("New namespace name", value="scratch", key="kv_new_namespace")
    pattern = columns[1].text_input("Keys matching (glob: * and ?)", value="*", key="kv_pattern")
    try:
        kv = KVStore(store, tenant_id=tenant, namespace=namespace)
        total = kv.count(pattern)
        offset = 0
        if total > KV_PAGE:
            offset = int(columns[2].number_input(f"Skip (shows {KV_PAGE} at a time)", 0, None, 0, step=KV_PAGE,
                                                 key="kv_offset"))
        entries = kv.list_entries(pattern, limit=KV_PAGE, offset=offset)
    except MemoryLabError as error:
        st.error(str(error))
        kv, total, entries = None, 0, []
    columns[2].metric("Entries", f"{total:,}")
    if entries:
        entries_table(kv, entries)
    else:
        st.info(f"No live entry in `{namespace}` matches `{pattern}`.")
    edited = st.selectbox("Add or edit an entry", [NEW_ENTRY] + [e["key"] for e in entries], key="kv_edit_key")
    if kv is not None:
        kv_editor(kv, None if edited == NEW_ENTRY else edited)
    delete_key = st.selectbox("Delete an entry", [""] + [e["key"] for e in entries], key="kv_delete_key")
    if delete_key and st.button(f"Delete {delete_key}"):
        kv.delete(delete_key)
        st.rerun()


def render_admin(admin, agents):
    st.caption("Reach another agent's memory by its id, slug or name. Another tenant's agents answer "
               "exactly like missing ones: existence never leaks across tenants.")
    columns = st.columns(3)
    agent_ref = columns[0].text_input("Agent (id, slug or name)", value=agents[0]["agent_id"] if agents else "",
                                      key="admin_agent")
    action = columns[1].selectbox("Action", list(ACTIONS), key="admin_action")
    key = columns[2].text_input("Memory key", key="admin_key", disabled=action == "list")
    text = st.text_input("Message (append) or query (search)", key="admin_text",
                         disabled=action not in ("append", "search"))
    if st.button("Run", key="admin_run"):
        try:
            st.json(admin.perform(action, agent_ref, key, text, summarizer=sidebar_summarizer()), expanded=2)
        except (MemoryLabError, ValueError) as error:
            st.error(f"{type(error).__name__}: {error}")


def render_identify():
    st.caption("identify(value) picks the memory key from who is talking: email, phone (E.164 or formatted), "
               "uuid and url are recognized; anything else is an id.")
    value = st.text_input("Who is talking", value="+55 (11) 99999-9999", key="identify_value")
    if value.strip():
        try:
            with identify(value) as identity:
                st.code(identity.key, language=None)
        except MemoryLabError as error:
            st.error(str(error))


store, session = setup_page("Memory manager")
st.title("Memory manager")
st.caption("The memory manager's view: one memory per person or channel (a memory key is a session), "
           "with statuses and summaries; the KV store beside it; and admin access across agents.")
tenants = sorted(set(store.agents.tenants()) | {"default"})
tenant = st.selectbox("Tenant", tenants, index=tenants.index("default"), key="memory_tenant")
admin = MemoryAdmin(store, tenant_id=tenant)
agents = admin.agents(busiest_first=True, limit=AGENT_CHOICES)  # the busiest first: it shows the most
memories_tab, kv_tab, admin_tab, identity_tab = st.tabs(["Memories", "KV store", "Cross-agent admin", "Identify"])
with memories_tab:
    render_memories(admin, agents)
with kv_tab:
    render_kv(tenant)
with admin_tab:
    render_admin(admin, agents)
with identity_tab:
    render_identify()
