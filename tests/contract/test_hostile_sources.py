"""Hostile sources: every format, given malformed input, refuses it with an ImportFormatError naming the
file and the line or row, and writes nothing.

The SQLite sources start as the real library wrote them (the Agents SDK's ``SQLiteSession``, llm's own
migrations, LangGraph's ``SqliteSaver``) and are then damaged the way a hand edit or a bad tool would:
wrong types where objects are expected, bytes that are not UTF-8, JSON nested deeper than a decoder
recurses, missing keys, null where a string is expected.
"""
import asyncio
import json
import re
import shutil
import sqlite3

import pytest
from agents import SQLiteSession
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.sqlite import SqliteSaver

from memorylab import ImportFormatError, Store
from memorylab.importers import import_source
from tests.helpers import database_rows

DEEP = "[" * 100_000 + "]" * 100_000
"""JSON nested far deeper than Python's decoder recurses."""


# -- text formats -------------------------------------------------------------------------------------

def chat_lines(path, second_line):
    """An OpenAI chat JSONL whose first line is a good conversation and whose second is ``second_line``."""
    good = json.dumps({"id": "good", "messages": [{"role": "user", "content": "hi"}]}).encode()
    path.write_bytes(good + b"\n" + (second_line if isinstance(second_line, bytes) else second_line.encode()) + b"\n")
    return path


def chat_message(**message):
    return json.dumps({"id": "bad", "messages": [message]})


def transcript(path, *entries):
    """A Claude Code transcript: a user entry, then ``entries`` (JSON text or raw bytes), one a line."""
    first = {"type": "user", "uuid": "u1", "parentUuid": None, "sessionId": "s", "timestamp": "2025-01-01T00:00:00Z",
             "message": {"role": "user", "content": "hi"}}
    lines = [json.dumps(first).encode()] + [e if isinstance(e, bytes) else e.encode() for e in entries]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def entry(kind, uuid, parent, content, **fields):
    return json.dumps({"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": "s",
                       "timestamp": "2025-01-01T00:00:01Z",
                       "message": {"role": "assistant" if kind == "assistant" else "user", "content": content},
                       **fields})


def compaction(path, metadata):
    boundary = json.dumps({"type": "system", "subtype": "compact_boundary", "uuid": "b1", "parentUuid": None,
                           "logicalParentUuid": "u1", "sessionId": "s", "compactMetadata": metadata})
    summary = entry("user", "u2", "b1", "the summary", isCompactSummary=True)
    return transcript(path, boundary, summary)


TEXT_SOURCES = {
    "chat: bytes that are not UTF-8": (lambda p: chat_lines(p, b'{"messages": [{"role": "user", "content": "\xff"}]}'),
                                       "line 2", "openai-messages"),
    "chat: JSON nested too deeply": (lambda p: chat_lines(p, '{"messages": ' + DEEP + "}"), "line 2"),
    "chat: tool_calls that are not a list": (
        lambda p: chat_lines(p, chat_message(role="assistant", content="", tool_calls=5)), "line 2, messages[0]"),
    "chat: a tool call whose function is a string": (
        lambda p: chat_lines(p, chat_message(role="assistant", content="", tool_calls=[{"id": "c", "function": "f"}])),
        "line 2, messages[0]"),
    "chat: metadata that is a string": (lambda p: chat_lines(p, chat_message(role="user", content="x", metadata="m")),
                                        "line 2, messages[0]"),
    "chat: a null role": (lambda p: chat_lines(p, chat_message(role=None, content="x")), "line 2", "openai-messages"),
    "chat: a whole file nested too deeply": (lambda p: p.write_text("[" + DEEP + "]") and p, ""),
    "transcript: bytes that are not UTF-8": (lambda p: transcript(p, b'{"type": "user", "uuid": "\xff"}'), "line 2",
                                             "claude-code"),
    "transcript: JSON nested too deeply": (lambda p: transcript(p, '{"type": "user", "x": ' + DEEP + "}"), "line 2"),
    "transcript: a tool call whose id is a list": (
        lambda p: transcript(p, entry("assistant", "a1", "u1", [{"type": "tool_use", "id": ["c"], "name": "f",
                                                                  "input": {}}])), "line 2"),
    "transcript: a tool result naming a call by an object": (
        lambda p: transcript(p, entry("user", "u2", "u1", [{"type": "tool_result", "tool_use_id": {"id": "c"}}])),
        "line 2"),
    "transcript: content blocks of null": (lambda p: transcript(p, entry("user", "u2", "u1", [None])), "line 2"),
    "transcript: compaction facts that are a string": (lambda p: compaction(p, "auto"), "line 3"),
    "transcript: a timestamp that is a number": (
        lambda p: transcript(p, entry("user", "u2", "u1", "later", timestamp=5)), "line 2"),
    "export: JSON nested too deeply": (
        lambda p: p.write_text('{"format": "memorylab.session", "session": ' + DEEP + "}") and p, ""),
}


