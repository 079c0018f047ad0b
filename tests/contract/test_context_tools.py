import pytest

from memorylab import Session
from memorylab.context import SkillDirectoryProvider, SqliteSearchProvider, StaticProvider


@pytest.fixture
def full(store, tmp_path):
    skills = tmp_path / "skills"
    skills.mkdir()
    (skills / "refund.md").write_text("# Refund\nRefund an order.\n\n1. Verify the order id.\n")
    kb = SqliteSearchProvider(store, namespace="kb")
    kb.set("dhl", "DHL pickups happen at 4pm.")
    return (Session.create(store, "tools")
            .with_context("soul", provider=StaticProvider("You help."))
            .with_context("memory", description="Facts", max_tokens=30)
            .with_context("kb", description="Knowledge", provider=kb)
            .with_context("skills", description="Skills", provider=SkillDirectoryProvider(skills)))


def test_tools_appear_only_when_a_block_needs_them(store):
    readonly = Session.create(store, "ro").with_context("soul", provider=StaticProvider("x"))
    assert readonly.tools() == {}
    writable = Session.create(store, "rw").with_context("memory")
    assert list(writable.tools()) == ["set_context"]
    search_only = Session.create(store, "s").with_context("kb", provider=type("P", (), {
        "get": lambda self: "n", "search": lambda self, q: "hit"})())
    assert list(search_only.tools()) == ["search_context"]


def test_schemas_and_openai_shape(full):
    tools = full.tools()
    assert list(tools) == ["set_context", "search_context", "activate_skill", "deactivate_skill"]
    set_context = tools["set_context"].parameters
    assert set_context["properties"]["label"]["enum"] == ["memory", "kb"]
    assert set_context["properties"]["action"]["enum"] == ["replace", "append"]
    assert set_context["required"] == ["label", "content"]
    assert "memory: Facts (0/30 tokens)" in tools["set_context"].description
    assert tools["search_context"].parameters["properties"]["label"]["enum"] == ["kb"]
    assert "kb: Knowledge (1 entry indexed.)" in tools["search_context"].description
    openai = full.openai_tools()
    assert [t["function"]["name"] for t in openai] == list(tools)
    assert all(t["type"] == "function" and t["function"]["parameters"]["type"] == "object" for t in openai)


def test_set_context_happy_paths_report_usage(full):
    tool = full.tools()["set_context"]
    assert tool.execute({"label": "memory", "content": "likes tea"}) == "Replaced memory: now 3/30 tokens."
    assert tool.execute({"label": "memory", "content": "lives in Porto", "action": "append"}) == \
        "Appended to memory: now 7/30 tokens."
    assert full.get_context_block("memory")["content"] == "likes tea\nlives in Porto"
    assert tool.execute({"label": "kb", "key": "ups", "content": "UPS pickups at 2pm."}) == \
        "Stored entry 'ups' in kb. 2 entries indexed."


@pytest.mark.parametrize("args, fragment", [
    ({"label": "nope", "content": "x"}, "no context block 'nope'"),
    ({"label": "soul", "content": "x"}, "readonly"),
    ({"label": "memory", "content": "word " * 40}, "allows 30 tokens"),
    ({"label": "memory", "content": "x", "action": "delete"}, "action must be"),
    ({"label": "memory"}, "needs content"),
    ({"label": "memory", "content": 5}, "content must be a string"),
])
def test_set_context_errors_are_text_and_change_nothing(full, args, fragment):
    full.replace_context_block("memory", "kept")
    result = full.tools()["set_context"].execute(args)
    assert result.startswith("Error:") and fragment in result
    assert full.get_context_block("memory")["content"] == "kept"


def test_an_entry_written_without_a_key_gets_one_derived_from_its_content(full):
    tool = full.tools()["set_context"]
    assert "key" not in tool.parameters["required"]
    first = tool.execute({"label": "kb", "content": "FedEx pickups at 11am."})
    key = first.split("'")[1]
    assert first == f"Stored entry {key!r} in kb. 2 entries indexed."
    assert key.startswith("entry-")
    assert tool.execute({"label": "kb", "content": "FedEx pickups at 11am.", "key": ""}) == first
    assert tool.execute({"label": "kb", "content": "GLS pickups at noon."}) != first
    assert full.tools()["search_context"].execute({"label": "kb", "query": "fedex"}) == \
        f"[{key}]\nFedEx pickups at 11am."


