import datetime as dt
import json

import streamlit as st

from memorylab import KVStore, Memory, MemoryAdmin, MemoryLabError, StaleWriteError, identify, to_dataframe
from memorylab.memory.kv import kv_namespaces
from memorylab.store.compare_and_set import MISSING
from pages.common import (changed_since_loaded, completion_settings, guarded_save, link_to, loaded_version,
                          rebase_editor, reload_editor, select_session, selected_rows, setup_page, table_key)

MEMORY_TABLE = {
    "id": st.column_config.TextColumn("memory key"), "entity_type": "entity", "entity_value": "value",
    "updated_at": st.column_config.DatetimeColumn("updated"), "message_count": "messages",
    "last_role": "spoke last", "last_message": st.column_config.TextColumn("last message", max_chars=120),
    "summary": st.column_config.TextColumn(max_chars=120),
}
AGENT_CHOICES = 100  # agents the picker offers, busiest first; the admin tab reaches any other by id
KV_PAGE = 100
NEW_ENTRY = "(a new key)"

store, session = setup_page("Sessions and memory")
st.title("Sessions and memory")
st.caption("The memory manager's view: one memory per person or channel (a memory key is a session), "
           "with statuses and summaries; the KV store beside it; and admin access across agents.")

tenants = sorted(set(store.agents.tenants()) | {"default"})
tenant = st.selectbox("Tenant", tenants, index=tenants.index("default"), key="memory_tenant")
admin = MemoryAdmin(store, tenant_id=tenant)
# The busiest agent first: it shows the most of what the manager keeps.
agents = admin.agents(busiest_first=True, limit=AGENT_CHOICES)
memories_tab, kv_tab, admin_tab, identity_tab = st.tabs(["Memories", "KV store", "Cross-agent admin", "Identify"])

