import sqlite3

import pytest

from memorylab import ConflictError, InvalidInputError, InvalidMessageError, NotFoundError, Session, Store
from memorylab.errors import AmbiguousAgentError, NothingToSummarizeError
from memorylab.io import import_session, read_export
from memorylab.memory.admin import MemoryAdmin, register_agent, status_tools
from memorylab.memory.identity import identify
from memorylab.memory.manager import Memory
from memorylab.samples import sample_files
from memorylab.store.ddl import SQLiteDDL
from memorylab.store.migrations import MIGRATIONS, apply_migrations

KEY = "phone:+5511999999999"


def texts(messages):
    return [m["parts"][0]["text"] for m in messages]


@pytest.fixture
def acme(store):
    """Tenant acme: agent "support-bot" (slug customer-support) with one memory, and agent "sales"."""
    Memory(store, agent_id="support-bot", tenant_id="acme").append("user", "my order is late", key=KEY)
    Memory(store, agent_id="sales", tenant_id="acme").append("user", "pricing?", key="email:ana@example.com")
    register_agent(store, "support-bot", tenant_id="acme", name="Customer Support", slug="customer-support")
    return MemoryAdmin(store, tenant_id="acme")


# -- the agents registry -----------------------------------------------------------------------------

def test_agents_register_on_first_use(store):
    Session.create(store, "s1", agent_id="planner", tenant_id="acme")
    Memory(store, agent_id="sdr", tenant_id="acme").append("user", "hi", key="k")
    import_session(store, read_export(sample_files()[0]), tenant_id="acme", agent_id="importer")
    Memory(store, agent_id="reader", tenant_id="acme").list()  # reading registers nothing
    agents = MemoryAdmin(store, tenant_id="acme").agents()
    assert [(a["agent_id"], a["session_count"]) for a in agents] == [("importer", 1), ("planner", 1), ("sdr", 1)]


def test_agents_page_in_sql_by_id_or_busiest_first(store):
    for agent, sessions in (("b-agent", 3), ("a-agent", 1), ("c-agent", 2)):
        for number in range(sessions):
            Session.create(store, f"s{number}", agent_id=agent, tenant_id="acme")
    Session.create(store, "elsewhere", agent_id="z-agent", tenant_id="zeta")
    admin = MemoryAdmin(store, tenant_id="acme")
    assert [a["agent_id"] for a in admin.agents(limit=2, offset=1)] == ["b-agent", "c-agent"]
    busiest = admin.agents(busiest_first=True)
    assert [(a["agent_id"], a["session_count"]) for a in busiest] == [("b-agent", 3), ("c-agent", 2), ("a-agent", 1)]
    assert admin.agents(busiest_first=True, limit=1) == busiest[:1]
    assert admin.agent_count() == len(admin.agents()) == 3
    assert store.agents.tenants() == ["acme", "zeta"]
    with pytest.raises(InvalidInputError, match="limit must be an integer from 1 to 100"):
        admin.agents(limit=0)


def test_the_migration_registers_the_agents_of_an_existing_database(db_path):
    conn = sqlite3.connect(db_path)
    apply_migrations(SQLiteDDL(conn), MIGRATIONS[:4])
    conn.execute("PRAGMA user_version = 4")
    conn.execute("INSERT INTO sessions (tenant_id, agent_id, session_id, created_at, updated_at)"
                 " VALUES ('acme', 'support-bot', ?, '2026-01-01T00:00:00Z', '2026-01-02T00:00:00Z')", (KEY,))
    conn.commit()
    conn.close()
    with Store(db_path) as store:
        admin = MemoryAdmin(store, tenant_id="acme")
        assert [a["agent_id"] for a in admin.agents()] == ["support-bot"]
        assert admin.list("support-bot")[0]["id"] == KEY
        assert admin.list("support-bot")[0]["status"] is None


