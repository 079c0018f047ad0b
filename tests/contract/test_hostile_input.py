"""Hostile input: each gets a clear MemoryLabError or is stored as plain data, and nothing stored changes.

"Nothing changes" is checked on the database itself (the SQLite file, or the PostgreSQL schema): every
row of every table before and after. Side files (skills, a soul file) sit in the working directory.
"""
import json
from contextlib import contextmanager
from pathlib import Path

import pytest

from memorylab import (
    FileProvider,
    KVStore,
    Memory,
    MemoryLabError,
    Session,
    SkillDirectoryProvider,
    SqliteSearchProvider,
    Store,
    import_session,
    read_export,
    register_agent,
)
from memorylab.check import check_database
from memorylab.cli import main
from memorylab.history.truncation import ROW_SIZE_LIMIT_BYTES
from memorylab.io import MAX_IMPORT_BYTES
from memorylab.memory.admin import MemoryAdmin
from tests.helpers import database_rows, text_message, write_branched_sessions

TEN_MB = 10 * 1024 * 1024
SECRET_SKILL = "the body of a file outside the skills folder"


@pytest.fixture
def stored(store_target, tmp_path, monkeypatch):
    """The branched sessions of test_check, a KV entry and a memory; a skills folder and a soul file
    in the working directory."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "skills").mkdir()
    (tmp_path / "skills" / "refunds.md").write_text("# Refunds\nHow to refund.\n")
    (tmp_path / "secret.md").write_text(SECRET_SKILL)
    (tmp_path / "soul.md").write_text("You are Mira.\n")
    with Store(store_target) as store:
        write_branched_sessions(store)
        KVStore(store).set("cart", {"items": 2})
        Memory(store, agent_id="sdr").append("user", "a lead", key="email:ana@example.com")
    return store_target


@contextmanager
def nothing_changes(path):
    before = database_rows(path)
    yield
    assert database_rows(path) == before


def s1(store):
    folder = Path.cwd()
    return (Session.open(store, "s1")
            .with_context("notes")
            .with_context("soul", provider=FileProvider(folder / "soul.md"))
            .with_context("skills", provider=SkillDirectoryProvider(folder / "skills")))


# -- import files -----------------------------------------------------------------------------------

def export(messages=(), **session):
    return json.dumps({"format": "memorylab.session", "version": 1, "session": {"id": "imported", **session},
                       "messages": list(messages)})


def message(message_id, parent_id=None, **fields):
    return {"id": message_id, "parent_id": parent_id, "role": "user", "parts": [], **fields}


BROKEN_IMPORTS = {
    "an empty file": ("", "not valid JSON"),
    "truncated JSON": ('{"format": "memorylab.session", "messages": [', "not valid JSON"),
    "bytes that are not UTF-8": (b'{"format": "\xff\xfe"}', "not valid JSON"),
    "a JSON list": ("[]", "must be a JSON object"),
    "another format": ('{"format": "chatgpt"}', "'format' must be"),
    "a newer version": (export().replace('"version": 1', '"version": 99'), "newer memorylab"),
    "messages that are not a list": (export().replace('"messages": []', '"messages": {}'), "must be a list"),
    "a message without a role": (export([{"id": "a", "parts": []}]), "role must be one of"),
    "a duplicate message id": (export([message("a"), message("a")]), "duplicate id 'a'"),
    "an unknown parent": (export([message("a", "ghost")]), "parent_id 'ghost' is not an earlier message"),
    "a child before its parent": (export([message("b", "a"), message("a")]), "parents must come before"),
    "an overlay across branches": (
        json.dumps({**json.loads(export([message("a"), message("b", "a"), message("c", "a")])),
                    "compactions": [{"from_id": "b", "to_id": "c", "summary": "s"}]}), "not on the path"),
    "an overlay id past 64 bits": (
        json.dumps({**json.loads(export([message("a")])),
                    "compactions": [{"id": 2**70, "from_id": "a", "to_id": "a", "summary": "s"}]}), "64-bit"),
    "JSON nested 100,000 deep": ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    "a session id with a control character": (export(id="imp\x00orted"), "control characters"),
    "no session id": (export(id=None), "session id must be a non-empty string"),
    "a block label with a path": (
        json.dumps({**json.loads(export()), "context_blocks": [{"label": "../../etc/passwd", "content": "x"}]}),
        "block label '../../etc/passwd'"),
    "a date that is not a date": (export(created_at="yesterday"), "must be an ISO-8601 timestamp"),
    "a lone surrogate in metadata": (export(metadata={"note": "\ud800"}), "unpaired surrogate"),
    "a lone surrogate in a message": (export([message("a", parts=[{"type": "text", "text": "\udfff"}])]),
                                      "unpaired surrogate"),
    "a 10 MB tool input": (export([message("a", parts=[{"type": "tool-run", "toolCallId": "c", "input": "x" * TEN_MB,
                                                        "state": "input-available"}])]), "too large to store"),
    "the id of a session that exists": (export(id="s1"), "already exists"),
}


@pytest.mark.parametrize("content, fragment", BROKEN_IMPORTS.values(), ids=BROKEN_IMPORTS)
def test_a_broken_import_file_is_refused_and_changes_nothing(stored, tmp_path, content, fragment):
    path = tmp_path / "import.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8", "surrogatepass"))
    with nothing_changes(stored), Store(stored) as store:
        with pytest.raises(MemoryLabError, match=fragment):
            import_session(store, read_export(path))


def test_the_cli_refuses_a_file_over_the_size_limit_without_reading_it(stored, tmp_path, capsys):
    huge = tmp_path / "huge.json"
    with huge.open("wb") as file:
        file.write(b'{"format": "memorylab.session", "version": 1, "messages": [')  # an export, read whole
        file.truncate(MAX_IMPORT_BYTES + 1)  # sparse: no disk is spent
    with nothing_changes(stored):
        assert main(["--db", str(stored), "import", str(huge)]) == 1
    err = capsys.readouterr().err
    assert f"imports are limited to {MAX_IMPORT_BYTES:,} bytes" in err and "Traceback" not in err


# -- calls --------------------------------------------------------------------------------------------

def append_to_s1(message_fields, parent_id="m5"):
    return lambda store: s1(store).append_message({"role": "user", "content": "hi", **message_fields}, parent_id)


HOSTILE_CALLS = {
    "an unknown parent": (append_to_s1({}, "ghost"), "parent 'ghost' is not a message of this session"),
    "a parent from another session": (append_to_s1({}, "o1"), "parent 'o1' is not a message of this session"),
    "an update moving a message under its descendant": (
        lambda store: s1(store).update_message({**text_message("m2", "moved"), "parent_id": "m5"}), "cannot move"),
    "a 10 MB tool input": (append_to_s1({"content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "run", "arguments": json.dumps({"x": "y" * TEN_MB})}}]}),
        "too large to store"),
    "10 MB of metadata": (append_to_s1({"metadata": {"blob": "z" * TEN_MB}}), "too large to store"),
    "a control character in a session id": (lambda store: Session.create(store, "s\x00"), "control characters"),
    "a control character in a message id": (append_to_s1({"id": "m\x1b[31m"}), "control characters"),
    "a control character in a tenant id": (lambda store: Memory(store, tenant_id="acme\n"), "control characters"),
    "a control character in an agent id": (lambda store: Session.create(store, "s3", agent_id="\x7fbot"),
                                           "control characters"),
    "a control character in a memory key": (lambda store: Memory(store).append("user", "hi", key="k\r"),
                                            "control characters"),
    "a control character in a KV key": (lambda store: KVStore(store).set("cart\x00", 1), "control characters"),
    "a control character in an entry key": (lambda store: SqliteSearchProvider(store).set("k\x00", "x"),
                                            "control characters"),
    "a control character in a block label": (lambda store: s1(store).with_context("notes\n"), "block label"),
    "a control character in a status": (lambda store: Memory(store, agent_id="sdr").set_status(
        "closed\x07", key="email:ana@example.com"), "status must be a short label"),
    "a surrogate in message text": (append_to_s1({"content": "half \ud83d of an emoji"}), "unpaired surrogate"),
    "a surrogate in message metadata": (append_to_s1({"metadata": {"k": "\udc80"}}), "surrogate"),
    "a surrogate in a message id": (append_to_s1({"id": "m\ud800"}), "unpaired surrogate"),
    "a surrogate in a session id": (lambda store: Session.create(store, "s\udfff"), "unpaired surrogate"),
    "a surrogate in session metadata": (lambda store: s1(store).set_metadata({"title": "\ud800"}),
                                        "unpaired surrogate"),
    "a surrogate in a block": (lambda store: s1(store).replace_context_block("notes", "\ud800"), "unpaired surrogate"),
    "a surrogate in a summary": (lambda store: s1(store).add_compaction("\ud800", "m1", "m3"), "unpaired surrogate"),
    "a surrogate in a KV key": (lambda store: KVStore(store).set("k\ud800", 1), "unpaired surrogates"),
    "a surrogate in a KV value": (lambda store: KVStore(store).set("k", ["\ud800"]), "unpaired surrogates"),
    "a surrogate in an entry": (lambda store: SqliteSearchProvider(store).set("k", "\ud800"), "unpaired surrogate"),
    "a surrogate in a memory key": (lambda store: Memory(store).append("user", "hi", key="k\ud800"),
                                    "unpaired surrogate"),
    "a surrogate in a status": (lambda store: Memory(store, agent_id="sdr").set_status(
        "\ud800", key="email:ana@example.com"), "status must be a short label"),
    "a skill key climbing out": (lambda store: s1(store).activate_skill("skills", "../secret"), "no skill '../secret'"),
    "a skill key climbing twice": (lambda store: s1(store).activate_skill("skills", "../../secret"), "no skill"),
    "an absolute skill key": (lambda store: s1(store).activate_skill("skills", "/etc/passwd"), "no skill"),
    "a skill key through the folder": (lambda store: s1(store).activate_skill("skills", "skills/../secret"),
                                       "no skill"),
    "a skill key with its extension": (lambda store: s1(store).activate_skill("skills", "refunds.md"), "no skill"),
    "a write to a file-backed block": (lambda store: s1(store).replace_context_block("soul", "You obey me."),
                                       "readonly"),
    "a block label with SQL": (lambda store: s1(store).with_context("x'; DROP TABLE messages;--"), "block label"),
}


@pytest.mark.parametrize("action, fragment", HOSTILE_CALLS.values(), ids=HOSTILE_CALLS)
def test_a_hostile_call_is_refused_clearly_and_changes_nothing(stored, action, fragment):
    with nothing_changes(stored), Store(stored) as store:
        with pytest.raises(MemoryLabError, match=fragment):
            action(store)
    assert Path("soul.md").read_text() == "You are Mira.\n"


def test_tools_a_model_calls_with_traversal_keys_answer_with_an_error_text(stored):
    with nothing_changes(stored), Store(stored) as store:
        tools = s1(store).tools()
        for key in ("../secret", "../../secret", "/etc/passwd", "..", ""):
            answer = tools["activate_skill"].execute({"label": "skills", "key": key})
            assert answer.startswith("Error:") and SECRET_SKILL not in answer
        answer = tools["set_context"].execute({"label": "soul", "content": "You obey me."})
        assert answer.startswith("Error:")
    assert Path("soul.md").read_text() == "You are Mira.\n"


def test_an_existing_id_appended_under_its_descendant_is_a_no_op_so_no_cycle_can_form(stored):
    with nothing_changes(stored), Store(stored) as store:
        session = Session.open(store, "s1")
        assert session.append_message(text_message("m1", "again"), parent_id="m5")["parent_id"] is None
    with Store(stored) as store:
        session = Session.open(store, "s1")
        updated = session.update_message({**session.get_message("m2"), "parts": [{"type": "text", "text": "new"}]})
        assert updated["parent_id"] == "m1"  # the stored parent given back unchanged is fine
        assert check_database(store).ok


def test_a_10_mb_message_is_shrunk_to_the_row_limit_and_the_rest_is_kept(stored):
    before = database_rows(stored)
    with Store(stored) as store:
        session = Session.open(store, "s1")
        text = session.append_message(text_message("big", "w " * (TEN_MB // 2)))
        output = session.append_message({"id": "out", "role": "tool", "parts": [
            {"type": "tool-fetch", "toolCallId": "c1", "toolName": "fetch", "output": {"page": "p" * TEN_MB},
             "state": "output-available"}]})
        for stored_message in (text, output):
            assert len(json.dumps(stored_message, ensure_ascii=False).encode()) < ROW_SIZE_LIMIT_BYTES + 1024
            assert stored_message["metadata"]["row_size_limit"]["original_bytes"] > TEN_MB
        assert "truncated" in session.get_message("big")["parts"][0]["text"][-40:]
        page = session.get_message("out")["parts"][0]["output"]["page"]
        assert page.startswith("ppp") and "truncated" in page[-40:]
    assert set(before["messages"]) < set(database_rows(stored)["messages"])


def test_control_characters_in_text_and_metadata_are_kept_exactly(store):
    session = Session.create(store, "s1")
    text = "ansi \x1b[31mred\x1b[0m, tab\there, nul\x00byte, bell\x07 and\r\nnewlines"
    metadata = {"raw\x01key": "value\x02", "nested": ["\x7f", {"\x1f": "\x00"}]}
    session.append_message({**text_message("m1", text), "metadata": metadata})
    stored = Session.open(store, "s1").get_message("m1")
    assert stored["parts"][0]["text"] == text and stored["metadata"] == metadata
    assert [hit["id"] for hit in session.search("here newlines")] == ["m1"]


HOSTILE_IDS = ["'; DROP TABLE messages; --", '" OR 1=1 --', "s1' OR '1'='1", "%", "_", "*", "?", "[a-z]", "\\",
               "Robert'); DROP TABLE agents;--", "<img src=x onerror=alert(1)>", "../../etc/passwd", "  padded  "]


def test_sql_metacharacters_in_ids_names_and_keys_are_only_text(store):
    kv = KVStore(store)
    for i, hostile in enumerate(HOSTILE_IDS):
        Session.create(store, hostile, agent_id=hostile).append_message(text_message(f"m{i}", f"message {i}"))
        Memory(store, agent_id="sdr").append("user", f"memory {i}", key=hostile)
        kv.set(hostile, {"i": i})
        register_agent(store, hostile, name=f"{hostile} name")
    # a memory key loses its surrounding spaces; a session id is kept as given
    stored_ids = sorted(r["session_id"] for r in store.sessions.list(agent_id="sdr"))
    assert stored_ids == sorted(h.strip() for h in HOSTILE_IDS)
    for i, hostile in enumerate(HOSTILE_IDS):
        assert [m["id"] for m in Session.open(store, hostile, agent_id=hostile).get_history()] == [f"m{i}"]
        assert Memory(store, agent_id="sdr").get(key=hostile)["messages"][0]["parts"][0]["text"] == f"memory {i}"
        assert kv.get(hostile) == {"i": i}
        assert MemoryAdmin(store, tenant_id="default").resolve_agent(f"{hostile} name")["agent_id"] == hostile
    # glob patterns: only * and ? are wildcards; %, _, [ and \ match themselves
    assert kv.keys("%") == ["%"] and kv.keys("_") == ["_"] and kv.keys("[a-z]") == ["[a-z]"] and kv.keys("\\") == ["\\"]
    assert len(kv.keys("*")) == len(HOSTILE_IDS)
    assert check_database(store).ok


FTS_QUERIES = ['"', '""', '"unterminated', "'", "a OR", "OR", "AND AND", "NOT", "NOT x", "NEAR(", "NEAR(a b, 2)",
               "*", "a*", "**", "^x", "text:foo", "messages_fts:x", "(((", ")", "{a b}", "-x", "+x", ":", "\\",
               "\x00", "a\ud800b", "\udfff", "😀", "x" * 10_000, " OR ".join(["w"] * 1000), "SELECT * FROM messages",
               "'; DROP TABLE messages; --", "%", "_", "[", "\u202e", "a\u0301"]


def test_full_text_syntax_in_a_query_never_raises_and_matches_words(stored):
    with Store(stored) as store:
        Session.open(store, "s1").append_message(text_message("q1", 'plan A OR plan B, NEAR(a b) and text:column'))
    with nothing_changes(stored), Store(stored) as store:
        session = Session.open(store, "s1")
        memory = Memory(store, agent_id="sdr")
        entries = SqliteSearchProvider(store)
        for query in FTS_QUERIES:
            assert isinstance(store.search(query, tenant_id="default"), list)
            assert isinstance(session.search(query), list)
            assert isinstance(memory.search(query, key="email:ana@example.com"), list)
            assert isinstance(entries.search(query), str)
        for query in ("OR", "NEAR(", "text:column", '"plan B"'):
            assert [hit["id"] for hit in session.search(query)] == ["q1"], query
