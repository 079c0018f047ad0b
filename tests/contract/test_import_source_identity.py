"""What makes two imports "the same source": only a copy of the same conversation dedups.

A source names its conversations and messages with ids that are unique only inside it (a file's
stem, message ids counting from 0, an SDK session called "trip", a LangGraph thread "1"), so two
unrelated files easily share them. Each test imports two such files and checks that neither loses a
message to the other, while the same file, grown or copied elsewhere, still adds only its news.
"""
import json
import shutil

import pytest
import sqlite_utils
from llm.logs import LogStore

from memorylab import ConflictError, Session, Store, write_export
from memorylab.cli import main
from memorylab.importers import import_source
from tests.contract.test_import_langgraph import ask
from tests.contract.test_import_llm_logs import CannedModel, llm_user_dir  # noqa: F401 (llm_user_dir: a fixture)
from tests.contract.test_import_openai_agents import sdk_session
from tests.helpers import count_rows

OPENING = [{"role": "system", "content": "You are the shop's support agent."},
           {"role": "user", "content": "Hi"},
           {"role": "assistant", "content": "Hello! How can I help?"}]
ALICE = OPENING + [{"role": "user", "content": "My card 4111 1111 1111 1111 was charged twice."},
                   {"role": "assistant", "content": "I refunded the second charge."}]
BOB = OPENING + [{"role": "user", "content": "Where is my parcel?"}]


def chat_file(directory, messages):
    directory.mkdir(exist_ok=True)
    path = directory / "chat.json"
    path.write_text(json.dumps(messages), encoding="utf-8")
    return path


def sessions_of(report):
    return [(s.session_id, s.status, s.messages_added) for s in report.sessions]


def after(store, first, second):
    """What importing ``second`` did, after ``first``: (session id, status, messages added) each."""
    import_source(store, first)
    return sessions_of(import_source(store, second))


def texts(store, session_id, agent_id="openai-messages"):
    history = Session.open(store, session_id, agent_id=agent_id).get_history()
    return [part.get("text") or part.get("output") for part in (m["parts"][0] for m in history)]


def test_two_chat_files_with_one_name_become_two_sessions_and_each_grows_alone(store, tmp_path):
    alice, bob = chat_file(tmp_path / "alice", ALICE), chat_file(tmp_path / "bob", BOB)
    assert after(store, alice, bob) == [("chat~2", "new", 4)]
    assert texts(store, "chat") == [m["content"] for m in ALICE]
    assert texts(store, "chat~2") == [m["content"] for m in BOB]

    assert [import_source(store, path).messages_added for path in (alice, bob)] == [0, 0]
    chat_file(tmp_path / "bob", BOB + [{"role": "assistant", "content": "It ships tomorrow."}])
    grown = import_source(store, bob)
    assert sessions_of(grown) == [("chat~2", "grew", 1)]
    assert texts(store, "chat~2")[-1] == "It ships tomorrow." and len(texts(store, "chat")) == 5
    assert count_rows(store, "messages") == 10


def test_a_copy_of_the_same_file_elsewhere_is_the_same_source(store, tmp_path):
    import_source(store, chat_file(tmp_path / "alice", ALICE))
    import_source(store, chat_file(tmp_path / "bob", BOB))
    copy = chat_file(tmp_path / "upload", BOB)  # the lab saves each upload to a new temporary folder
    report = import_source(store, copy, name="chat.json")
    assert sessions_of(report) == [("chat~2", "unchanged", 0)]
    assert store.sessions.count() == 2


def test_a_file_replaced_by_another_conversation_is_a_new_session(store, tmp_path):
    path = chat_file(tmp_path / "inbox", ALICE)
    import_source(store, path)
    chat_file(tmp_path / "inbox", BOB)
    report = import_source(store, path)
    assert [(s.session_id, s.messages_added) for s in report.sessions] == [("chat~2", 4)]
    assert texts(store, "chat") == [m["content"] for m in ALICE]


def test_two_jsonl_files_whose_lines_share_ids_keep_their_conversations_apart(store, tmp_path):
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text(json.dumps({"id": "support", "messages": ALICE}) + "\n" + json.dumps(OPENING) + "\n")
    second.write_text(json.dumps({"id": "support", "messages": BOB}) + "\n" + json.dumps(OPENING) + "\n")
    assert after(store, first, second) == [("support~2", "new", 4), ("b-2", "new", 3)]


def test_two_agents_sdk_databases_with_a_session_named_trip_become_two_sessions(store, tmp_path):
    sdk_session(tmp_path / "alice.db", "trip", "Weather in Paris?")
    sdk_session(tmp_path / "bob.db", "trip", "Weather in Oslo?")
    assert after(store, tmp_path / "alice.db", tmp_path / "bob.db") == [("trip~2", "new", 5)]
    assert texts(store, "trip", "openai-agents")[0] == "Weather in Paris?"
    assert texts(store, "trip~2", "openai-agents")[0] == "Weather in Oslo?"

    sdk_session(tmp_path / "bob.db", "trip", "Weather in Rome?")
    grown = import_source(store, tmp_path / "bob.db")
    assert sessions_of(grown) == [("trip~2", "grew", 5)]
    assert import_source(store, tmp_path / "alice.db").messages_added == 0
    assert count_rows(store, "messages") == 15


