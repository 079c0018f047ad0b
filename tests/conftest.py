import pytest

from memorylab import Session, Store


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "lab.db"


@pytest.fixture
def store(db_path):
    with Store(db_path) as store:
        yield store


@pytest.fixture
def session(store):
    return Session.create(store, "s1")


def text_message(message_id, text, role="user"):
    return {"id": message_id, "role": role, "parts": [{"type": "text", "text": text}]}


def ids(messages):
    return [m["id"] for m in messages]
