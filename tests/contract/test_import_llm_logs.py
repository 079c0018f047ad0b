"""Importing Simon Willison's ``llm`` logs databases, in both layouts llm has written.

The current layout (threads, turns, messages, parts) is written here by the installed llm 0.36
itself: ``CannedModel`` answers from a script, asks for the real ``clock`` function when it is given
tools, and every response is logged with llm's own ``log_to_db``. The earlier layout (conversations,
responses, tool_calls, tool_results) comes from dumps that llm 0.19 and 0.31.1 wrote
(``tests/data/llm_logs/README.md``).
"""
import asyncio
import hashlib
import shutil
import sqlite3
from pathlib import Path

import llm
import pytest
import sqlite_utils
from agents import SQLiteSession
from langchain_core.messages import AIMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, MessagesState, StateGraph
from llm.cli import load_conversation
from llm.logs import LogStore
from llm.plugins import pm

from memorylab import ImportFormatError, Session, Store, to_openai
from memorylab.importers import FORMATS, SourceProbe, detect_format, import_source
from tests.helpers import count_rows

DUMPS = Path(__file__).resolve().parents[1] / "data" / "llm_logs"
SYSTEM = "You are terse."


def clock(zone: str) -> str:
    """The time in a zone."""
    return f"12:00 {zone}"


class CannedModel(llm.Model):
    """Asks for the time when it has tools and no result yet, else answers the last prompt."""

    model_id = "canned"
    supports_tools = True

    def execute(self, prompt, stream, response, conversation):
        if prompt.tools and not prompt.tool_results:
            response.add_tool_call(llm.ToolCall(name="clock", arguments={"zone": "UTC"}))
            response.set_usage(input=30, output=7)
            return
        answer = f"Canned answer to: {prompt.prompt or 'the tool result'}"
        response.set_usage(input=12, output=len(answer.split()))
        yield answer


class CannedPlugin:
    """Registers ``CannedModel`` the way an installed plugin would, so ``llm -c`` can find it."""

    @llm.hookimpl
    def register_models(self, register):
        register(CannedModel())


@pytest.fixture(autouse=True)
def llm_user_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("LLM_USER_PATH", str(tmp_path / "llm-user"))


def log(db, response):
    response.text()
    response.log_to_db(db)


@pytest.fixture
def logs(tmp_path, empty_logs):
    """A logs.db of llm 0.36 holding one conversation: a greeting, then a question answered with a tool."""
    path = tmp_path / "logs.db"
    shutil.copyfile(empty_logs, path)
    db = sqlite_utils.Database(path)
    conversation = CannedModel().conversation()
    log(db, conversation.prompt("Hello there", system=SYSTEM))
    log(db, conversation.chain("What time is it?", tools=[llm.Tool.function(clock)]))
    db.close()
    return path, conversation


def legacy(tmp_path, dump):
    """The database an older llm release left, loaded from its dump."""
    path = tmp_path / f"{Path(dump).stem}.db"
    conn = sqlite3.connect(path)
    conn.executescript((DUMPS / dump).read_text(encoding="utf-8"))
    conn.close()
    return path


def source_rows(path, sql, *params):
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def transcript(messages):
    return [(m["role"], [p.get("text") or p.get("output") or p.get("input") for p in m["parts"]]) for m in messages]


def test_a_conversation_llm_036_logged_imports_in_order_with_its_tool_call_paired(store, logs):
    path, conversation = logs
    report = import_source(store, path)
    assert report.format == "llm" and [s.session_id for s in report.sessions] == [conversation.id]

    session = Session.open(store, conversation.id, agent_id="llm")
    assert session.info["metadata"]["title"] == "Hello there"
    history = session.get_history()
    assert transcript(history) == [
        ("system", [SYSTEM]),
        ("user", ["Hello there"]),
        ("assistant", ["Canned answer to: Hello there"]),
        ("user", ["What time is it?"]),
        ("assistant", [{"zone": "UTC"}]),
        ("tool", ["12:00 UTC"]),
        ("assistant", ["Canned answer to: the tool result"]),
    ]
    request = to_openai(history)
    call = request[4]["tool_calls"][0]
    assert call["function"]["name"] == "clock" and call["id"].startswith("tc_")
    assert request[5] == {"role": "tool", "tool_call_id": call["id"], "content": "12:00 UTC"}

    turns = source_rows(path, "SELECT id, tip_message_hash, input_tokens, output_tokens, datetime_utc FROM turns "
                              "ORDER BY id")
    assert len(turns) == 3
    answers = [history[2], history[4], history[6]]
    for (turn_id, tip, input_tokens, output_tokens, created), message in zip(turns, answers):
        assert message["id"] == tip and message["metadata"]["source_id"] == tip
        assert message["metadata"]["model"] == "canned" and message["metadata"]["turn_id"] == turn_id
        assert message["metadata"]["usage"] == {"prompt_tokens": input_tokens, "completion_tokens": output_tokens,
                                                "total_tokens": input_tokens + output_tokens}
        assert isinstance(message["metadata"]["latency_ms"], int)
        assert message["created_at"][:19] == created[:19]
    assert "usage" not in history[1]["metadata"] and "usage" not in history[5]["metadata"]


