"""``memorylab copy`` (alias ``migrate``): a whole store copied between SQLite and PostgreSQL, every row as it was."""
import pytest

from memorylab import (
    ConflictError,
    Experiments,
    KVStore,
    LongTermMemory,
    Memory,
    MemoryAdmin,
    MemoryLabError,
    Session,
    SkillDirectoryProvider,
    SqliteSearchProvider,
    Store,
    register_agent,
)
from memorylab.check import check_database, repair_database
from memorylab.cli import main
from memorylab.errors import StoreCopyError
from memorylab.samples import SKILLS_DIR, load_samples
from memorylab.store.bulk import TABLES, BulkCopy, table_columns
from memorylab.store_copy import copy_store
from tests.helpers import text_message

HOSTILE = "<script>alert('x')</script> & café naïve 日本語 🎉"
MESSAGE_COLUMNS = table_columns("messages")


def add_edge_cases(store):
    """Every kind of row the samples lack: branches and a second root, overlays, blocks, an active
    skill, a frozen prompt, a memory status, KV with a TTL, named agents, unicode, HTML and NUL, and a
    KV entry damaged behind the engine's back that ``check --repair`` set aside in the quarantine."""
    tree = Session.create(store, "edge-tree", tenant_id="acme", agent_id="scout", metadata={"title": f"{HOSTILE}\x00"})
    tree.append_message(text_message("r1", "Root question about the Zanzibar itinerary"))
    tree.append_message(text_message("a1", f"{HOSTILE} nul\x00byte", role="assistant"))
    tree.append_message(text_message("u2", "Follow-up on the first branch"))
    tree.append_message(text_message("u2b", "A second branch from the answer"), parent_id="a1")
    tree.append_message(text_message("r2", "A new root, unrelated"), parent_id=None)
    tree.append_message(text_message("u3", "Continues the first branch with quokkas"), parent_id="u2")
    tree.add_compaction("the start, summarized", "r1", "a1", metadata={"model": "test"})
    tree.add_compaction(f"a longer overlay {HOSTILE}", "r1", "u2")
    tree.pin("a1", note=f"the decision {HOSTILE}")
    tree.with_context("notes").with_context("skills", provider=SkillDirectoryProvider(SKILLS_DIR))
    tree.replace_context_block("notes", f"Prefers window seats; {HOSTILE}")
    tree.activate_skill("skills", "trip-itinerary")
    tree.with_frozen_prompt_store().context.freeze()

    lead = Memory(store, agent_id="sales", tenant_id="acme", memory_key="email:ana@example.com")
    lead.append("user", "I want a demo of the marmalade tracker", timestamp="2026-01-02T03:04:05Z")
    lead.set_status("qualified")
    register_agent(store, "scout", tenant_id="acme", name="Scöut Ünicode", slug="scout-bot")
    register_agent(store, "sales", tenant_id="acme", name="Sales")
    KVStore(store, tenant_id="acme", namespace="prefs").set("theme", {"dark": True, "font": "Ünï"}, ttl=3600)
    KVStore(store, tenant_id="acme", namespace="prefs").set("plain", [1, 2.5, None])
    KVStore(store, tenant_id="acme", namespace="prefs").set("damaged", {"was": HOSTILE})
    with store.transaction() as conn:
        conn.execute("UPDATE kv_entries SET value = ? WHERE key = 'damaged'", (f'{{"was": "{HOSTILE}', ))
    assert len(repair_database(store)) == 1
    SqliteSearchProvider(store, tenant_id="acme", namespace="faq").set("shipping", "Parcels ship with DHL")
    experiments = Experiments(store, tenant_id="acme")
    experiments.run({
        "name": f"edge {HOSTILE}", "description": HOSTILE,
        "arms": [{"name": "whole", "strategy": "none"}, {"name": "cut", "strategy": "window", "max_length": 60}],
        "cases": [{"name": "tree", "session": tree.session_id, "tenant": tree.tenant_id, "agent": tree.agent_id,
                   "probes": [{"id": "quokkas", "question": f"Which animal? {HOSTILE}", "facts": ["quokkas"]}]}],
    })
    experiments.label(f"edge {HOSTILE}", 1, "tree", "cut", "quokkas", False, grade=0.25, by=HOSTILE)
    store.experiments.save_grades(store.experiments.definition("acme", f"edge {HOSTILE}")["pk"], [{
        "trial": 1, "arm": "cut", "case_name": "tree", "probe_id": "quokkas", "judge_model": "openai/gpt-4o",
        "score": 0.5, "judge_output": f"SCORE: 0.5 {HOSTILE}", "graded_at": "2026-01-02T03:04:05Z"}])
    LongTermMemory(store, workspace="edge").add_record(
        "Ana's flight to Zanzibar lands at noon", session_id="edge-tree", tags=["travel", "ünï"],
        body={"fact": "lands 12:00"}, importance=0.35)


