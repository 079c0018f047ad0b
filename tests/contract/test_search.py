import pytest

from memorylab import Session, Store, import_session
from memorylab.store import ALL_TENANTS
from tests.helpers import ids, text_message

HOSTILE = [
    '"', '""', '"unbalanced', "'", "(", ")", "((deployment", "AND", "OR", "NOT", "deployment AND",
    "OR friday", "NEAR(deployment friday)", "NEAR", "*", "deploy*", "^deployment", "text:deployment",
    "messages_fts:x", "{text}: x", "-", "+", "a OR b NOT c", "x' OR '1'='1", "'; DROP TABLE messages; --",
    "\x00", "\u200b", "日本語", "🚀", "émoji café", "\\", "%", "_", "col1 : col2", "a" * 5000, "", "   ",
]


@pytest.fixture
def searchable(session):
    session.append_message(text_message("m1", "The deployment is scheduled for Friday."))
    session.append_message(text_message("m2", "Friday works. Café au lait at the launch?", "assistant"))
    session.append_message(text_message("m3", "Order A-4471 arrived with the wrong item"))
    session.append_message({"id": "m4", "role": "assistant", "parts": [
        {"type": "reasoning", "text": "secret reasoning about deployment"},
        {"type": "tool-x", "toolCallId": "c", "toolName": "x", "input": {"q": "deployment"},
         "state": "input-available"}]})
    return session


def test_search_finds_text_parts_ranked(searchable):
    hits = searchable.search("deployment friday")
    assert ids(hits) == ["m1"]
    assert set(hits[0]) >= {"id", "role", "content", "created_at", "session_id"}
    assert hits[0]["content"] == "The deployment is scheduled for Friday."
    assert hits[0]["session_id"] == "s1"
    assert ids(searchable.search("friday")) in (["m1", "m2"], ["m2", "m1"])


def test_search_ignores_reasoning_and_tool_parts(searchable):
    assert "m4" not in ids(searchable.search("deployment"))


def test_phrases_ids_prefixes_and_diacritics(searchable):
    assert ids(searchable.search("A-4471")) == ["m3"]
    assert ids(searchable.search('"wrong item"')) == ["m3"]
    assert ids(searchable.search("deploy*")) == ["m1"]
    assert ids(searchable.search("cafe")) == ["m2"]
    assert ids(searchable.search("schedul")) == ["m1"]  # bare words match as prefixes
    assert searchable.search('"schedul"') == []  # a quoted phrase matches exactly


def test_limit_is_respected(searchable):
    assert len(searchable.search("friday", limit=1)) == 1
    assert searchable.search("friday", limit=0) == []


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_queries_never_raise(searchable, query):
    hits = searchable.search(query)
    assert isinstance(hits, list)
    assert searchable.get_message("m1") is not None


def test_operators_are_matched_as_words_not_syntax(session):
    session.append_message(text_message("w", "cats OR dogs AND birds NOT fish"))
    session.append_message(text_message("c", "cats only"))
    assert ids(session.search("cats OR dogs")) == ["w"]
    assert ids(session.search("NOT")) == ["w"]


def test_store_search_covers_one_tenant_or_every_tenant_when_asked(store):
    a = Session.create(store, "alpha", agent_id="bot-a")
    b = Session.create(store, "beta", agent_id="bot-b", tenant_id="acme")
    a.append_message(text_message("a1", "invoice overdue"))
    b.append_message(text_message("b1", "invoice paid"))
    assert [(h["session_id"], h["agent_id"]) for h in store.search("invoice", tenant_id="default")] == [
        ("alpha", "bot-a")]
    assert [h["session_id"] for h in store.search("invoice", tenant_id="acme")] == ["beta"]
    hits = store.search("invoice", tenant_id=ALL_TENANTS)
    assert {(h["tenant_id"], h["session_id"]) for h in hits} == {("default", "alpha"), ("acme", "beta")}
    assert [h["id"] for h in a.search("invoice")] == ["a1"]
    assert [h["id"] for h in b.search("invoice")] == ["b1"]


def test_html_in_messages_is_stored_and_returned_verbatim(session):
    payload = "<img src=x onerror=alert(1)> <script>alert('x')</script>"
    session.append_message(text_message("h", payload))
    assert session.search("onerror")[0]["content"] == payload


def test_store_search_filters_by_roles(store):
    s = Session.create(store, "roles")
    s.append_message(text_message("u", "shared word from the user"))
    s.append_message(text_message("a", "shared word from the assistant", "assistant"))
    assert ids(store.search("shared", tenant_id="default", roles=["assistant"])) == ["a"]
    assert set(ids(store.search("shared", tenant_id="default", roles=["user", "assistant"]))) == {"u", "a"}
    assert store.search("shared", tenant_id="default", roles=["tool"]) == []


def test_an_import_leaves_the_sqlite_search_index_merged_so_later_appends_do_not_pay_for_it(db_path):
    """FTS5 writes one segment per insert statement; a large import settles them into one, a small
    one leaves the index alone."""
    messages = [{"id": f"m{i}", "parent_id": f"m{i - 1}" if i else None, "role": "user",
                 "parts": [{"type": "text", "text": f"quokka note {i}"}], "created_at": "2026-01-01T00:00:00.000Z"}
                for i in range(2_500)]
    export = {"format": "memorylab.session", "version": 1, "session": {"id": "big"}, "messages": messages}
    with Store(db_path) as store:
        import_session(store, export)
        segments = store.fetch_one("SELECT COUNT(DISTINCT segid) AS n FROM messages_fts_idx")["n"]
        assert segments == 1
        assert len(store.search("quokka", tenant_id="default", limit=5000)) == 2_500
        small = {**export, "session": {"id": "small"}, "messages": messages[:10]}
        import_session(store, small)
        assert store.fetch_one("SELECT COUNT(DISTINCT segid) AS n FROM messages_fts_idx")["n"] == 2
