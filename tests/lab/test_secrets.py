"""An API key in the environment reaches no stored byte, export, log line or rendered page.

The key is fake and every model call is mocked by litellm (``mock_response``), including errors
whose text quotes the key, as real providers' authentication errors do.
"""
import json
import logging

import pytest

from memorylab import ChatRunner, Memory, ModelError, Session, Store, create_compact_function, make_summarizer
from memorylab.cli import main
from memorylab.io import export_session, write_export
from memorylab.llm.chat import chat_errors
from tests.helpers import PAGES

SECRET = "sk-test-SECRET-12345"


@pytest.fixture
def fake_key(monkeypatch, caplog):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="LiteLLM")
    return SECRET


def file_bytes(path):
    """The database file with its -wal and -shm companions."""
    return b"".join(part.read_bytes() for part in sorted(path.parent.glob(path.name + "*")))


def mocked_summarizer(reply):
    return create_compact_function(make_summarizer("gpt-4o-mini", mock_response=reply), protect_head=1,
                                   tail_token_budget=10)


def use_the_key(store):
    """A memory summary, chat turns (an answer, an error quoting the key, an authentication error), a
    compaction and a failing automatic compaction quoting the key: every kind of model call there is.
    The chat session is written last, so the lab opens on it."""
    memory = Memory(store, agent_id="sdr", summarizer=make_summarizer("gpt-4o-mini", mock_response="Asked for prices."))
    memory.append("user", "How much is it?", key="email:ana@example.com")
    memory.summarize(key="email:ana@example.com")
    session = Session.create(store, "keyed-chat").with_context("memory", max_tokens=200)
    ChatRunner(session, model="gpt-4o-mini", mock_response="Noted, Ana.").send("Hello, I am Ana.")
    import litellm  # loaded by the turn above, with memorylab's no-network settings

    auth = litellm.AuthenticationError(message=f"Incorrect API key provided: {SECRET}", llm_provider="openai",
                                       model="gpt-4o-mini")
    for error in (Exception(f"provider said: invalid key {SECRET}"), auth):
        with pytest.raises(ModelError) as raised:
            ChatRunner(session, model="gpt-4o-mini", mock_response=error).send("Are you there?")
        assert SECRET not in str(raised.value)
    assert session.on_compaction(mocked_summarizer("## Topic\nAna says hello.")).compact() is not None
    failures = []
    session.on_compaction(mocked_summarizer(Exception(f"quota exceeded for {SECRET}"))).compact_after(1)
    session.on_compaction_error(failures.append).append_message({"role": "user", "content": "One more thing."})
    # the key really went through: two chat errors and a compaction error were recorded, redacted
    assert len(chat_errors(session)) == 2 and "[redacted]" in chat_errors(session)[0]["message"]
    assert session.compaction_status["state"] == "error" and len(failures) == 1
    return session


def test_no_key_in_the_database_exports_or_logs(fake_key, db_path, tmp_path, caplog, capsys):
    with Store(db_path) as store:
        session = use_the_key(store)
        assert (db_path.parent / f"{db_path.name}-wal").exists()
        assert SECRET.encode() not in file_bytes(db_path)  # with the write-ahead log still open
        write_export(session, tmp_path / "export.json")
        exported = json.dumps(export_session(Session.open(store, "email:ana@example.com", agent_id="sdr")))
    assert SECRET.encode() not in file_bytes(db_path)
    assert SECRET not in (tmp_path / "export.json").read_text() + exported
    assert main(["--db", str(db_path), "export", "keyed-chat"]) == 0
    printed = capsys.readouterr()
    assert '"keyed-chat"' in printed.out
    assert SECRET not in printed.out + printed.err
    assert caplog.records, "nothing was logged: the scan would prove nothing"
    assert SECRET not in caplog.text


def test_no_page_of_the_lab_shows_the_key(fake_key, lab_db, lab_server, browser):
    with Store(lab_db) as store:
        use_the_key(store)
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    for path, expected in PAGES.items():
        page.goto(f"{lab_server}/{path}")
        page.get_by_text(expected).first.wait_for(timeout=60_000)
        if path == "chat":  # the page shows the session that used the key, with its recorded errors
            page.get_by_text("Model errors (2)").first.wait_for(state="attached", timeout=30_000)
        page.wait_for_timeout(500)
        assert SECRET not in page.content(), f"/{path} shows the key"
    page.close()