def dump(store):
    """Every stored row of every table (primary keys first, so sorting never compares further)."""
    return {table: sorted(row for rows in store.bulk.rows(table, batch=7) for row in rows) for table in TABLES}


def counts(target):
    with Store(target) as store:
        return store.bulk.counts()


@pytest.fixture
def lab(tmp_path):
    """A SQLite file with the samples and the edge cases."""
    path = tmp_path / "source.db"
    with Store(path) as store:
        load_samples(store)
        add_edge_cases(store)
    return path


@pytest.fixture
def target(store_target):
    """An empty store of each backend to copy into."""
    return str(store_target)


def test_tables_name_every_column_of_the_sqlite_schema(tmp_path):
    """A migration that adds a column or a table fails here until ``TABLES`` copies it."""
    with Store(tmp_path / "schema.db") as store:
        fts = tuple(index["index"] for index in store.integrity.fts_indexes())
        names = {row["name"] for row in store.fetch_all("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {name for name in names if not name.startswith(("sqlite_", *fts))} == set(TABLES)
        for table in TABLES:
            info = store.fetch_all(f"PRAGMA table_info({table})")
            assert {row["name"] for row in info} == set(table_columns(table)), table
            key = tuple(row["name"] for row in sorted(info, key=lambda r: r["pk"]) if row["pk"])
            assert key == TABLES[table][0], table


def test_tables_name_every_column_of_the_postgres_schema(postgres_url):
    with Store(postgres_url) as store:
        rows = store.fetch_all("SELECT table_name, column_name, is_generated FROM information_schema.columns"
                          " WHERE table_schema = current_schema() AND table_name != 'memorylab_schema'")
    stored = {}
    for row in rows:
        if row["is_generated"] == "NEVER":
            stored.setdefault(row["table_name"], set()).add(row["column_name"])
    assert stored == {table: set(table_columns(table)) for table in TABLES}
    assert {row["column_name"] for row in rows if row["is_generated"] != "NEVER"} == {"tsv"}


def test_round_trip_through_postgres_keeps_every_row(lab, postgres_url, tmp_path):
    back = tmp_path / "back.db"
    with Store(lab) as source:
        original = dump(source)
        totals = source.bulk.counts()
    assert all(totals.values()), "the fixture should fill every table"

    there = copy_store(lab, postgres_url, batch=50)
    assert there.ok and there.mismatches == []
    assert there.counts == {table: (n, n) for table, n in totals.items()}
    assert there.sessions_verified == there.sessions_matching == totals["sessions"]
    returned = copy_store(postgres_url, back, batch=50)
    assert returned.ok and returned.counts == there.counts

    with Store(postgres_url) as pg, Store(back) as copy:
        assert dump(copy) == original
        # PostgreSQL's search copy of a message cannot hold NUL; every other value arrives to the character.
        text = MESSAGE_COLUMNS.index("text")
        in_postgres = dump(pg)
        assert {t: rows for t, rows in in_postgres.items() if t != "messages"} == \
               {t: rows for t, rows in original.items() if t != "messages"}
        assert [row[:text] + row[text + 1:] for row in in_postgres["messages"]] == \
               [row[:text] + row[text + 1:] for row in original["messages"]]
        assert [row[text] for row in in_postgres["messages"]] == \
               [row[text].replace("\x00", "\ufffd") for row in original["messages"]]
        assert check_database(copy).ok and check_database(pg).ok


def test_the_copy_reads_and_takes_new_rows_like_the_original(lab, postgres_url):
    copy_store(lab, postgres_url)
    with Store(lab) as source, Store(postgres_url) as pg:
        for store in (source, pg):
            tree = Session.open(store, "edge-tree", tenant_id="acme", agent_id="scout")
            assert [m["id"] for m in tree.get_all_messages()] == ["r1", "a1", "u2", "u2b", "r2", "u3"]
            assert tree.get_history()[0]["parts"][0]["text"].endswith("a longer overlay " + HOSTILE)
            assert tree.with_context("notes").get_context_block("notes")["content"] == \
                f"Prefers window seats; {HOSTILE}"
            assert tree.storage.blocks.active_skills("skills") == ["trip-itinerary"]
            assert KVStore(store, tenant_id="acme", namespace="prefs").get_entry("theme")["expires_at"]
            assert Memory(store, agent_id="sales", tenant_id="acme").get("email:ana@example.com")["metadata"][
                "status"] == "qualified"
            agents = {a["agent_id"]: (a["name"], a["slug"]) for a in MemoryAdmin(store, tenant_id="acme").agents()}
            assert agents == {"scout": ("Scöut Ünicode", "scout-bot"), "sales": ("Sales", None)}

        # The identity sequences were moved past the copied keys: every kind of new row gets a fresh one.
        tree = Session.open(pg, "edge-tree", tenant_id="acme", agent_id="scout")
        assert tree.append_message(text_message("u4", "appended after the migration"))["parent_id"] == "u3"
        assert tree.get_all_messages()[-1]["id"] == "u4"
        assert tree.add_compaction("third", "r1", "u4")["id"] == 3
        Session.create(pg, "brand-new").append_message(text_message("n1", "hello"))
        KVStore(pg, tenant_id="acme", namespace="prefs").set("new-key", 1)
        SqliteSearchProvider(pg, tenant_id="acme", namespace="faq").set("returns", "Returns within 30 days")
        record = LongTermMemory(pg, workspace="edge").add_record("a new global fact")
        assert record["id"] == source.bulk.counts()["memory_records"] + 1
        assert pg.bulk.counts()["sessions"] == source.bulk.counts()["sessions"] + 1


def test_search_finds_the_copied_rows(lab, target):
    report = copy_store(lab, target)
    assert report.search_word and f"search finds {report.search_word!r}" in str(report)
    with Store(target) as store:
        assert [hit["id"] for hit in store.search("quokkas", tenant_id="acme")] == ["u3"]
        assert [hit["id"] for hit in store.search("cafe naive", tenant_id="acme")] == ["a1"]
        assert [entry["key"] for entry in store.entries.search("acme", "faq", "DHL")] == ["shipping"]
        found = store.long_term.candidates("edge", "SESSION_MEMORY", "edge-tree", query="Zanzibar")
        assert [record["summary"] for record in found] == ["Ana's flight to Zanzibar lands at noon"]
        assert store.search("refund", tenant_id="default", limit=1), "the sample sessions are searchable too"


def test_a_store_that_holds_rows_is_refused_with_nothing_written(lab, target):
    with Store(target) as store:
        Session.create(store, "already-here").append_message(text_message("m1", "hi"))
        before = dump(store)
    with pytest.raises(ConflictError, match=r"already holds 1 session, 1 message, 1 agent; copy into an empty"):
        copy_store(lab, target)
    with Store(target) as store:
        assert dump(store) == before


def test_a_failure_midway_leaves_the_target_empty(lab, target, monkeypatch):
    with Store(target) as store:
        insert, written = store.bulk.insert, []

        def insert_then_fail(table, rows):
            if written[-1:] == ["messages"]:
                raise OSError("the disk is full")
            written.append(table)
            return insert(table, rows)

        monkeypatch.setattr(store.bulk, "insert", insert_then_fail)
        with pytest.raises(OSError, match="disk is full"):
            copy_store(lab, store, batch=50)
        assert written[-1] == "messages", "one batch of messages went in before the failure"
        assert set(store.bulk.counts().values()) == {0}
        monkeypatch.undo()
        assert copy_store(lab, store).ok, "the same target takes the copy afterwards"


def _corrupt(table, column, change):
    """bulk.insert that stores ``change(value)`` in the first row's ``column`` but says it stored the
    rows it was given: the target changing what it was handed, as an engine's coercion would."""
    def install(store):
        insert = store.bulk.insert
        at = table_columns(table).index(column)

        def corrupting(name, rows):
            if name == table:
                insert(name, [(*rows[0][:at], change(rows[0][at]), *rows[0][at + 1:]), *rows[1:]])
                return rows
            return insert(name, rows)
        return corrupting
    return install


@pytest.mark.parametrize("corruption, expected", [
    (_corrupt("kv_entries", "value", lambda value: value + " "), "kv_entries: the target's rows differ"),
    (_corrupt("messages", "parts", lambda parts: parts.replace("e", "E", 1)),
     "1 of 10 session exports differ: 'trip-planning-branches'"),
])
def test_a_copy_that_does_not_verify_is_rolled_back(lab, target, monkeypatch, corruption, expected):
    with Store(target) as store:
        monkeypatch.setattr(store.bulk, "insert", corruption(store))
        with pytest.raises(StoreCopyError, match="verification failed, nothing was written") as raised:
            copy_store(lab, store)
        assert expected in str(raised.value)
        assert not raised.value.report.ok
        assert set(store.bulk.counts().values()) == {0}


def test_a_target_whose_search_finds_nothing_does_not_verify(lab, target, monkeypatch):
    with Store(target) as store:
        monkeypatch.setattr(store, "search", lambda *args, **kwargs: [])
        with pytest.raises(StoreCopyError, match=r"searching the target for '\w+' does not find message"):
            copy_store(lab, store)
        assert set(store.bulk.counts().values()) == {0}


def test_a_missing_source_file_is_an_error_and_stays_missing(tmp_path):
    with pytest.raises(MemoryLabError, match="no database at"):
        copy_store(tmp_path / "absent.db", tmp_path / "target.db")
    assert not (tmp_path / "absent.db").exists() and not (tmp_path / "target.db").exists()


def test_sqlite_to_sqlite(lab, tmp_path):
    report = copy_store(lab, tmp_path / "copy.db")
    assert report.ok and report.source == str(lab) and report.target == str(tmp_path / "copy.db")
    with Store(lab) as source, Store(tmp_path / "copy.db") as copy:
        assert dump(copy) == dump(source)


def test_cli_copy_prints_progress_and_a_verified_summary(lab, postgres_url, capsys):
    with Store(lab) as source:
        totals = source.bulk.counts()
    # The test servers trust local connections, so the password is ignored; it must never be shown.
    url = postgres_url + "&password=hunter2"
    assert main(["copy", "--from", str(lab), "--to", url]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"copied {totals['sessions']} sessions, {totals['messages']} messages, 2 overlays, ")
    assert f" from {lab} to postgresql://" in out
    assert out.rstrip().endswith(f"verified: counts match, every row matches, {totals['sessions']}/"
                                 f"{totals['sessions']} session checksums match, search finds 'marmalade'")
    assert err.splitlines() == [f"{table}: {n} of {n}" for table, n in totals.items()] + [
        f"session checksums: {totals['sessions']} of {totals['sessions']}"]
    assert "hunter2" not in out + err

    assert main(["migrate", "--from", str(lab), "--to", url]) == 1  # the old name of the command still runs it
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith("memorylab: error: postgresql://") and "already holds" in err and "hunter2" not in err
    assert counts(postgres_url) == totals


@pytest.mark.parametrize("args, fragment", [
    (["--from", "{tmp}/absent.db", "--to", "{tmp}/new.db"], "no database at"),
    (["--from", "{lab}", "--to", "{lab}"], "is the source store"),
])
def test_cli_copy_errors_are_one_line(lab, tmp_path, capsys, args, fragment):
    assert main(["copy", *(a.format(tmp=tmp_path, lab=lab) for a in args)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("memorylab: error:") and fragment in err
    assert not (tmp_path / "new.db").exists()


def test_cli_copy_that_does_not_verify_exits_1(lab, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(Store, "search", lambda *args, **kwargs: [])
    assert main(["copy", "--from", str(lab), "--to", str(tmp_path / "copy.db")]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith("memorylab: error: verification failed, nothing was written to ")
    assert err[-2] == "session checksums: 10 of 10"
    assert counts(tmp_path / "copy.db") == dict.fromkeys(TABLES, 0)


def test_text_postgres_cannot_hold_is_refused_by_table(tmp_path, postgres_url):
    with Store(tmp_path / "nul.db") as store:
        Session.create(store, "s").with_context("notes").replace_context_block("notes", "a\x00b")
    with pytest.raises(MemoryLabError, match=r"cannot copy context_blocks into postgresql://.*NUL character"):
        copy_store(tmp_path / "nul.db", postgres_url)
    assert set(counts(postgres_url).values()) == {0}


def test_a_failed_copy_into_a_new_file_leaves_no_file(lab, tmp_path, monkeypatch):
    target = tmp_path / "new.db"

    def fail(self, table, rows):
        raise OSError("disk full")

    monkeypatch.setattr(BulkCopy, "insert", fail)
    with pytest.raises(OSError, match="disk full"):
        copy_store(lab, target)
    assert list(tmp_path.glob("new.db*")) == []