# -- SQLite sources -----------------------------------------------------------------------------------

def agents_sdk(path, sql, *params):
    """An Agents SDK database holding session "trip" (two items), then changed by ``sql``."""
    session = SQLiteSession("trip", str(path))
    asyncio.run(session.add_items([{"role": "user", "content": "Weather in Paris?"},
                                   {"role": "assistant", "content": "Sunny."}]))
    session.close()
    with sqlite3.connect(path) as conn:
        conn.execute(sql, params)
    conn.close()
    return path


def llm_logs(path, empty, *statements):
    """llm's logs.db with one legacy response (r1, a tool call c1) and one thread (t1: m1 <- m2 with part 1),
    then ``statements``."""
    shutil.copyfile(empty, path)
    with sqlite3.connect(path) as conn:
        conn.executescript("""
            INSERT INTO conversations VALUES ('c', 'chat', 'gpt');
            INSERT INTO responses (id, model, prompt, response, conversation_id, datetime_utc)
                VALUES ('r1', 'gpt', 'hi', 'hello', 'c', '2025-01-01T00:00:00');
            INSERT INTO tool_calls (id, response_id, name, arguments, tool_call_id) VALUES (1, 'r1', 'f', '{}', 'c1');
            INSERT INTO messages VALUES ('m1', NULL, 'user', NULL), ('m2', 'm1', 'assistant', NULL);
            INSERT INTO threads VALUES ('t1', 'thread', 'm2', NULL, '2025-01-01T00:00:00');
            INSERT INTO parts (id, message_hash, position, type, text, payload)
                VALUES (1, 'm1', 0, 'text', 'hi', NULL), (2, 'm2', 0, 'text', 'hello', NULL);
        """)
        for sql in statements:
            conn.execute(sql)
    conn.close()
    return path


def checkpoints(path, messages):
    """A SqliteSaver database holding one checkpoint of thread "t" whose messages channel is ``messages``."""
    with SqliteSaver.from_conn_string(str(path)) as saver:
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"messages": messages}
        checkpoint["channel_versions"] = {"messages": 1}
        saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, checkpoint, {}, {"messages": 1})
    return path


NOT_UTF8 = "CAST(x'7b22726f6c65223a22ff227d' AS TEXT)"
"""``{"role":"<0xff>"}`` stored as TEXT: bytes that are not UTF-8."""

