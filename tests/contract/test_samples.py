"""The sample data is the lab's first impression: it must load and demo every feature."""
import pytest

from memorylab import KVStore, Memory, Session, load_samples
from memorylab.messages import is_tool_part
from memorylab.samples import SKILLS_DIR, sample_files, sample_memory_keys, with_sample_context


@pytest.fixture
def loaded(store):
    load_samples(store)
    return store


def open_sample(store, session_id):
    row = next(r for r in store.sessions.list() if r["session_id"] == session_id)
    return Session.open(store, session_id, agent_id=row["agent_id"], tenant_id=row["tenant_id"])


def test_four_conversations_load_once(store):
    assert len(sample_files()) == 4
    assert len(load_samples(store)) == 4
    assert load_samples(store) == []
    assert {r["session_id"] for r in store.sessions.list()} == {
        "support-order-4471", "coding-csv-importer", "trip-planning-branches", "long-migration-project",
        *sample_memory_keys()}


def test_memory_samples_have_identities_statuses_and_kv(loaded):
    rows = {r["id"]: r for r in Memory(loaded, agent_id="sales-assistant").list()}
    assert rows["phone:+447700900123"]["status"] == "qualified"
    assert rows["phone:+447700900123"]["entity_type"] == "phone"
    assert rows["email:priya.n@example.org"]["status"] is None
    assert rows["id:lead-7731"]["last_message"]["role"] == "assistant"
    prefs = KVStore(loaded, namespace="support-bot").get("prefs:marta.kowalczyk@example.com")
    assert prefs == {"contact": "email", "refund_to": "card", "carrier": "DHL", "gift_box": "vegetarian"}
    assert KVStore(loaded, namespace="support-bot").get_entry("rate-limit:marta.kowalczyk@example.com")["expires_at"]


def test_support_conversation_has_checkable_facts(loaded):
    session = open_sample(loaded, "support-order-4471")
    text = " ".join(m["content"] for m in session.search("A-4471", limit=50))
    assert "A-4471" in text
    assert session.search("B-1093")
    assert session.get_history()[0]["role"] == "system"


def test_coding_session_has_tool_calls_in_both_layouts_and_a_long_output(loaded):
    session = open_sample(loaded, "coding-csv-importer")
    history = session.get_history()
    tool_parts = [(m, p) for m in history for p in m["parts"] if is_tool_part(p)]
    assert any(m["role"] == "assistant" and p["state"] == "output-available" for m, p in tool_parts)
    assert any(m["role"] == "tool" for m, _ in tool_parts)
    assert max(len(str(p.get("output", ""))) for _, p in tool_parts) >= 4000


def test_branching_conversation_has_regenerations_and_an_edit(loaded):
    session = open_sample(loaded, "trip-planning-branches")
    messages = session.get_all_messages()
    forks = [m for m in messages if len(session.get_branches(m["id"])) >= 2]
    assert len(forks) >= 3
    assert any(m["metadata"].get("edited_from") for m in messages)
    assert any(m["metadata"].get("regenerated_from") for m in messages)
    assert len(session.get_leaves()) >= 3


def test_long_conversation_needs_compaction(loaded):
    session = open_sample(loaded, "long-migration-project")
    assert session.get_path_length() >= 150
    assert session.get_history_tokens() > 10_000


def test_sample_context_renders_every_block_kind(loaded):
    session = with_sample_context(open_sample(loaded, "support-order-4471"))
    kinds = {b["label"]: b["kind"] for b in session.get_context_blocks()}
    assert kinds == {"soul": "readonly", "memory": "writable", "todos": "writable",
                     "knowledge": "searchable", "skills": "skill"}
    prompt = session.freeze_system_prompt()
    assert "SOUL (Identity) [readonly]" in prompt
    assert "entries indexed." in prompt
    assert len(list(SKILLS_DIR.glob("*.md"))) >= 3
    assert "refund" in session.tools()["search_context"].execute({"label": "knowledge", "query": "refund"}).lower()
    assert set(session.tools()) == {"set_context", "search_context", "activate_skill", "deactivate_skill"}