def test_two_langgraph_databases_with_one_thread_id_become_two_sessions(store, tmp_path):
    ask(tmp_path / "alice.sqlite", "1", "Hi")
    ask(tmp_path / "bob.sqlite", "1", "Bye")
    assert after(store, tmp_path / "alice.sqlite", tmp_path / "bob.sqlite") == [("1~2", "new", 2)]
    assert texts(store, "1", "langgraph") == ["Hi", "Hello! How can I help?"]
    assert texts(store, "1~2", "langgraph") == ["Bye", "Goodbye."]
    assert [import_source(store, tmp_path / name).messages_added for name in ("alice.sqlite", "bob.sqlite")] == [0, 0]


def test_two_llm_databases_with_a_thread_named_main_become_two_sessions(store, tmp_path, empty_logs):
    for name, prompt in (("alice", "Hello there"), ("bob", "Good morning")):
        shutil.copyfile(empty_logs, tmp_path / f"{name}.db")
        logs = LogStore(sqlite_utils.Database(tmp_path / f"{name}.db"))
        logs.ensure_thread("main")
        response = CannedModel().prompt(prompt, system="You are terse.")
        response.text()
        logs.log(response, thread_id="main")
    assert after(store, tmp_path / "alice.db", tmp_path / "bob.db") == [("main~2", "new", 3)]
    assert texts(store, "main", "llm")[1:] == ["Hello there", "Canned answer to: Hello there"]
    assert texts(store, "main~2", "llm")[1:] == ["Good morning", "Canned answer to: Good morning"]


@pytest.fixture
def export_file(store, tmp_path):
    """An export of a session of tenant "acme", that session deleted again."""
    session = Session.create(store, "ticket", tenant_id="acme")
    session.append_message({"role": "user", "content": "keep me"})
    path = tmp_path / "ticket.json"
    write_export(session, path)
    session.storage.delete()
    return path


def test_a_dry_run_of_an_export_refuses_what_the_import_refuses(store, export_file):
    dry = import_source(store, export_file, dry_run=True)
    assert sessions_of(dry) == [("ticket", "new", 1)] and store.sessions.count() == 0
    import_source(store, export_file)
    with pytest.raises(ConflictError, match="exists"):
        import_source(store, export_file, dry_run=True)
    with pytest.raises(ConflictError, match="exists"):
        import_source(store, export_file)


def test_the_command_line_dry_run_of_an_export_says_what_the_import_says(tmp_path, capsys):
    db = str(tmp_path / "cli.db")
    path = tmp_path / "ticket.json"
    with Store(db) as store:
        session = Session.create(store, "ticket")
        session.append_message({"role": "user", "content": "keep me"})
        write_export(session, path)
    assert main(["--db", db, "import", str(path), "--dry-run"]) == 1
    dry = capsys.readouterr().err
    assert main(["--db", db, "import", str(path)]) == 1
    assert dry == capsys.readouterr().err and "exists" in dry


def test_an_export_is_imported_into_the_callers_tenant_not_the_files(store, export_file):
    report = import_source(store, export_file)
    assert report.sessions[0].status == "new"
    assert Session.open(store, "ticket").get_history()[0]["parts"][0]["text"] == "keep me"
    assert store.sessions.find("acme", "default", "ticket") is None
    import_source(store, export_file, tenant_id="acme")
    assert store.sessions.find("acme", "default", "ticket") is not None


def test_one_file_repeating_an_id_keeps_each_conversation_once(store, tmp_path):
    path = tmp_path / "chats.jsonl"
    lines = [{"id": "support", "messages": ALICE}, {"id": "support", "messages": BOB},
             {"id": "support", "messages": ALICE}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    report = import_source(store, path)
    assert [(s.session_id, s.messages_added) for s in report.sessions] == [("support", 5), ("support~2", 4),
                                                                           ("support", 0)]
    assert count_rows(store, "messages") == 9


def test_a_session_imported_before_openings_were_recorded_still_takes_its_source_and_learns_its_opening(store,
                                                                                                       tmp_path):
    path = chat_file(tmp_path / "alice", ALICE)
    import_source(store, path)
    storage = Session.open(store, "chat", agent_id="openai-messages").storage
    metadata = storage.info()["metadata"]
    storage.set_metadata({**metadata, "source": {k: v for k, v in metadata["source"].items() if k != "opening"}})
    chat_file(tmp_path / "alice", ALICE + [{"role": "user", "content": "Thanks!"}])
    report = import_source(store, path)
    assert sessions_of(report) == [("chat", "grew", 1)]
    assert storage.info()["metadata"]["source"]["opening"]["messages"] == 6
