"""Importing OpenAI Agents SDK sessions: ``SQLiteSession`` databases written by the SDK's own ``Runner``.

The agent runs on ``ScriptedModel``, which answers without a network: a question gets a reasoning
summary and a call to the real ``get_weather`` function tool, the tool's result gets an answer quoting
it. ``test_agents_sdk_session.py`` runs the same agent on memorylab itself.
"""
import asyncio
import hashlib
import json
import sqlite3
from concurrent.futures import ThreadPoolExecutor

import pytest
import sqlite_utils
from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from langgraph.checkpoint.sqlite import SqliteSaver
from llm.migrations import migrate as migrate_llm_logs
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_reasoning_item import Summary

from memorylab import ImportFormatError, Session, Store, to_openai
from memorylab.importers import FORMATS, SourceProbe, detect_format, import_source
from memorylab.importers.openai_items import to_items
from memorylab.messages import to_utc_iso
from tests.helpers import count_rows

EXCHANGE = ["message", "reasoning", "function_call", "function_call_output", "message"]
"""The items one question leaves in the session: the question, the model's reasoning and tool call,
the tool's output and the answer."""


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"{city}: 18C and sunny"


class ScriptedModel(Model):
    """Calls ``get_weather`` for the city a question ends with, then answers with the tool's output.
    Every request's input is kept in ``requests``."""

    def __init__(self):
        self.requests = []

    async def get_response(self, system_instructions, input, *args, **kwargs):
        self.requests.append(input)
        turn = len(self.requests)
        last = input[-1]
        if last.get("type") == "function_call_output":
            output = [ResponseOutputMessage(
                id=f"msg_{turn}", type="message", role="assistant", status="completed",
                content=[ResponseOutputText(type="output_text", text=f"{last['output']}.", annotations=[])])]
        else:
            city = last["content"].rstrip("?").split()[-1]
            output = [
                ResponseReasoningItem(id=f"rs_{turn}", type="reasoning",
                                      summary=[Summary(type="summary_text", text=f"Look up {city}.")]),
                ResponseFunctionToolCall(id=f"fc_{turn}", type="function_call", call_id=f"call_{turn}",
                                         name="get_weather", arguments=json.dumps({"city": city})),
            ]
        usage = Usage(requests=1, input_tokens=20, output_tokens=5, total_tokens=25)
        return ModelResponse(output=output, usage=usage, response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError("these tests run without streaming")


def in_loop(coroutine):
    """Run a coroutine on an event loop in a thread of its own: a session-wide Playwright browser may
    keep a loop running on this one."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def run_agent(session, *questions, model=None):
    """Ask each question in turn with ``Runner.run(..., session=session)``; the final outputs."""
    agent = Agent(name="forecaster", instructions="Answer with the weather.", model=model or ScriptedModel(),
                  tools=[get_weather])

    async def conversation():
        return [(await Runner.run(agent, question, session=session,
                                  run_config=RunConfig(tracing_disabled=True))).final_output
                for question in questions]

    return in_loop(conversation())


def sdk_session(path, session_id, *questions, **tables):
    """An SDK ``SQLiteSession`` at ``path`` after the agent answered ``questions``, and its items."""
    session = SQLiteSession(session_id, path, **tables)
    try:
        run_agent(session, *questions)
        return in_loop(session.get_items())
    finally:
        session.close()


def opened(store, session_id="trip"):
    return Session.open(store, session_id, agent_id="openai-agents")


def assert_tool_calls_answered(request):
    """Every tool call of a chat request is answered by the tool message right after it."""
    for index, message in enumerate(request):
        for offset, call in enumerate(message.get("tool_calls") or (), 1):
            assert request[index + offset] == {"role": "tool", "tool_call_id": call["id"],
                                               "content": request[index + offset]["content"]}


def test_a_runner_session_imports_in_order_with_its_tool_calls_paired(store, tmp_path, far_from_utc):
    path = tmp_path / "agent.db"
    items = sdk_session(path, "trip", "Weather in Paris?", "And in Rome?")
    report = import_source(store, path)
    assert (report.format, [(s.session_id, s.messages_added) for s in report.sessions]) == (
        "openai-agents", [("trip", 10)])

    session = opened(store)
    history = session.get_history()
    assert [item for message in history for item in to_items(message)] == items
    assert [m["metadata"]["openai_type"] for m in history] == EXCHANGE * 2
    assert [m["role"] for m in history] == ["user", "assistant", "assistant", "tool", "assistant"] * 2
    assert [m["id"] for m in history] == [f"agent_messages-{row}" for row in range(1, 11)]
    call, result = history[2]["parts"][0], history[3]["parts"][0]
    assert (call["type"], call["toolName"], call["input"], call["state"]) == (
        "tool-get_weather", "get_weather", {"city": "Paris"}, "input-available")
    assert (result["type"], result["toolCallId"], result["output"]) == ("tool-get_weather", call["toolCallId"],
                                                                      "Paris: 18C and sunny")
    assert history[1]["parts"] == [{"type": "reasoning", "text": "Look up Paris."}]
    assert history[9]["parts"] == [{"type": "text", "text": "Rome: 18C and sunny."}]
    with sqlite3.connect(path) as conn:
        written = [row[0] for row in conn.execute("SELECT created_at FROM agent_messages ORDER BY id")]
    assert [m["created_at"] for m in history] == [f"{moment.replace(' ', 'T')}.000Z" for moment in written]
    assert all(m["tokens"] > 0 for m in history)
    assert history[0]["metadata"]["source_id"] == "agent_messages-1"
    assert to_utc_iso(session.info["metadata"]["created_at"]) <= history[0]["created_at"]
    assert {hit["id"] for hit in session.search("Rome")} == {"agent_messages-6", "agent_messages-10"}

    request = to_openai(history)
    assert [m["role"] for m in request] == ["user", "assistant", "assistant", "tool", "assistant"] * 2
    assert_tool_calls_answered(request)


def test_every_session_of_a_database_is_imported_whatever_its_tables_are_called(store, tmp_path):
    path = tmp_path / "custom.db"
    sdk_session(path, "paris", "Weather in Paris?", sessions_table="conversations", messages_table="items")
    oslo = sdk_session(path, "oslo", "Weather in Oslo?", sessions_table="conversations", messages_table="items")
    assert detect_format(path).name == "openai-agents"
    report = import_source(store, path)
    assert [(s.session_id, s.messages_added) for s in report.sessions] == [("paris", 5), ("oslo", 5)]
    history = opened(store, "oslo").get_history()
    assert [m["id"] for m in history] == [f"items-{row}" for row in range(6, 11)]
    assert [item for message in history for item in to_items(message)] == oslo


def test_importing_again_adds_nothing_and_a_grown_session_adds_only_its_new_items(store, tmp_path):
    path = tmp_path / "agent.db"
    sdk_session(path, "trip", "Weather in Paris?")
    assert import_source(store, path).messages_added == 5
    again = import_source(store, path)
    assert (again.messages_found, again.messages_added, again.sessions[0].status) == (5, 0, "unchanged")

    items = sdk_session(path, "trip", "And in Rome?")
    grown = import_source(store, path)
    assert (grown.messages_added, grown.sessions[0].status) == (5, "grew")
    history = opened(store).get_history()
    assert [item for message in history for item in to_items(message)] == items
    assert history[5]["parent_id"] == "agent_messages-5"
    assert count_rows(store, "messages") == 10


def test_an_item_the_sdk_popped_and_replaced_stays_behind_as_a_branch(store, tmp_path):
    path = tmp_path / "agent.db"
    sdk_session(path, "trip", "Weather in Paris?")
    import_source(store, path)
    session = SQLiteSession("trip", path)
    try:
        popped = in_loop(session.pop_item())
        run_agent(session, "And in Rome?")
        items = in_loop(session.get_items())
    finally:
        session.close()
    assert popped["content"][0]["text"] == "Paris: 18C and sunny."

    assert import_source(store, path).messages_added == 5
    imported = opened(store)
    assert [leaf["id"] for leaf in imported.get_leaves()] == ["agent_messages-10", "agent_messages-5"]
    assert [child["id"] for child in imported.get_branches("agent_messages-4")] == [
        "agent_messages-5", "agent_messages-6"]
    assert [item for message in imported.get_history() for item in to_items(message)] == items


@pytest.mark.parametrize("column, value, problem", [
    ("message_data", "{not json", "expected message_data to hold an item as JSON"),
    ("message_data", b'{"role": "user", "content": "in a blob"}', "expected message_data to hold an item as JSON text"),
    ("message_data", "[1, 2]", "a JSON object with a 'type' or a 'role'"),
    ("message_data", '{"content": "neither a type nor a role"}', "a JSON object with a 'type' or a 'role'"),
    ("message_data", '{"type": "function_call_output", "call_id": "", "output": "x"}', "toolCallId"),
    ("message_data", '{"type": "function_call", "call_id": ["x"], "name": "get_weather"}', "toolCallId"),
    ("created_at", "yesterday", "expected created_at as a timestamp"),
])
def test_a_malformed_row_is_refused_by_its_id_and_nothing_is_written(store, tmp_path, column, value, problem):
    path = tmp_path / "agent.db"
    sdk_session(path, "first", "Weather in Paris?")
    sdk_session(path, "second", "Weather in Oslo?")
    with sqlite3.connect(path) as conn:
        conn.execute(f"UPDATE agent_messages SET {column} = ? WHERE id = 8", (value,))
    with pytest.raises(ImportFormatError, match=r"agent\.db, agent_messages row 8: ") as refused:
        import_source(store, path)
    assert problem in str(refused.value) and "nothing was imported" in str(refused.value)
    assert (count_rows(store, "sessions"), count_rows(store, "messages")) == (0, 0)


def test_importing_never_writes_to_the_database(store, tmp_path):
    path = tmp_path / "agent.db"
    sdk_session(path, "trip", "Weather in Paris?")
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    import_source(store, path)
    import_source(store, path, dry_run=True)
    # SQLite may add an empty -wal and a -shm beside a WAL database it reads; the database stays as it was.
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert not (tmp_path / "agent.db-wal").exists() or not (tmp_path / "agent.db-wal").stat().st_size


def test_detection_tells_an_sdk_database_from_other_sqlite_files(tmp_path):
    ours = tmp_path / "agent.db"
    sdk_session(ours, "trip", "Weather in Paris?")
    checkpoints = tmp_path / "checkpoints.db"
    with sqlite3.connect(checkpoints, check_same_thread=False) as conn:
        SqliteSaver(conn).setup()
    llm_logs = tmp_path / "logs.db"
    migrate_llm_logs(sqlite_utils.Database(llm_logs))
    memorylab_store = tmp_path / "lab.db"
    Store(memorylab_store).close()
    lookalike = tmp_path / "lookalike.db"
    with sqlite3.connect(lookalike) as conn:
        conn.execute("CREATE TABLE agent_messages (id INTEGER PRIMARY KEY, session_id TEXT, body TEXT)")
    not_sqlite = tmp_path / "notes.db"
    not_sqlite.write_text("agent_messages message_data session_id")
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps([{"role": "user", "content": "message_data"}]))

    assert detect_format(ours) is FORMATS["openai-agents"]
    for other in (checkpoints, llm_logs, memorylab_store, lookalike, not_sqlite, chat):
        assert not FORMATS["openai-agents"].detect(SourceProbe(other)), other.name
