"""The import panel leaves nothing of an upload in temporary storage: not after a preview, not after an
import, not when the file is refused or the import fails."""
import json
import sqlite3
import tempfile

import pytest
from streamlit.testing.v1 import AppTest

from tests.helpers import ROOT

CHATS = json.dumps({"id": "paris", "messages": [{"role": "user", "content": "Weather in Paris?"}]}).encode() + b"\n"


@pytest.fixture
def temporary(tmp_path, monkeypatch):
    """The folder ``tempfile`` writes to, empty at the start of the test."""
    folder = tmp_path / "temporary"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def uploaded(name, content):
    app = AppTest.from_file(str(ROOT / "app_pages" / "sessions.py"), default_timeout=60)
    app.run()
    app.file_uploader(key="import_file").set_value((name, content, "application/octet-stream")).run()
    assert not app.exception, [e.message for e in app.exception]
    return app


def import_button(app):
    return next(b for b in app.button if b.key == "import_run")


def test_a_previewed_then_imported_upload_leaves_nothing_behind(lab_db, temporary):
    app = uploaded("chats.jsonl", CHATS)
    assert "1 of them new" in app.markdown[0].value and list(temporary.iterdir()) == []
    import_button(app).click().run()
    assert not app.exception and "added 1 messages" in app.success[0].value
    assert list(temporary.iterdir()) == []


def test_a_refused_file_leaves_nothing_behind(lab_db, temporary):
    app = uploaded("export-from-prod.jsonl", CHATS + b'{"id": "cut", "messages": [\n')
    assert app.error[0].value.startswith("export-from-prod.jsonl, line 2: not valid JSON")
    assert list(temporary.iterdir()) == []
    app = uploaded("notes.bin", b"\x00\x01 not memory")
    assert app.error and list(temporary.iterdir()) == []


def test_a_failed_import_leaves_nothing_behind(lab_db, temporary):
    app = uploaded("chats.jsonl", CHATS)
    with sqlite3.connect(lab_db) as conn:  # the database refuses new messages between the preview and the click
        conn.execute("CREATE TRIGGER refuse_messages BEFORE INSERT ON messages BEGIN "
                     "SELECT RAISE(ABORT, 'the disk quota is exhausted'); END")
    import_button(app).click().run()
    assert not app.exception and "Nothing was imported" in app.error[0].value
    assert list(temporary.iterdir()) == []
