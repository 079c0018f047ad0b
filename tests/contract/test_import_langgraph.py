"""Importing LangGraph checkpoints: a real StateGraph with a real ToolNode, checkpointed by SqliteSaver.

The "weather" thread runs two turns, is forked from the checkpoint that ended the first turn (a new
question there), and has its second question edited on another fork (``update_state`` with the same
message id); the "greeting" thread is a second conversation in the same file.
"""
import asyncio
import hashlib
import json
import shutil
import sqlite3
import sys
from typing import Annotated, TypedDict

import pytest
from agents import SQLiteSession
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from memorylab import ImportFormatError, Session, to_openai
from memorylab.importers import FORMATS, SourceProbe, detect_format, import_source
from memorylab.importers import langgraph as langgraph_format
from tests.helpers import count_rows

REPLIES = {
    "Weather in Paris?": {"tool": {"city": "Paris"}},
    "And Rome?": "Rome: 24C and clear.",
    "And Madrid?": "Madrid: 30C.",
    "Thanks!": "You're welcome.",
    "Hi": "Hello! How can I help?",
    "Bye": "Goodbye.",
}


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return {"Paris": "18C, sunny"}.get(city, "unknown")


def scripted_model(state):
    """A chat model's node: asks for the weather tool, answers a tool result, or replies from the script."""
    last = state["messages"][-1]
    if isinstance(last, ToolMessage):
        return {"messages": [AIMessage(f"It is {last.content} there.", response_metadata={"model_name": "scripted-1"},
                                       usage_metadata={"input_tokens": 30, "output_tokens": 6, "total_tokens": 36})]}
    reply = REPLIES[last.content]
    if isinstance(reply, dict):
        call = {"name": "weather", "args": reply["tool"], "id": "call_paris"}
        return {"messages": [AIMessage("", tool_calls=[call])]}
    return {"messages": [AIMessage(reply, response_metadata={"model_name": "scripted-1"})]}