@pytest.mark.parametrize("dump", ["llm-0.19.sql", "llm-0.31.1.sql"])
def test_a_conversation_an_older_release_logged_imports_prompt_by_prompt(store, tmp_path, dump, far_from_utc):
    path = legacy(tmp_path, dump)
    (conversation_id, name), = source_rows(path, "SELECT id, name FROM conversations")
    responses = source_rows(path, "SELECT id, input_tokens, output_tokens, datetime_utc FROM responses ORDER BY id")
    import_source(store, path)

    session = Session.open(store, conversation_id, agent_id="llm")
    assert session.info["metadata"]["title"] == name == "Hello there"
    history = session.get_history()
    expected = [
        ("system", [SYSTEM]),
        ("user", ["Hello there"]),
        ("assistant", ["Canned answer to: Hello there"]),
        ("user", ["And the weather?"]),
        ("assistant", ["Canned answer to: And the weather?"]),
    ]
    if dump == "llm-0.31.1.sql":  # llm logs tool calls from 0.26 on
        expected += [
            ("user", ["What time is it?"]),
            ("assistant", [{"zone": "UTC"}]),
            ("tool", ["12:00 UTC"]),
            ("assistant", ["Canned answer to: the tool result"]),
        ]
        request = to_openai(history)
        assert request[6]["tool_calls"][0]["id"] == "call_1"
        assert request[7] == {"role": "tool", "tool_call_id": "call_1", "content": "12:00 UTC"}
    assert transcript(history) == expected

    answers = [m for m in history if m["role"] == "assistant"]
    assert len(answers) == len(responses)
    for (response_id, input_tokens, output_tokens, created), answer in zip(responses, answers):
        assert answer["id"] == f"{response_id}#response" and answer["metadata"]["source_id"] == response_id
        assert answer["metadata"]["model"] == "canned"
        assert answer["metadata"]["usage"]["prompt_tokens"] == input_tokens
        assert answer["metadata"]["usage"]["completion_tokens"] == output_tokens
        # llm 0.19 wrote datetime_utc without an offset: it is UTC, not local time
        assert answer["created_at"][:19] == created[:19]


def test_importing_again_adds_nothing_and_another_logged_turn_adds_only_it(store, logs):
    path, conversation = logs
    first = import_source(store, path)
    assert first.messages_added == 7
    assert import_source(store, path).messages_added == 0

    db = sqlite_utils.Database(path)
    log(db, conversation.prompt("Thanks"))
    db.close()
    grown = import_source(store, path)
    assert grown.messages_added == 2 and grown.sessions[0].status == "grew"
    history = Session.open(store, conversation.id, agent_id="llm").get_history()
    assert transcript(history[-3:]) == [("assistant", ["Canned answer to: the tool result"]),
                                        ("user", ["Thanks"]), ("assistant", ["Canned answer to: Thanks"])]


def test_a_conversation_continued_after_the_upgrade_is_imported_once(store, tmp_path):
    """llm 0.36 continuing (``llm -c``) a conversation an older release logged writes a thread with
    the conversation's id that repeats the older history; only the new turn is added, under it."""
    path = legacy(tmp_path, "llm-0.31.1.sql")
    assert import_source(store, path).messages_added == 9
    (conversation_id,), = source_rows(path, "SELECT id FROM conversations")
    imported = [m["id"] for m in Session.open(store, conversation_id, agent_id="llm").get_history()]

    pm.register(CannedPlugin(), name="canned-plugin")
    try:
        conversation = load_conversation(None, database=str(path))
        db = sqlite_utils.Database(path)
        log(db, conversation.prompt("And tomorrow?"))
        db.close()
    finally:
        pm.unregister(name="canned-plugin")
    assert conversation.id == conversation_id
    assert source_rows(path, "SELECT COUNT(*) FROM threads JOIN turns ON turns.thread_id = threads.id "
                             "WHERE threads.id = ?", conversation_id) == [(1,)]
    assert source_rows(path, "SELECT COUNT(*) FROM messages") == [(13,)]  # the older history again, and the turn

    after = import_source(store, path)
    assert [s.session_id for s in after.sessions] == [conversation_id] and after.messages_added == 2
    session = Session.open(store, conversation_id, agent_id="llm")
    assert len(session.get_leaves()) == 1
    history = session.get_history()
    assert [m["id"] for m in history[:-2]] == imported
    assert transcript(history[-2:]) == [("user", ["And tomorrow?"]), ("assistant", ["Canned answer to: And tomorrow?"])]
    assert history[-1]["metadata"]["thread_id"] == conversation_id