with memories_tab:
    if not agents:
        st.info("This tenant has no agents yet: an agent exists once a Memory or Session used its id.")
    else:
        agent_names = {f"{a['agent_id']}" + (f" ({a['name']})" if a.get("name") else "") + f" · {a['session_count']} memories": a["agent_id"]
                       for a in agents}
        agent_count = admin.agent_count()
        agent_id = agent_names[st.selectbox(
            "Agent", list(agent_names), key="memory_agent",
            help=None if agent_count <= AGENT_CHOICES else
            f"The {AGENT_CHOICES} busiest of {agent_count:,} agents; reach any other in Cross-agent admin.")]
        memory = Memory(store, agent_id=agent_id, tenant_id=tenant)
        filters = st.columns(4)
        inactive = filters[0].checkbox("Inactive since…", key="memory_inactive")
        since = filters[0].date_input("No message after", dt.date.today() - dt.timedelta(days=7),
                                      disabled=not inactive, key="memory_since")
        status = filters[1].text_input("Status", placeholder="any; in_progress; qualified…", key="memory_status")
        limit = filters[2].number_input("Limit", 1, 100, 20, key="memory_limit")
        offset = filters[3].number_input("Offset", 0, 10_000, 0, key="memory_offset")
        try:
            rows = memory.list(last_interaction_before=dt.datetime.combine(since, dt.time()) if inactive else None,
                               status=status.strip() or None, limit=int(limit), offset=int(offset))
        except MemoryLabError as error:
            st.error(str(error))
            rows = []
        table = to_dataframe(rows).fillna({"status": "in progress"})
        event = st.dataframe(table, hide_index=True, width="stretch", on_select="rerun",
                             selection_mode="single-row", key=table_key("memory_table", [r["id"] for r in rows]),
                             column_config=MEMORY_TABLE)
        chosen = next(iter(selected_rows(event, rows)), None)
        if chosen:
            key = chosen["id"]
            st.markdown(f"**{key}**")
            actions = st.columns([2, 1, 1])
            base = loaded_version("memory_status", (tenant, agent_id, key), chosen["status"],
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
                select_session((tenant, agent_id, key))
                link_to("pages/tree.py", "Open the tree", "🌳")
            if st.button("Summarize with the selected model"):
                with st.spinner(f"Summarizing with {st.session_state['model']}…"):
                    try:
                        from memorylab.llm.models import make_summarizer

                        summarizer = make_summarizer(st.session_state["model"], **completion_settings())
                        Memory(store, agent_id=agent_id, tenant_id=tenant, summarizer=summarizer).summarize(key=key)
                        st.rerun()
                    except MemoryLabError as error:
                        st.error(str(error))
            st.text(memory.get_formatted(key=key))

with kv_tab:
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
    now = dt.datetime.now(dt.timezone.utc)

    def seconds_left(entry):
        left = dt.datetime.fromisoformat(entry["expires_at"].replace("Z", "+00:00")) - now
        return max(int(left.total_seconds()), 1)

    def expires_in(entry):
        return f"in {seconds_left(entry):,} s" if entry["expires_at"] else "never"

    def entry_text(value, ttl):
        """An entry as the editor shows it and a conflict compares it: its JSON, then its expiry."""
        return f"{value}\nexpires: {f'in {ttl:,} s' if ttl else 'never'}"

    def save_entry(kv, key, expected):
        """Write the form's entry if the stored one is still at ``expected`` (``MISSING``: none)."""
        return guarded_save("kv", lambda: kv.set(key, json.loads(st.session_state["kv_value"]),
                                                 ttl=int(st.session_state["kv_ttl"]) or None, expected=expected),
                            f"Saved {key}")

    def kv_editor(kv, key):
        """The entry form: a new key (refused when it exists by then) or a stored entry, loaded with
        its version so a save over someone else's newer value is refused and both are shown."""
        entry = kv.get_entry(key) if key else None
        base = loaded_version("kv", (tenant, namespace, key), entry["version"] if entry else MISSING, {
            "kv_key": key or "", "kv_ttl": seconds_left(entry) if entry and entry["expires_at"] else 0,
            "kv_value": json.dumps(entry["value"], ensure_ascii=False, indent=2) if entry else '{"example": true}'})
        with st.form("kv_edit"):
            st.text_input("Key", key="kv_key", disabled=key is not None)
            st.text_area("Value (any JSON)", height=90, key="kv_value")
            st.number_input("TTL in seconds (0 = never expires)", 0, 3_153_600_000, key="kv_ttl")
            target = key or st.session_state["kv_key"]
            refused = st.form_submit_button("Save entry", type="primary") and save_entry(kv, target, base)
        try:
            stored = kv.get_entry(target) if target else None
        except MemoryLabError:  # a key the form refused already
            return
        version = stored["version"] if stored else MISSING
        if refused or base != version:
            changed_since_loaded(
                "kv", f"Entry `{target}`", version=version,
                stored=stored and entry_text(json.dumps(stored["value"], ensure_ascii=False, indent=2),
                                             stored["expires_at"] and seconds_left(stored)),
                yours=entry_text(st.session_state["kv_value"], st.session_state["kv_ttl"]), refused=refused,
                overwrite=lambda expected: save_entry(kv, target, expected))

    columns[2].metric("Entries", f"{total:,}")
    if entries:
        table = to_dataframe(entries)
        table["value"] = [json.dumps(value, ensure_ascii=False) for value in table["value"]]
        table.insert(2, "expires", [expires_in(entry) for entry in entries])
        st.dataframe(table.drop(columns=["expires_at", "created_at"]), hide_index=True, width="stretch",
                     column_config={"updated_at": st.column_config.DatetimeColumn("updated")})
    else:
        st.info(f"No live entry in `{namespace}` matches `{pattern}`.")
    edited = st.selectbox("Add or edit an entry", [NEW_ENTRY] + [e["key"] for e in entries], key="kv_edit_key")
    if kv is not None:
        kv_editor(kv, None if edited == NEW_ENTRY else edited)
    delete_key = st.selectbox("Delete an entry", [""] + [e["key"] for e in entries], key="kv_delete_key")
    if delete_key and st.button(f"Delete {delete_key}"):
        kv.delete(delete_key)
        st.rerun()

with admin_tab:
    st.caption("Reach another agent's memory by its id, slug or name. Another tenant's agents answer "
               "exactly like missing ones: existence never leaks across tenants.")
    columns = st.columns(3)
    agent_ref = columns[0].text_input("Agent (id, slug or name)", value=agents[0]["agent_id"] if agents else "",
                                      key="admin_agent")
    action = columns[1].selectbox("Action", ["list", "get", "search", "append", "summarize"], key="admin_action")
    key = columns[2].text_input("Memory key", key="admin_key", disabled=action == "list")
    text = st.text_input("Message (append) or query (search)", key="admin_text",
                         disabled=action not in ("append", "search"))
    if st.button("Run", key="admin_run"):
        try:
            if action == "list":
                result = admin.list(agent_ref)
            elif action == "get":
                result = admin.get(agent_ref, key)
            elif action == "search":
                result = admin.search(agent_ref, key, text)
            elif action == "append":
                result = admin.append(agent_ref, key, {"role": "user", "content": text})
            else:
                from memorylab.llm.models import make_summarizer

                result = admin.summarize(agent_ref, key, summarizer=make_summarizer(
                    st.session_state["model"], **completion_settings()))
            st.json(result, expanded=2)
        except (MemoryLabError, ValueError) as error:
            st.error(f"{type(error).__name__}: {error}")

with identity_tab:
    st.caption("identify(value) picks the memory key from who is talking: email, phone (E.164 or formatted), "
               "uuid and url are recognized; anything else is an id.")
    value = st.text_input("Who is talking", value="+55 (11) 99999-9999", key="identify_value")
    if value.strip():
        try:
            with identify(value) as identity:
                st.code(identity.key, language=None)
        except MemoryLabError as error:
            st.error(str(error))
