"""memorylab against raw sqlite3 and peer libraries, side by side, in one run.

    python benchmarks/run.py [--quick] [--json PATH] [--only GROUP]

Each benchmark runs memorylab and its baselines in this process, interleaved (batch by batch or
call by call, the order rotating), for several repetitions, and reports the medians and the ratio
memorylab / baseline: lower is better, and a row is "ok" when the ratio is at most its target.
A benchmark with an absolute target (plan, tree_figure, startup, search latency) uses the target
itself as its baseline, so its ratio is measured / target and passes at 1.0 or less.
Peer libraries come from requirements-bench.txt; without them their rows say "skipped".

The cyclic garbage collector is paused while benchmarks run and emptied between them (as timeit
does): otherwise a collection of the benchmark's own data lands on whichever contender happens to
be running, and one 10k-message read takes 70 ms in one round and 300 ms in the next.
"""
import argparse
import asyncio
import gc
import json
import os
import platform
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import QUERIES, kv_values, openai_messages  # noqa: E402

from memorylab import KVStore, Session, Store, import_session, plan_compaction  # noqa: E402
from memorylab.io import EXPORT_FORMAT, EXPORT_VERSION  # noqa: E402
from memorylab.store.fts import fts_query  # noqa: E402

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

    def sized(self, count, full):
        """A workload size for the table, saying when --quick shrank it."""
        return f"{count:,}" if count == full else f"{count:,} (--quick; full run: {full:,})"


FULL = Config(appends=10_000, append_batch=250, append_repetitions=5, read_repetitions=9,
              stored_small=1_000, stored_large=100_000, scaling_appends=2_000, search_rounds=5,
              kv_entries=10_000, kv_repetitions=5, tree_nodes=2_000, figure_repetitions=5,
              import_repetitions=7, app_repetitions=5)
QUICK = Config(appends=2_000, append_batch=250, append_repetitions=3, read_repetitions=5,
               stored_small=1_000, stored_large=20_000, scaling_appends=1_000, search_rounds=3,
               kv_entries=2_000, kv_repetitions=3, tree_nodes=2_000, figure_repetitions=3,
               import_repetitions=5, app_repetitions=3)


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
        for key in ("skipped", "note"):
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


def timed(fn, *args):
    started = time.perf_counter()
    fn(*args)
    return time.perf_counter() - started


def batched(items, size):
    return [items[i:i + size] for i in range(0, len(items), size)]


def format_seconds(seconds):
    if seconds is None:
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"


def configure(conn):
    """memorylab's connection settings (journal, sync, page cache), for every baseline's connection."""
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA cache_size = -65536")
    return conn


# -- contenders ------------------------------------------------------------------------------


class MemorylabAppender:
    def __init__(self, directory):
        self.store = Store(directory / "memorylab.db")
        self.session = Session.create(self.store, "bench")

    def append(self, batch):
        started = time.perf_counter()
        for message in batch:
            self.session.append_message(message)
        return time.perf_counter() - started

    def close(self):
        self.store.close()