def test_search_context_hits_misses_and_errors(full):
    tool = full.tools()["search_context"]
    assert tool.execute({"label": "kb", "query": "DHL pickup"}) == "[dhl]\nDHL pickups happen at 4pm."
    assert tool.execute({"label": "kb", "query": "fedex"}) == "No entries match 'fedex'."
    assert "not searchable" in tool.execute({"label": "memory", "query": "x"})
    assert tool.execute("not a dict").startswith("Error:")


def test_skill_activation_round_trip(full):
    tools = full.tools()
    body = tools["activate_skill"].execute({"label": "skills", "key": "refund"})
    assert "1. Verify the order id." in body
    assert full.get_context_block("skills")["active_skills"] == ["refund"]
    assert "Verify the order id" not in full.freeze_system_prompt()
    assert "no skill 'nope'" in tools["activate_skill"].execute({"label": "skills", "key": "nope"})
    assert "no skill '../etc'" in tools["activate_skill"].execute({"label": "skills", "key": "../etc"})
    assert tools["deactivate_skill"].execute({"label": "skills", "key": "refund"}) == "Skill 'refund' deactivated."
    assert "not active" in tools["deactivate_skill"].execute({"label": "skills", "key": "refund"})
    assert full.get_context_block("skills")["active_skills"] == []


def test_a_failing_user_provider_becomes_error_text(store):
    class Broken:
        def get(self):
            return "ok"

        def search(self, query):
            raise RuntimeError("index offline")

    session = Session.create(store, "broken").with_context("kb", provider=Broken())
    assert session.tools()["search_context"].execute({"label": "kb", "query": "x"}) == \
        "Error: search_context failed: RuntimeError: index offline"


def test_search_with_no_provider_answer_is_text(store):
    silent = type("Silent", (), {"get": lambda self: "", "search": lambda self, query: None})()
    session = Session.create(store, "silent").with_context("kb", provider=silent)
    assert session.tools()["search_context"].execute({"label": "kb", "query": "dhl"}) == \
        "Nothing in kb matches 'dhl'."


def test_an_unknown_skill_is_not_found_and_never_marked_active(full, store):
    activate = full.tools()["activate_skill"]
    assert activate.execute({"label": "skills", "key": "no-such-skill"}) == \
        "Error: no skill 'no-such-skill'; available: refund"
    assert full.get_context_block("skills")["active_skills"] == []
    catalog = type("Catalog", (), {"get": lambda self: "- refund", "load": lambda self, key: None})()
    own = Session.create(store, "own").with_context("skills", provider=catalog)
    answer = own.tools()["activate_skill"].execute({"label": "skills", "key": "refund"})
    assert answer == "Error: skill 'refund' not found in 'skills'"
    assert own.get_context_block("skills")["active_skills"] == []


def test_deactivate_lists_the_active_skills_and_clearing_messages_deactivates_them(full):
    assert "- skills: none" in full.tools()["deactivate_skill"].description
    full.tools()["activate_skill"].execute({"label": "skills", "key": "refund"})
    assert "- skills: refund" in full.tools()["deactivate_skill"].description
    full.append_message({"role": "user", "content": "refund please"})
    full.clear_messages()
    assert full.get_context_block("skills")["active_skills"] == []
    assert full.get_history() == []


@pytest.mark.parametrize("current, added, stored", [
    ("fact1", "\nfact2", "fact1\nfact2"),
    ("fact1\n", "fact2", "fact1\nfact2"),
    ("fact1", "fact2", "fact1\nfact2"),
    ("", "fact2", "fact2"),
])
def test_append_adds_one_newline_between_facts(store, current, added, stored):
    session = Session.create(store, "facts").with_context("memory")
    if current:
        session.replace_context_block("memory", current)
    session.append_context_block("memory", added)
    assert session.get_context_block("memory")["content"] == stored