def test_a_forked_thread_becomes_a_branch_of_the_thread_it_came_from(store, logs):
    path, conversation = logs
    db = sqlite_utils.Database(path)
    logs_store = LogStore(db)
    greeting = logs_store.thread_messages(conversation.id)[:3]  # system, user, the first answer
    fork = logs_store.fork(logs_store.ensure_chain(greeting), name="a fork", forked_from=conversation.id)
    response = CannedModel().prompt("Something else", messages=greeting)
    response.text()
    logs_store.log(response, thread_id=fork)
    db.close()

    report = import_source(store, path)
    assert [s.session_id for s in report.sessions] == [conversation.id]
    session = Session.open(store, conversation.id, agent_id="llm")
    leaves = {m["metadata"]["thread_id"]: m["id"] for m in session.get_leaves()}
    assert set(leaves) == {conversation.id, fork}
    main, branch = session.get_history(leaves[conversation.id]), session.get_history(leaves[fork])
    assert len(main) == 7 and transcript(branch) == [
        ("system", [SYSTEM]), ("user", ["Hello there"]), ("assistant", ["Canned answer to: Hello there"]),
        ("user", ["Something else"]), ("assistant", ["Canned answer to: Something else"]),
    ]
    assert [m["id"] for m in main[:3]] == [m["id"] for m in branch[:3]]
    assert [m["id"] for m in session.get_branches(branch[2]["id"])] == [main[3]["id"], branch[3]["id"]]


@pytest.mark.parametrize("table, damage, where", [
    ("current", "UPDATE parts SET payload = '{\"name\": \"clock\", broken' WHERE type = 'tool_call'", r"parts row \d+"),
    ("current", "UPDATE turns SET datetime_utc = 'yesterday'", r"turns row \w+"),
    ("legacy", "UPDATE tool_calls SET arguments = 'not json'", "tool_calls row 1"),
    ("legacy", "UPDATE responses SET datetime_utc = 'noon' WHERE prompt = 'And the weather?'", r"responses row \w+"),
])
def test_a_damaged_row_is_refused_by_table_and_row_and_nothing_is_written(store, tmp_path, request, table, damage,
                                                                           where):
    path = request.getfixturevalue("logs")[0] if table == "current" else legacy(tmp_path, "llm-0.31.1.sql")
    conn = sqlite3.connect(path)
    conn.execute(damage)
    conn.commit()
    conn.close()
    with pytest.raises(ImportFormatError, match=where) as refused:
        import_source(store, path)
    assert str(path) in str(refused.value) and "nothing was imported" in str(refused.value)
    assert count_rows(store, "messages") == 0 and count_rows(store, "sessions") == 0


def test_importing_never_writes_to_the_database(store, logs):
    path = logs[0]
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    import_source(store, path)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_detection_tells_llm_logs_from_other_sqlite_files(tmp_path, logs):
    for path in (logs[0], legacy(tmp_path, "llm-0.19.sql"), legacy(tmp_path, "llm-0.31.1.sql")):
        assert detect_format(path) is FORMATS["llm"], path

    agents_db = tmp_path / "agents.db"
    asyncio.run(SQLiteSession("s", str(agents_db)).add_items([{"role": "user", "content": "hi"}]))
    checkpoints = tmp_path / "checkpoints.db"
    graph = StateGraph(MessagesState)
    graph.add_node("reply", lambda state: {"messages": [AIMessage("hello")]})
    graph.add_edge(START, "reply")
    with SqliteSaver.from_conn_string(str(checkpoints)) as saver:
        graph.compile(checkpointer=saver).invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "t"}})
    memorylab_db = tmp_path / "lab.db"
    with Store(memorylab_db) as lab:
        Session.create(lab, "s").append_message({"role": "user", "content": "hi"})
    lookalike = tmp_path / "lookalike.db"
    shutil.copy(logs[0], lookalike)
    conn = sqlite3.connect(lookalike)
    conn.execute("DROP TABLE _llm_migrations")
    conn.close()
    for other in (agents_db, checkpoints, memorylab_db, lookalike):
        assert not FORMATS["llm"].detect(SourceProbe(other)), other