def test_agents_are_found_by_id_slug_or_name(acme):
    assert acme.resolve_agent("support-bot")["agent_id"] == "support-bot"
    assert acme.resolve_agent("customer-support")["agent_id"] == "support-bot"
    assert acme.resolve_agent("customer SUPPORT")["agent_id"] == "support-bot"
    assert acme.resolve_agent("sales")["name"] is None


def test_names_match_case_insensitively_beyond_ascii(store):
    Session.create(store, "s", agent_id="br-1", tenant_id="acme")
    register_agent(store, "br-1", tenant_id="acme", name="Atendimento Ágil")
    assert MemoryAdmin(store, tenant_id="acme").resolve_agent("ATENDIMENTO ÁGIL")["agent_id"] == "br-1"


def test_an_ambiguous_name_asks_for_the_id_or_slug(acme, store):
    register_agent(store, "support-bot-2", tenant_id="acme", name="customer support")
    with pytest.raises(AmbiguousAgentError,
                       match="2 agents are named 'Customer Support' .*use the agent's id or slug instead"):
        acme.list("Customer Support")
    assert acme.resolve_agent("support-bot-2")["agent_id"] == "support-bot-2"
    assert acme.resolve_agent("customer-support")["agent_id"] == "support-bot"


def test_register_agent_keeps_what_is_not_given_and_guards_slugs(acme, store):
    assert register_agent(store, "support-bot", tenant_id="acme", name="Support")["slug"] == "customer-support"
    with pytest.raises(ConflictError, match="slug 'customer-support' already names agent 'support-bot'"):
        register_agent(store, "sales", tenant_id="acme", slug="customer-support")
    with pytest.raises(ConflictError, match="slug 'support-bot' already names agent 'support-bot'"):
        register_agent(store, "sales", tenant_id="acme", slug="support-bot")
    register_agent(store, "sales", tenant_id="globex", slug="customer-support")  # slugs are per tenant
    for slug in ("Customer-Support", "two words", "-x", "x" * 65, ""):
        with pytest.raises(InvalidInputError, match="a slug is lowercase letters and digits"):
            register_agent(store, "sales", tenant_id="acme", slug=slug)


# -- operating on another agent's memory -------------------------------------------------------------

def test_admin_reads_and_curates_another_agents_memory(acme):
    assert [r["id"] for r in acme.list("customer-support")] == [KEY]
    assert texts(acme.get("Customer Support", KEY)["messages"]) == ["my order is late"]
    acme.append("support-bot", KEY, {"role": "system", "content": "Priority customer: answer within 2 minutes."})
    assert [h["content"] for h in acme.search("customer-support", KEY, "priority")] == [
        "Priority customer: answer within 2 minutes."]
    own = Memory(acme.store, agent_id="support-bot", tenant_id="acme")  # what the agent itself sees
    assert texts(own.get(KEY)["messages"]) == ["my order is late", "Priority customer: answer within 2 minutes."]
    assert acme.clear("support-bot", KEY) == 2
    assert not own.exists(KEY)


def test_admin_actions_run_by_name_as_the_methods_do(acme):
    assert [r["id"] for r in acme.perform("list", "customer-support")] == [KEY]
    assert texts(acme.perform("get", "support-bot", KEY)["messages"]) == ["my order is late"]
    appended = acme.perform("append", "support-bot", KEY, "Call back tomorrow.")
    assert appended["role"] == "user" and appended["parts"][0]["text"] == "Call back tomorrow."
    assert [h["content"] for h in acme.perform("search", "support-bot", KEY, "tomorrow")] == ["Call back tomorrow."]
    summary = acme.perform("summarize", "support-bot", KEY, summarizer=lambda prompt: "Late order; call back.")
    assert summary == "Late order; call back." and acme.list("support-bot")[0]["summary"] == summary
    with pytest.raises(InvalidInputError, match="no admin action 'clear': use one of list, get, search"):
        acme.perform("clear", "support-bot", KEY)
    assert texts(acme.get("support-bot", KEY)["messages"]) == ["my order is late", "Call back tomorrow."]