def agent_graph(saver):
    builder = StateGraph(MessagesState)
    builder.add_node("agent", scripted_model)
    builder.add_node("tools", ToolNode([weather]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=saver)


def thread(thread_id):
    return {"configurable": {"thread_id": thread_id}}


def ask(path, thread_id, text):
    with SqliteSaver.from_conn_string(str(path)) as saver:
        agent_graph(saver).invoke({"messages": [HumanMessage(text)]}, thread(thread_id))


@pytest.fixture
def checkpoints(tmp_path):
    path = tmp_path / "checkpoints.sqlite"
    with SqliteSaver.from_conn_string(str(path)) as saver:
        graph = agent_graph(saver)
        graph.invoke({"messages": [HumanMessage("Weather in Paris?")]}, thread("weather"))
        graph.invoke({"messages": [HumanMessage("And Rome?")]}, thread("weather"))
        history = list(graph.get_state_history(thread("weather")))
        end_of_first_turn = next(s for s in history if not s.next and len(s.values["messages"]) == 4)
        graph.invoke({"messages": [HumanMessage("Thanks!")]}, end_of_first_turn.config)
        rome_asked = next(s for s in history
                          if s.next == ("agent",) and s.values["messages"][-1].content == "And Rome?")
        rome = rome_asked.values["messages"][-1]
        edited = graph.update_state(rome_asked.config, {"messages": [HumanMessage("And Madrid?", id=rome.id)]})
        graph.invoke(None, edited)
        graph.invoke({"messages": [HumanMessage("Hi")]}, thread("greeting"))
    return path


def transcript(messages):
    return [(m["role"], m["parts"][0].get("text") or m["parts"][0].get("output") or m["parts"][0]["type"])
            for m in messages]


def opened(store, session_id):
    return Session.open(store, session_id, agent_id="langgraph")


def test_each_thread_is_a_session_and_each_fork_a_branch_sharing_its_earlier_messages(store, checkpoints):
    report = import_source(store, checkpoints)
    assert report.format == "langgraph"
    assert [(s.session_id, s.messages_added, s.branches) for s in report.sessions] == [("greeting", 2, 1),
                                                                                       ("weather", 10, 3)]
    session = opened(store, "weather")
    assert session.info["metadata"]["source"]["id"] == "weather"
    paths = sorted(transcript(session.get_history(leaf["id"])) for leaf in session.get_leaves())
    first_turn = [("user", "Weather in Paris?"), ("assistant", "tool-weather"), ("tool", "18C, sunny"),
                  ("assistant", "It is 18C, sunny there.")]
    assert paths == [
        first_turn + [("user", "And Madrid?"), ("assistant", "Madrid: 30C.")],
        first_turn + [("user", "And Rome?"), ("assistant", "Rome: 24C and clear.")],
        first_turn + [("user", "Thanks!"), ("assistant", "You're welcome.")],
    ]
    prefixes = {tuple(m["id"] for m in session.get_history(leaf["id"])[:4]) for leaf in session.get_leaves()}
    assert len(prefixes) == 1
    forks = session.get_branches(prefixes.pop()[-1])
    assert sorted(transcript(forks)) == [("user", "And Madrid?"), ("user", "And Rome?"), ("user", "Thanks!")]
    assert transcript(opened(store, "greeting").get_history()) == [("user", "Hi"),
                                                                   ("assistant", "Hello! How can I help?")]


def test_a_message_edited_on_a_fork_is_its_own_node_keeping_the_langchain_id(store, checkpoints):
    import_source(store, checkpoints)
    session = opened(store, "weather")
    asked = {m["parts"][0]["text"]: m for m in session.get_all_messages() if m["role"] == "user"}
    rome, madrid = asked["And Rome?"], asked["And Madrid?"]
    assert madrid["metadata"]["source_id"] == rome["metadata"]["source_id"] == rome["id"]
    assert madrid["id"].startswith(rome["id"] + "~") and madrid["parent_id"] == rome["parent_id"]


def test_tool_calls_pair_with_their_results_and_source_facts_are_kept(store, checkpoints):
    import_source(store, checkpoints)
    history = opened(store, "weather").get_history()
    call, result, answer = history[1]["parts"][0], history[2]["parts"][0], history[3]
    assert (call["type"], call["toolCallId"], call["input"], call["state"]) == (
        "tool-weather", "call_paris", {"city": "Paris"}, "input-available")
    assert (result["type"], result["toolCallId"], result["output"], result["state"]) == (
        "tool-weather", "call_paris", "18C, sunny", "output-available")
    request = to_openai(history)
    assert request[1]["tool_calls"][0]["id"] == request[2]["tool_call_id"] == "call_paris"
    assert [m["role"] for m in request] == ["user", "assistant", "tool", "assistant", "user", "assistant"]
    assert answer["metadata"]["model"] == "scripted-1"
    assert answer["metadata"]["usage"] == {"prompt_tokens": 30, "completion_tokens": 6, "total_tokens": 36}

    with SqliteSaver.from_conn_string(str(checkpoints)) as saver:
        states = list(agent_graph(saver).get_state_history(thread("weather")))
    first_with_answer = min(s.config["configurable"]["checkpoint_id"] for s in states
                            if len(s.values.get("messages", ())) >= 4)
    assert answer["metadata"]["source_id"] == states[0].values["messages"][3].id
    assert answer["metadata"]["checkpoint_id"] == first_with_answer
    assert answer["created_at"].endswith("Z")


def test_importing_again_adds_nothing_and_another_turn_adds_only_its_messages(store, checkpoints):
    before = hashlib.sha256(checkpoints.read_bytes()).hexdigest()
    first = import_source(store, checkpoints)
    again = import_source(store, checkpoints)
    assert (again.messages_found, again.messages_added) == (first.messages_found, 0)
    assert [s.status for s in again.sessions] == ["unchanged", "unchanged"]
    assert hashlib.sha256(checkpoints.read_bytes()).hexdigest() == before

    ask(checkpoints, "greeting", "Bye")
    grown = import_source(store, checkpoints)
    assert [(s.session_id, s.status, s.messages_added) for s in grown.sessions] == [("greeting", "grew", 2),
                                                                                    ("weather", "unchanged", 0)]
    assert transcript(opened(store, "greeting").get_history())[2:] == [("user", "Bye"), ("assistant", "Goodbye.")]
    assert count_rows(store, "messages") == first.messages_added + 2


def test_a_long_thread_converts_each_message_once(store, tmp_path, monkeypatch):
    path = tmp_path / "long.sqlite"
    with SqliteSaver.from_conn_string(str(path)) as saver:
        graph = agent_graph(saver)
        for _ in range(60):
            graph.invoke({"messages": [HumanMessage("Hi")]}, thread("long"))
        checkpoint_count = len(list(graph.get_state_history(thread("long"))))
    converted = []
    convert = langgraph_format._Thread._convert
    monkeypatch.setattr(langgraph_format._Thread, "_convert",
                        lambda self, message, *args: converted.append(message.id) or convert(self, message, *args))
    report = import_source(store, path)
    assert checkpoint_count == 180 and report.messages_added == 120
    assert len(converted) == len(set(converted)) == 120


def damage(path, thread_id, where):
    """Overwrite one checkpoint's blob with bytes msgpack cannot read; returns its id."""
    conn = sqlite3.connect(path)
    with conn:
        checkpoint_id = conn.execute(
            f"SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? ORDER BY checkpoint_id {where} LIMIT 1",
            (thread_id,)).fetchone()[0]
        conn.execute("UPDATE checkpoints SET checkpoint = x'c1' WHERE checkpoint_id = ?", (checkpoint_id,))
    conn.close()
    return checkpoint_id


def test_a_damaged_checkpoint_is_refused_naming_thread_and_checkpoint_and_nothing_is_written(store, checkpoints):
    # "greeting" is read first and would be written, so the refusal must roll it back.
    checkpoint_id = damage(checkpoints, "weather", "DESC")
    with pytest.raises(ImportFormatError) as refused:
        import_source(store, checkpoints)
    message = str(refused.value)
    assert str(checkpoints) in message and "thread 'weather'" in message and checkpoint_id in message
    assert "nothing was imported" in message
    assert count_rows(store, "messages") == 0 and count_rows(store, "sessions") == 0


def test_detection_knows_sqlitesaver_files_and_only_them(tmp_path, checkpoints):
    assert detect_format(checkpoints) is FORMATS["langgraph"]
    copy = tmp_path / "copy.db"
    shutil.copy(checkpoints, copy)
    assert detect_format(copy) is FORMATS["langgraph"]

    agents_db = tmp_path / "agents.db"
    asyncio.run(SQLiteSession("s", str(agents_db)).add_items([{"role": "user", "content": "hi"}]))
    lookalike = tmp_path / "lookalike.db"
    conn = sqlite3.connect(lookalike)
    conn.executescript("CREATE TABLE checkpoints (id INTEGER, state TEXT); CREATE TABLE writes (id INTEGER);")
    conn.close()
    messages = tmp_path / "chat.json"
    messages.write_text(json.dumps([{"role": "user", "content": "hi"}]))
    for other in (agents_db, lookalike, messages):
        assert not FORMATS["langgraph"].detect(SourceProbe(other)), other
    assert detect_format(messages) is FORMATS["openai-messages"]


def test_a_messages_channel_kept_as_deltas_is_refused_by_name(store, tmp_path):
    class DeltaState(TypedDict):
        messages: Annotated[list, DeltaChannel(
            lambda state, writes: [*(state or []), *(m for batch in writes for m in batch)])]

    builder = StateGraph(DeltaState)
    builder.add_node("agent", lambda state: {"messages": [AIMessage("Hello!")]})
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    path = tmp_path / "delta.sqlite"
    with SqliteSaver.from_conn_string(str(path)) as saver:
        builder.compile(checkpointer=saver).invoke({"messages": [HumanMessage("Hi")]}, thread("deltas"))
    with pytest.raises(ImportFormatError, match=r"thread 'deltas', checkpoint .*DeltaChannel"):
        import_source(store, path)
    assert count_rows(store, "sessions") == 0


def test_without_langgraph_installed_detection_still_works_and_reading_says_what_to_install(
        store, checkpoints, monkeypatch):
    monkeypatch.setitem(sys.modules, "langgraph.checkpoint.serde.jsonplus", None)
    assert detect_format(checkpoints) is FORMATS["langgraph"]
    with pytest.raises(ImportFormatError, match="pip install langgraph-checkpoint-sqlite"):
        import_source(store, checkpoints)