SQLITE_SOURCES = {
    "sdk: an item nested too deeply": (
        lambda p, _: agents_sdk(p, "UPDATE agent_messages SET message_data = ? WHERE id = 2", DEEP),
        "agent_messages row 2"),
    "sdk: an item that is not UTF-8": (
        lambda p, _: agents_sdk(p, f"UPDATE agent_messages SET message_data = {NOT_UTF8} WHERE id = 2"),
        "agent_messages row 2"),
    "sdk: an item that is a number": (
        lambda p, _: agents_sdk(p, "UPDATE agent_messages SET message_data = '5' WHERE id = 2"),
        "agent_messages row 2"),
    "sdk: a session id that is not UTF-8": (
        lambda p, _: agents_sdk(p, f"UPDATE agent_messages SET session_id = {NOT_UTF8} WHERE id = 2"),
        "agent_messages row 2"),
    "sdk: a call id that is an object": (
        lambda p, _: agents_sdk(p, "UPDATE agent_messages SET message_data = ? WHERE id = 2",
                                json.dumps({"type": "function_call", "call_id": {"id": 1}, "name": "f"})),
        "agent_messages row 2"),
    "llm: a prompt that is a blob": (
        lambda p, empty: llm_logs(p, empty, "UPDATE responses SET prompt = x'68'"), "responses row r1"),
    "llm: a response that is not UTF-8": (
        lambda p, empty: llm_logs(p, empty, f"UPDATE responses SET response = {NOT_UTF8}"), "responses row r1"),
    "llm: tool call arguments nested too deeply": (
        lambda p, empty: llm_logs(p, empty, f"UPDATE tool_calls SET arguments = '{DEEP}'"), "tool_calls row 1"),
    "llm: a tool name that is a blob": (
        lambda p, empty: llm_logs(p, empty, "UPDATE tool_calls SET name = x'ff'"), ""),  # refused by the query
    "llm: a text reference that is a number": (
        lambda p, empty: llm_logs(p, empty, "UPDATE parts SET text = NULL, payload = '{\"text_ref\": 5}' WHERE id = 2"),
        "parts row 2"),
    "llm: a part payload nested too deeply": (
        lambda p, empty: llm_logs(p, empty, f"UPDATE parts SET payload = '{DEEP}' WHERE id = 2"), "parts row 2"),
    "llm: a role that is not UTF-8": (
        lambda p, empty: llm_logs(p, empty, f"UPDATE messages SET role = {NOT_UTF8} WHERE hash = 'm2'"),
        "messages row m2"),
    "langgraph: a message whose content is a number": (
        lambda p, _: checkpoints(p, [HumanMessage("hi", id="h1"), {"role": "user", "content": 5}]), "checkpoint"),
    "langgraph: a content block whose type is a list": (
        lambda p, _: checkpoints(p, [HumanMessage("hi", id="h1"), AIMessage(content=[{"type": ["text"]}], id="a1")]),
        "checkpoint"),
    "langgraph: a tool call whose args are a string": (
        lambda p, _: checkpoints(p, [HumanMessage("hi", id="h1"),
                                     {"role": "assistant", "content": "", "tool_calls": [{"name": "f", "args": "x"}]}]),
        "checkpoint"),
}


def refused(store_target, path, where, format="auto"):
    """Import ``path``: an ImportFormatError naming the file and ``where``, and not a row changed."""
    with Store(store_target) as store:
        before = database_rows(store_target)
        for dry_run in (True, False):
            with pytest.raises(ImportFormatError) as refusal:
                import_source(store, path, format=format, dry_run=dry_run)
            message = str(refusal.value)
            assert str(path) in message, message
            assert re.search(rf"{re.escape(str(path))}, [^:]*{re.escape(where)}" if where else re.escape(str(path)),
                             message), message
        assert database_rows(store_target) == before


@pytest.mark.parametrize("case", list(TEXT_SOURCES))
def test_a_malformed_text_source_is_refused_naming_its_line(store_target, tmp_path, case):
    build, where, *format = TEXT_SOURCES[case]
    suffix = ".json" if "whole file" in case or "export" in case else ".jsonl"
    refused(store_target, build(tmp_path / f"source{suffix}"), where, *format)


@pytest.mark.parametrize("case", list(SQLITE_SOURCES))
def test_a_malformed_sqlite_source_is_refused_naming_its_row(store_target, tmp_path, empty_logs, case):
    build, where = SQLITE_SOURCES[case]
    refused(store_target, build(tmp_path / "source.db", empty_logs), where)
