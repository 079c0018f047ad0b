"""What one write costs the database: the statements an append and a KV set or get send, counted as
the backend receives them. Each extra statement is a round trip on PostgreSQL and an extra step of
SQLite's virtual machine; these pin what each call needs and no more."""
import os
import tempfile
from contextlib import contextmanager

import pytest

from memorylab import InvalidInputError, InvalidMessageError, KVStore, Session
from memorylab.store import is_postgres_url
from tests.helpers import ids, text_message


@contextmanager
def _sqlite_statements(store):
    """SQLite's trace of the writer connection, without what runs inside a statement (its triggers
    and FTS5's own statements are traced as ``--`` comments, and a statement is traced again as each
    trigger starts)."""
    traced = []
    store._conn.set_trace_callback(traced.append)
    try:
        yield traced
    finally:
        store._conn.set_trace_callback(None)
    statements = [sql for sql in traced if not sql.startswith("--")]
    traced[:] = [sql.split()[0] for i, sql in enumerate(statements) if i == 0 or sql != statements[i - 1]]


@contextmanager
def _postgres_round_trips(store):
    """libpq's trace of every pooled connection: a simple query (BEGIN, COMMIT) and each statement of
    the extended protocol (ended by its Sync) is one round trip to the server."""
    connections = list(store._pool._pool)  # psycopg_pool's idle connections, one of which the call borrows
    trips = []
    with tempfile.TemporaryFile("w+") as trace:
        for connection in connections:
            connection.pgconn.trace(trace.fileno())
        try:
            yield trips
        finally:
            for connection in connections:
                connection.pgconn.untrace()
        trace.flush()
        os.lseek(trace.fileno(), 0, os.SEEK_SET)
        sent = [line.split("\t") for line in trace.read().splitlines()]
    trips += [fields[3] for fields in sent if len(fields) > 3 and fields[1] == "F" and fields[3] in ("Query", "Sync")]


def sent(store):
    """The statements (SQLite: their first words) or round trips (PostgreSQL) of the block."""
    return _postgres_round_trips(store) if is_postgres_url(store.path) else _sqlite_statements(store)


SQLITE_WRITE = ["BEGIN", "INSERT", "UPDATE", "COMMIT"]
"""An append on SQLite: the message row (which finds its parent and refuses a repeat itself), the
session's newest pointer, in one write transaction."""


@pytest.mark.parametrize("parent", ["latest", "explicit", "root"])
def test_an_append_is_one_statement_and_the_newest_pointer(store, backend, parent):
    session = Session.create(store, "counted")
    session.append_message(text_message("a", "first"))
    session.append_message(text_message("b", "second"))
    parent_id = {"latest": {}, "explicit": {"parent_id": "a"}, "root": {"parent_id": None}}[parent]
    with sent(store) as statements:
        stored = session.append_message(text_message("c", "third"), **parent_id)
    assert statements == (["Sync"] if backend == "postgres" else SQLITE_WRITE)
    assert stored["parent_id"] == {"latest": "b", "explicit": "a", "root": None}[parent]
    assert session.get_latest_leaf_id() == "c"
    assert ids(session.get_history()) == {"latest": ["a", "b", "c"], "explicit": ["a", "c"], "root": ["c"]}[parent]


def test_a_kv_set_purges_and_upserts_in_one_statement_where_the_backend_chains_them(store, backend):
    kv = KVStore(store, namespace="counted")
    kv.set("cart", {"items": 1})
    with sent(store) as statements:
        kv.set("cart", {"items": 2})
    assert statements == (["Sync"] if backend == "postgres" else ["BEGIN", "DELETE", "INSERT", "COMMIT"])
    with sent(store) as statements:
        assert kv.get("cart") == {"items": 2}
    assert statements == (["Sync"] if backend == "postgres" else ["SELECT"])


def test_a_kv_value_that_holds_itself_is_refused_and_nothing_is_written(store):
    kv = KVStore(store, namespace="guarded")
    cart = {"items": []}
    cart["items"].append(cart)
    with pytest.raises(InvalidInputError, match="nested too deeply"):
        kv.set("cart", cart)
    assert kv.get("cart", "missing") == "missing"


def test_a_message_that_holds_itself_is_refused_before_anything_is_written(store):
    session = Session.create(store, "guarded")
    metadata = {}
    metadata["self"] = metadata
    with pytest.raises(InvalidMessageError, match="not storable as JSON"):
        session.append_message({"role": "user", "content": "hi", "metadata": metadata})
    assert session.get_all_messages() == []