class RawAppender:
    """What memorylab stores for each message, as hand-written sqlite3: one row, one FTS row, one commit."""

    def __init__(self, directory):
        self.conn = configure(sqlite3.connect(directory / "raw.db", isolation_level=None))
        self.conn.execute(
            "CREATE TABLE messages (seq INTEGER PRIMARY KEY, session TEXT, id TEXT, parent_id TEXT, role TEXT,"
            " parts TEXT, text TEXT, created_at TEXT, metadata TEXT, tokens INTEGER, UNIQUE (session, id))"
        )
        self.conn.execute(
            "CREATE VIRTUAL TABLE messages_fts USING fts5(text, content='messages', content_rowid='seq')"
        )
        self.count = 0
        self.leaf = None

    def append(self, batch):
        started = time.perf_counter()
        for message in batch:
            message_id = f"m{self.count}"
            text = message["content"]
            parts = json.dumps([{"type": "text", "text": text}], ensure_ascii=False, separators=(",", ":"))
            self.conn.execute("BEGIN IMMEDIATE")
            seq = self.conn.execute(
                "INSERT INTO messages (session, id, parent_id, role, parts, text, created_at, metadata, tokens)"
                " VALUES ('bench', ?, ?, ?, ?, ?, '2026-01-01T00:00:00.000Z', '{}', ?)",
                (message_id, self.leaf, message["role"], parts, text, len(text) // 4),
            ).lastrowid
            self.conn.execute("INSERT INTO messages_fts (rowid, text) VALUES (?, ?)", (seq, text))
            self.conn.execute("COMMIT")
            self.leaf = message_id
            self.count += 1
        return time.perf_counter() - started

    def history(self):
        """Root-to-leaf path by a recursive CTE, each row's JSON decoded: the floor for get_history."""
        started = time.perf_counter()
        rows = self.conn.execute(
            """WITH RECURSIVE path(seq, parent_id, depth) AS (
                SELECT seq, parent_id, 0 FROM messages WHERE session = 'bench' AND id = ?
                UNION ALL
                SELECT m.seq, m.parent_id, path.depth + 1 FROM messages m JOIN path
                    ON m.session = 'bench' AND m.id = path.parent_id)
            SELECT m.id, m.parent_id, m.role, m.parts, m.created_at, m.metadata, m.tokens
            FROM path JOIN messages m ON m.seq = path.seq ORDER BY path.depth DESC""",
            (self.leaf,),
        ).fetchall()
        history = [{"id": r[0], "parent_id": r[1], "role": r[2], "parts": json.loads(r[3]), "created_at": r[4],
                    "metadata": json.loads(r[5]), "tokens": r[6]} for r in rows]
        assert len(history) == self.count
        return time.perf_counter() - started

    def close(self):
        self.conn.close()


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
    messages = openai_messages(config.appends)
    batches = batched(messages, config.append_batch)
    peers = SQLiteSession is not None
    totals = {"memorylab": [], "sqlite3": [], "agents": []}
    for repetition in range(config.append_repetitions):
        gc.collect()
        directory = workdir / f"append-{repetition}"
        directory.mkdir()
        contenders = {"memorylab": MemorylabAppender(directory), "sqlite3": RawAppender(directory)}
        if peers:
            contenders["agents"] = AgentsAppender(directory)
        for name, seconds in interleave_batches({n: c.append for n, c in contenders.items()}, batches).items():
            totals[name].append(sum(seconds))
        if repetition < config.append_repetitions - 1:
            close_all(contenders)
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


def bench_history(config, contenders):
    session = contenders["memorylab"].session
    add_three_overlays(session)

    def memorylab_history():
        started = time.perf_counter()
        history = session.get_history()
        assert len(history) == config.appends - 3 * 49
        return time.perf_counter() - started

    calls = {"memorylab": memorylab_history, "sqlite3": contenders["sqlite3"].history}
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


def stored_session(path, messages):
    """A session holding ``messages``, imported in one transaction, then reopened at rest: closing
    the store checkpoints its WAL, a one-time cost of the import that would otherwise land on
    whichever append comes first."""
    with Store(path) as store:
        import_session(store, export_of(messages, path.stem))
    return Session.open(Store(path), path.stem)


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


def bench_search(config, store):
    raw = configure(sqlite3.connect(store.path, isolation_level=None))
    matches = {query: fts_query(query) for query in QUERIES}

    def memorylab_search(query):
        started = time.perf_counter()
        store.search(query, limit=20)
        return time.perf_counter() - started

    def raw_search(query):
        started = time.perf_counter()
        raw.execute(
            "SELECT m.id, m.role, m.text, m.created_at FROM messages_fts JOIN messages m"
            " ON m.seq = messages_fts.rowid WHERE messages_fts MATCH ? ORDER BY rank LIMIT 20",
            (matches[query],),
        ).fetchall()
        return time.perf_counter() - started

    samples = {"memorylab": [], "sqlite3": []}
    for round_ in range(config.search_rounds):
        for turn, query in enumerate(QUERIES):
            for name in rotated(["memorylab", "sqlite3"], round_ + turn):
                samples[name].append((memorylab_search if name == "memorylab" else raw_search)(query))
    raw.close()
    lab = statistics.median(samples["memorylab"])
    unit = (f"median of {len(QUERIES)} queries x {config.search_rounds} rounds over "
            f"{config.sized(config.stored_large, FULL.stored_large)} messages, top 20")
    return [Row("search.sqlite3", lab, statistics.median(samples["sqlite3"]), 1.5, unit,
                "the raw FTS5 query with the same MATCH expression"),
            absolute_row("search.latency", lab, 0.010, unit)]


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
    from memorylab.viz import tree_figure

    store = Store(workdir / "tree.db")
    session = import_session(store, branching_export(config.tree_nodes))
    add_three_overlays(session)
    samples = [timed(tree_figure, session) for _ in range(config.figure_repetitions)]
    store.close()
    return [absolute_row("tree_figure", statistics.median(samples), 1.5,
                         f"memorylab.viz.tree_figure of a {config.tree_nodes:,}-message session with branches")]


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


BENCHMARKS = {
    "append": bench_append_and_history,
    "search": bench_search_and_scaling,
    "kv": bench_kv,
    "tree_figure": bench_tree_figure,
    "startup": bench_startup,
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


def run(config, groups):
    rows = []
    gc.disable()
    try:
        with tempfile.TemporaryDirectory(prefix="memorylab-bench-") as tmp:
            for group in groups:
                gc.collect()
                directory = Path(tmp) / group
                directory.mkdir()
                rows += BENCHMARKS[group](config, directory)
    finally:
        gc.enable()
    return rows


def print_table(rows):
    header = (f"{'benchmark':<22}{'memorylab':>11}{'baseline':>11}{'ratio':>7}{'target':>8}  {'status':<8} "
              "workload; baseline")
    print(header)
    print("-" * len(header))
    for row in rows:
        ratio = "-" if row.ratio is None else f"{row.ratio:.2f}"
        print(f"{row.name:<22}{format_seconds(row.memorylab):>11}{format_seconds(row.baseline):>11}{ratio:>7}"
              f"{'<= ' + format(row.target, '.1f'):>8}  {row.status:<8} {row.unit}; {row.baseline_name}"
              + (f" [{row.skipped or row.note}]" if row.skipped or row.note else ""))


def print_markdown(rows):
    """The table as Markdown, for the README's Performance section."""
    print("| benchmark | memorylab | baseline | ratio | target | status | workload; baseline |")
    print("| --- | ---: | ---: | ---: | ---: | --- | --- |")
    for row in rows:
        ratio = "-" if row.ratio is None else f"{row.ratio:.2f}"
        print(f"| {row.name} | {format_seconds(row.memorylab)} | {format_seconds(row.baseline)} | {ratio} "
              f"| <= {row.target:.1f} | {row.status} | {row.unit}; {row.baseline_name} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="smaller workloads and fewer repetitions (under a minute); sizes are in the table")
    parser.add_argument("--json", metavar="PATH", help="also write the results to PATH as JSON")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument("--only", action="append", choices=list(BENCHMARKS), metavar="GROUP",
                        help=f"run only this group (repeatable): {', '.join(BENCHMARKS)}; "
                             "append also runs history and plan, search also runs append_scaling")
    args = parser.parse_args()
    started = time.perf_counter()
    print(f"machine: {machine()}; load average before: {os.getloadavg()[0]:.2f}")
    rows = run(QUICK if args.quick else FULL, args.only or list(BENCHMARKS))
    (print_markdown if args.markdown else print_table)(rows)
    print(f"ran in {time.perf_counter() - started:.0f} s; load average after: {os.getloadavg()[0]:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({row.name: row.to_json() for row in rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