def test_admin_list_takes_the_memory_filters(acme):
    assert acme.list("sales", status="in_progress", limit=5)[0]["id"] == "email:ana@example.com"
    with pytest.raises(InvalidInputError, match="limit must be an integer from 1 to 100"):
        acme.list("sales", limit=500)


def test_set_replaces_the_messages_in_one_step(acme):
    stored = acme.set("sales", "email:ana@example.com", [
        {"role": "user", "content": "I want the yearly plan", "timestamp": "2026-02-01T10:00:00-03:00"},
        {"role": "assistant", "content": "Done."},
    ])
    assert stored[0]["created_at"] == "2026-02-01T13:00:00.000Z"
    assert texts(acme.get("sales", "email:ana@example.com")["messages"]) == ["I want the yearly plan", "Done."]
    with pytest.raises(InvalidMessageError, match="role must be one of"):
        acme.set("sales", "email:ana@example.com", [{"role": "user", "content": "kept?"}, {"role": "bot"}])
    assert texts(acme.get("sales", "email:ana@example.com")["messages"]) == ["I want the yearly plan", "Done."]
    acme.set("sales", "email:new@example.com", [{"role": "user", "content": "created by set"}])
    assert acme.get("sales", "email:new@example.com")["total_turns"] == 1


def test_admin_summarize_stores_the_summary(acme):
    prompts = []

    def summarizer(prompt):
        prompts.append(prompt)
        return "- Order late\n- Waiting on carrier"

    summary = acme.summarize("customer-support", KEY, prompt="Resume em até 5 bullets, em português:",
                             summarizer=summarizer)
    assert summary == "- Order late\n- Waiting on carrier"
    assert prompts[0].startswith("Resume em até 5 bullets, em português:")
    assert acme.list("support-bot")[0]["summary"] == summary
    acme.set("support-bot", "empty", [])
    with pytest.raises(NothingToSummarizeError):
        acme.summarize("support-bot", "empty", summarizer=summarizer)


def test_append_and_reads_need_an_existing_memory(acme):
    messages = _errors(acme, "sales", "user:404", only_key_missing=True)
    assert set(messages.values()) == {"agent 'sales' has no memory 'user:404'"}
    assert not Memory(acme.store, agent_id="sales", tenant_id="acme").exists("user:404")


# -- tenant isolation -----------------------------------------------------------------------------------

def _errors(admin, agent, key, *, only_key_missing=False):
    """The NotFoundError message of every admin operation on (agent, key). When only the key is
    missing, list and set succeed (set creates the memory), so they are left out."""
    calls = {
        "get": lambda: admin.get(agent, key), "clear": lambda: admin.clear(agent, key),
        "append": lambda: admin.append(agent, key, {"role": "user", "content": "x"}),
        "search": lambda: admin.search(agent, key, "order"),
        "summarize": lambda: admin.summarize(agent, key, summarizer=str),
    }
    if not only_key_missing:
        calls.update(list=lambda: admin.list(agent), set=lambda: admin.set(agent, key, []))
    messages = {}
    for name, call in calls.items():
        with pytest.raises(NotFoundError) as raised:
            call()
        messages[name] = str(raised.value)
    return messages


def test_another_tenants_agent_reads_exactly_like_a_missing_one(acme, tmp_path):
    globex = MemoryAdmin(acme.store, tenant_id="globex")
    with Store(tmp_path / "empty.db") as empty:
        nowhere = _errors(MemoryAdmin(empty, tenant_id="globex"), "customer-support", KEY)
    assert _errors(globex, "customer-support", KEY) == nowhere
    assert _errors(globex, "support-bot", KEY) == {k: v.replace("customer-support", "support-bot")
                                                   for k, v in nowhere.items()}
    assert nowhere["get"] == "no agent 'customer-support': pass the id, slug or name of an agent of this tenant"
    assert "forbidden" not in str(nowhere).lower()
    assert texts(acme.get("support-bot", KEY)["messages"]) == ["my order is late"]  # untouched


