"""Tenant isolation as a property: what a tenant sees does not depend on what other tenants hold.

Random operations by a few tenants on the same agents, memory keys, KV namespaces, slugs and
names (so that they collide across tenants) are replayed twice: on one shared store, and on a store
per tenant holding only that tenant's operations. Everything a tenant can observe through Memory,
KVStore and MemoryAdmin, errors included, must be the same in both, and match a model.
"""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memorylab import (
    InvalidInputError,
    KVStore,
    Memory,
    MemoryAdmin,
    MemoryLabError,
    NotFoundError,
    Store,
    message_text,
    register_agent,
)
from memorylab.store import ALL_TENANTS
from tests.helpers import examples

TENANTS = ("acme", "globex", "initech")
AGENTS = ("sdr", "support")
KEYS = ("email:ana@example.com", "phone:+5511999999999", "id:42")
NAMESPACES = ("default", "cart")
SLUGS = ("sales-team", "helpdesk")
NAMES = ("Front Desk", "Closer")

operations = st.lists(st.one_of(
    st.tuples(st.just("append"), st.sampled_from(TENANTS), st.sampled_from(AGENTS), st.sampled_from(KEYS)),
    st.tuples(st.just("admin_append"), st.sampled_from(TENANTS), st.sampled_from(AGENTS), st.sampled_from(KEYS)),
    st.tuples(st.just("admin_clear"), st.sampled_from(TENANTS), st.sampled_from(AGENTS), st.sampled_from(KEYS)),
    st.tuples(st.just("register"), st.sampled_from(TENANTS), st.sampled_from(AGENTS),
              st.sampled_from(SLUGS + (None,)), st.sampled_from(NAMES + (None,))),
    st.tuples(st.just("kv_set"), st.sampled_from(TENANTS), st.sampled_from(NAMESPACES), st.sampled_from(KEYS),
              st.integers(0, 9)),
    st.tuples(st.just("kv_delete"), st.sampled_from(TENANTS), st.sampled_from(NAMESPACES), st.sampled_from(KEYS)),
), max_size=20)


def apply(store, number, operation):
    """Run one operation; a refusal is part of the outcome (e.g. appending to another tenant's memory)."""
    kind, tenant, *args = operation
    try:
        if kind == "append":
            agent, key = args
            Memory(store, tenant_id=tenant, agent_id=agent).append("user", f"secret note {number}", key=key)
        elif kind == "admin_append":
            agent, key = args
            MemoryAdmin(store, tenant_id=tenant).append(agent, key, {"role": "system", "content": f"secret {number}"})
        elif kind == "admin_clear":
            MemoryAdmin(store, tenant_id=tenant).clear(*args)
        elif kind == "register":
            agent, slug, name = args
            register_agent(store, agent, tenant_id=tenant, slug=slug, name=name)
        elif kind == "kv_set":
            namespace, key, value = args
            KVStore(store, tenant_id=tenant, namespace=namespace).set(key, {"n": value, "by": tenant})
        else:
            namespace, key = args
            KVStore(store, tenant_id=tenant, namespace=namespace).delete(key)
    except MemoryLabError as error:
        return type(error).__name__, str(error)
    return "ok"


def outcome(action):
    try:
        return "ok", action()
    except MemoryLabError as error:
        return type(error).__name__, str(error)


def texts(messages):
    return [(m["role"], message_text(m)) for m in messages]


def observe(store, tenant):
    """Everything ``tenant`` can see through the public API, without ids and timestamps (which differ
    between two stores even when they hold the same things)."""
    admin = MemoryAdmin(store, tenant_id=tenant)
    seen = {"agents": [(a["agent_id"], a["name"], a["slug"], a["session_count"]) for a in admin.agents()],
            "resolve": [outcome(lambda: admin.resolve_agent(ref)["agent_id"]) for ref in AGENTS + SLUGS + NAMES],
            "kv": [KVStore(store, tenant_id=tenant, namespace=ns).get_all("*") for ns in NAMESPACES]}
    for agent in AGENTS:
        memory = Memory(store, tenant_id=tenant, agent_id=agent)
        seen[agent] = sorted((row["id"], row["message_count"], row["last_message"]["content"])
                             for row in memory.list(limit=100))
        for key in KEYS:
            seen[agent, key] = (
                memory.exists(key=key),
                texts(memory.get_recent(100, key=key)),
                sorted(hit["content"] for hit in memory.search("secret", key=key)),
                outcome(lambda: texts(admin.get(agent, key)["messages"])),
                outcome(lambda: sorted(hit["content"] for hit in admin.search(agent, key, "secret"))),
            )
    return seen


@settings(max_examples=examples(200), deadline=None)
@given(operations)
def test_a_tenant_sees_exactly_what_it_would_see_alone(ops):
    shared = Store(":memory:")
    results = [apply(shared, number, operation) for number, operation in enumerate(ops)]
    for tenant in TENANTS:
        alone = Store(":memory:")
        own = [(number, operation) for number, operation in enumerate(ops) if operation[1] == tenant]
        assert [apply(alone, number, operation) for number, operation in own] == [results[n] for n, _ in own]
        assert observe(shared, tenant) == observe(alone, tenant)
        check_against_model(shared, tenant, own, results)


def check_against_model(store, tenant, own, results):
    """Memories hold exactly the tenant's own notes, KV exactly its own values."""
    notes, values = {}, {}
    for number, (kind, _, *args) in own:
        if results[number] != "ok":
            continue
        if kind in ("append", "admin_append"):
            note = f"secret note {number}" if kind == "append" else f"secret {number}"
            notes.setdefault(tuple(args), []).append(note)
        elif kind == "admin_clear":
            notes.pop(tuple(args))
        elif kind == "kv_set":
            values[tuple(args[:2])] = {"n": args[2], "by": tenant}
        elif kind == "kv_delete":
            values.pop(tuple(args), None)
    for agent in AGENTS:
        for key in KEYS:
            memory = Memory(store, tenant_id=tenant, agent_id=agent)
            assert [text for _, text in texts(memory.get_recent(100, key=key))] == notes.get((agent, key), [])
    for namespace in NAMESPACES:
        stored = KVStore(store, tenant_id=tenant, namespace=namespace).get_all("*")
        assert stored == {key: value for (ns, key), value in values.items() if ns == namespace}


def test_another_tenants_memory_reads_exactly_like_a_missing_one(store):
    Memory(store, tenant_id="acme", agent_id="sdr").append("user", "acme's secret", key=KEYS[0])
    globex = MemoryAdmin(store, tenant_id="globex")
    Memory(store, tenant_id="globex", agent_id="sdr").append("user", "globex's own", key=KEYS[1])
    with pytest.raises(NotFoundError) as theirs:
        globex.get("sdr", KEYS[0])
    with pytest.raises(NotFoundError) as nobodys:
        globex.get("sdr", KEYS[2])
    assert str(theirs.value).replace(KEYS[0], "KEY") == str(nobodys.value).replace(KEYS[2], "KEY")
    assert [hit["content"] for hit in store.search("secret", tenant_id="globex")] == []


def test_store_search_never_crosses_tenants_by_omission(store):
    Memory(store, tenant_id="acme").append("user", "acme's secret", key=KEYS[0])
    with pytest.raises(TypeError, match="tenant_id"):
        store.search("secret")
    with pytest.raises(InvalidInputError, match="name the tenant to search, or pass ALL_TENANTS"):
        store.search("secret", tenant_id=None)
    assert store.search("secret", tenant_id="globex") == []
    assert [hit["tenant_id"] for hit in store.search("secret", tenant_id=ALL_TENANTS)] == ["acme"]
