"""Damage stays local and is found: corrupt any one stored JSON document of a store holding the samples,
and every other row still reads, ``check`` names exactly that row, and ``repair`` sets it aside.

Each example runs inside one transaction that is rolled back at its end (the engine's own
transactions join it), so every example starts from the same filled store, on both backends.
"""
import json
import warnings

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from memorylab import Experiments, KVStore, LongTermMemory, Session, load_samples
from memorylab.check import ERROR, check_database, repair_database
from memorylab.errors import DamagedRowError, DamagedRowWarning
from memorylab.io import export_session
from memorylab.store.rows import JSON_KINDS, json_problem
from memorylab.store.schema import TABLES
from tests.helpers import examples

KEYS = {table.name: table.key for table in TABLES}
CORRUPTIONS = ("truncated", "text after it", "another kind", "a part of no known shape")


class RolledBack(Exception):
    """Ends an example's transaction, undoing its damage and its repair."""


@pytest.fixture
def filled(store):
    """The samples, an overlay, and an experiment with two runs: a row in every table with JSON."""
    load_samples(store)
    first = store.sessions.list()[-1]
    session = Session.open(store, first["session_id"], tenant_id=first["tenant_id"], agent_id=first["agent_id"])
    path = session.get_history()
    session.add_compaction("the start, summarized", path[0]["id"], path[1]["id"])
    Experiments(store).run({
        "name": "damage", "arms": [{"name": "whole", "strategy": "none"},
                                   {"name": "cut", "strategy": "window", "max_length": 60}],
        "cases": [{"name": "case", "session": session.session_id, "agent": session.agent_id,
                   "probes": [{"id": "p", "question": "What was asked first?", "facts": ["order"]}]}],
    })
    return store


def stored_documents(store):
    """``[(table, key, column, text)]``: every JSON document stored, by the row that holds it."""
    documents = []
    for table, kinds in JSON_KINDS.items():
        key = KEYS[table]
        for row in store.fetch_all(f"SELECT {', '.join(key + tuple(kinds))} FROM {table}"):
            documents.extend((table, {c: row[c] for c in key}, column, row[column])
                             for column in kinds if row[column] is not None)
    return documents


def corrupted(text, how, cut, kind):
    if how == "truncated":
        return text[:cut % len(text)]
    if how == "text after it":
        return text + "}"
    if how == "another kind":
        return {dict: "[]", list: "{}"}.get(kind)
    return '[{"type": "text", "text": 42}]'


def read_everything(store, sessions):
    """Every reading the engine offers of the filled store, keyed by what was read; a read that refuses
    a damaged row by name is recorded as the refusal."""
    readings = {"sessions": {(r["tenant_id"], r["agent_id"], r["session_id"]): r["metadata"]
                             for r in store.sessions.list()}}
    for tenant, agent, session_id in sessions:
        session = Session.open(store, session_id, tenant_id=tenant, agent_id=agent)
        readings[("messages", session_id)] = session.get_all_messages()
        readings[("history", session_id)] = [m["id"] for m in session.get_history()]
        try:
            readings[("export", session_id)] = export_session(session)
        except DamagedRowError as error:
            readings[("export", session_id)] = str(error)
    for entry in store.fetch_all("SELECT DISTINCT tenant_id, namespace FROM kv_entries"):
        kv = KVStore(store, tenant_id=entry["tenant_id"], namespace=entry["namespace"])
        readings[("kv", entry["tenant_id"], entry["namespace"])] = kv.get_all()
    for row in store.fetch_all("SELECT DISTINCT workspace FROM memory_records"):
        readings[("records", row["workspace"])] = LongTermMemory(store, workspace=row["workspace"]).records()
    try:
        readings["experiment"] = store.experiments.definition("default", "damage")
    except DamagedRowError as error:  # a definition is read whole or refused, naming the damaged row
        readings["experiment"] = str(error)
    readings["runs"] = store.experiments.runs(store.fetch_one("SELECT pk FROM experiments")["pk"], with_context=True)
    return readings


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                           HealthCheck.filter_too_much])
@given(data=st.data())
def test_one_damaged_document_costs_its_row_only_and_check_finds_and_sets_aside_exactly_it(filled, data):
    documents = stored_documents(filled)
    # A table first, then one of its documents: the messages' would otherwise be nine draws in ten.
    chosen = data.draw(st.sampled_from(sorted({(table, column) for table, _, column, _ in documents})), label="column")
    table, key, column, text = data.draw(st.sampled_from([d for d in documents if (d[0], d[2]) == chosen]),
                                         label="document")
    how = data.draw(st.sampled_from(CORRUPTIONS), label="corruption")
    kind = JSON_KINDS[table][column]
    damaged = corrupted(text, how, data.draw(st.integers(min_value=0), label="cut"), kind)
    assume(damaged is not None and (how != "a part of no known shape" or column == "parts"))
    assume(json_problem(damaged, kind) or column == "parts")
    sessions = [(r["tenant_id"], r["agent_id"], r["session_id"]) for r in filled.sessions.list()]
    with pytest.raises(RolledBack), filled.transaction() as conn:
        before = read_everything(filled, sessions)
        where = " AND ".join(f"{c} = ?" for c in key)
        try:
            conn.execute(f"UPDATE {table} SET {column} = ? WHERE {where}", (damaged, *key.values()))
        except Exception:  # SQLite's search triggers refuse unreadable JSON in a long-term record's body or tags
            assume(False)

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", DamagedRowWarning)
            after = read_everything(filled, sessions)
        changed = {what for what in before if before[what] != after[what]}
        assert changed <= touched_by(table, key, filled), (table, column, changed)
        assert all(issubclass(w.category, DamagedRowWarning) for w in caught)

        [found] = filled.integrity.damaged_rows()
        assert (found["table"], found["key"]) == (table, key)
        assert f"its stored {column}" in found["problem"]
        readable = [f for f in check_database(filled).findings if f.check == "readable"]
        assert len(readable) == 1 and readable[0].message.startswith(f"1 row of {table} cannot be read")

        [line] = repair_database(filled)
        assert line.startswith(f"set aside {found['problem']}")
        report = check_database(filled)
        assert [f for f in report.findings if f.severity == ERROR] == []
        assert filled.integrity.damaged_rows() == []
        kept = filled.fetch_all("SELECT table_name, row_key FROM quarantine ORDER BY pk")
        assert (kept[0]["table_name"], kept[0]["row_key"]) == (table, key_text(key))
        raise RolledBack


def key_text(key):
    return json.dumps(key, ensure_ascii=False, separators=(",", ":"))


def touched_by(table, key, store):
    """The readings a damaged row of ``table`` may change: those of its own session, or of its kind."""
    if table in ("sessions", "messages", "compactions"):
        pk = key["pk"] if table == "sessions" else key.get("session_pk") or store.fetch_one(
            "SELECT session_pk FROM messages WHERE seq = ?", (key["seq"],))["session_pk"]
        session_id = store.fetch_one("SELECT session_id FROM sessions WHERE pk = ?", (pk,))["session_id"]
        return {(what, session_id) for what in ("messages", "history", "export")} | (
            {"sessions"} if table == "sessions" else set())
    if table == "kv_entries":
        return {("kv", r["tenant_id"], r["namespace"]) for r in store.fetch_all(
            "SELECT DISTINCT tenant_id, namespace FROM kv_entries")}
    if table == "memory_records":
        return {("records", r["workspace"]) for r in store.fetch_all("SELECT DISTINCT workspace FROM memory_records")}
    return {"runs"} if table == "experiment_runs" else {"experiment"}