def test_another_tenants_memory_reads_exactly_like_a_missing_one(acme, store, tmp_path):
    Memory(store, agent_id="support-bot", tenant_id="globex").append("user", "globex secret", key="user:7")
    with Store(tmp_path / "other.db") as other:
        Memory(other, agent_id="support-bot", tenant_id="acme").append("user", "x", key=KEY)
        with pytest.raises(NotFoundError) as nowhere:
            MemoryAdmin(other, tenant_id="acme").get("support-bot", "user:7")
    with pytest.raises(NotFoundError) as elsewhere:
        acme.get("support-bot", "user:7")
    assert str(elsewhere.value) == str(nowhere.value) == "agent 'support-bot' has no memory 'user:7'"
    assert [r["id"] for r in acme.list("support-bot")] == [KEY]


@pytest.mark.parametrize("hostile", ["'; DROP TABLE sessions; --", "%", "_", "*", "[a-z]", "x' OR '1'='1"])
def test_hostile_references_and_keys_are_plain_strings(acme, hostile):
    with pytest.raises(NotFoundError, match="no agent"):
        acme.get(hostile, KEY)
    acme.set("sales", hostile, [{"role": "user", "content": "stored as given"}])
    assert texts(acme.get("sales", hostile)["messages"]) == ["stored as given"]
    assert {r["id"] for r in acme.list("sales")} == {"email:ana@example.com", hostile}
    assert acme.clear("sales", hostile) == 1
    assert texts(acme.get("support-bot", KEY)["messages"]) == ["my order is late"]


# -- status tools --------------------------------------------------------------------------------------

def test_status_tools_mark_the_conversation(store):
    memory = Memory(store, agent_id="sdr")
    tools = status_tools(memory)
    assert set(tools) == {"qualify_lead", "close_conversation"}
    with identify("+5511911111111"):
        memory.append("user", "We have 50 seats and budget approved.")
        answer = tools["qualify_lead"].execute({"score": 8})
        assert answer == "Lead scored 8/10: the conversation is now marked 'qualified'."
    with identify("+5511922222222"):
        memory.append("user", "Just looking.")
        assert "'nurturing'" in tools["qualify_lead"].execute({"score": 6.5})
    with identify("+5511933333333"):
        memory.append("user", "Stop messaging me.")
        answer = tools["close_conversation"].execute({"reason": "not_interested"})
        assert answer == "Conversation closed (not_interested)."
    assert {r["entity_value"]: r["status"] for r in memory.list()} == {
        "+5511911111111": "qualified", "+5511922222222": "nurturing", "+5511933333333": "closed"}


def test_status_tool_errors_come_back_as_text(store):
    memory = Memory(store, agent_id="sdr")
    tools = status_tools(memory, qualify_threshold=9)
    assert tools["qualify_lead"].execute({"score": 11}) == "Error: score must be a number from 0 to 10, got 11"
    assert tools["qualify_lead"].execute({}) == "Error: qualify_lead needs score"
    assert tools["close_conversation"].execute({"reason": "bored"}).startswith("Error: reason must be one of")
    assert tools["qualify_lead"].execute({"score": 8}).startswith("Error: no memory key")
    with identify("lead@example.com"):
        assert tools["qualify_lead"].execute({"score": 8}) == (
            "Error: agent 'sdr' has no memory 'email:lead@example.com': append a message first")
        memory.append("user", "Tell me more.")
        assert "'nurturing'" in tools["qualify_lead"].execute({"score": 8})  # under the threshold of 9
    schema = tools["close_conversation"].openai_schema()
    assert schema["function"]["parameters"]["properties"]["reason"]["enum"] == [
        "not_interested", "wrong_contact", "completed", "other"]
