"""memorylab against raw sqlite3 on the same rows, in one process, interleaved.

    python benchmarks/run.py [--quick] [--json PATH]

Each benchmark runs memorylab and its baseline alternately for several repetitions and reports
the medians and the ratio memorylab / baseline (lower is better).
"""
import argparse
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memorylab import Session, Store  # noqa: E402


def _text(i):
    return f"message {i}: the deployment of service-{i % 17} moved to Friday after review {i * 7}"


def _raw_connection(path):
    """A plain sqlite3 file with the journal and sync settings memorylab uses."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute(
        "CREATE TABLE messages (seq INTEGER PRIMARY KEY, session TEXT, id TEXT, parent_id TEXT, role TEXT,"
        " parts TEXT, text TEXT, created_at TEXT, UNIQUE (session, id))"
    )
    conn.execute("CREATE VIRTUAL TABLE messages_fts USING fts5(text, content='messages', content_rowid='seq')")
    return conn


def raw_append(directory, count):
    conn = _raw_connection(str(directory / "raw.db"))
    started = time.perf_counter()
    parent = None
    for i in range(count):
        text = _text(i)
        parts = json.dumps([{"type": "text", "text": text}])
        conn.execute("BEGIN IMMEDIATE")
        seq = conn.execute(
            "INSERT INTO messages (session, id, parent_id, role, parts, text, created_at)"
            " VALUES ('s', ?, ?, 'user', ?, ?, '2026-01-01T00:00:00Z')",
            (f"m{i}", parent, parts, text),
        ).lastrowid
        conn.execute("INSERT INTO messages_fts (rowid, text) VALUES (?, ?)", (seq, text))
        conn.execute("COMMIT")
        parent = f"m{i}"
    elapsed = time.perf_counter() - started
    return elapsed, conn


def memorylab_append(directory, count):
    store = Store(directory / "memorylab.db")
    session = Session.create(store, "s")
    started = time.perf_counter()
    for i in range(count):
        session.append_message({"id": f"m{i}", "role": "user", "parts": [{"type": "text", "text": _text(i)}]})
    elapsed = time.perf_counter() - started
    return elapsed, session


def raw_history(conn, leaf):
    started = time.perf_counter()
    rows = conn.execute(
        """WITH RECURSIVE path(seq, parent_id, depth) AS (
            SELECT seq, parent_id, 0 FROM messages WHERE session = 's' AND id = ?
            UNION ALL
            SELECT m.seq, m.parent_id, path.depth + 1 FROM messages m JOIN path
                ON m.session = 's' AND m.id = path.parent_id)
        SELECT m.id, m.parent_id, m.role, m.parts, m.created_at FROM path JOIN messages m
            ON m.seq = path.seq ORDER BY path.depth DESC""",
        (leaf,),
    ).fetchall()
    history = [{"id": r[0], "parent_id": r[1], "role": r[2], "parts": json.loads(r[3]), "created_at": r[4]}
               for r in rows]
    return time.perf_counter() - started, len(history)


def memorylab_history(session):
    started = time.perf_counter()
    history = session.get_history()
    return time.perf_counter() - started, len(history)


def run(quick):
    count = 2_000 if quick else 10_000
    repetitions = 3 if quick else 5
    timings = {"append": ([], []), "history_read": ([], [])}
    for _ in range(repetitions):
        with tempfile.TemporaryDirectory() as tmp:
            directory = Path(tmp)
            raw_seconds, conn = raw_append(directory, count)
            lab_seconds, session = memorylab_append(directory, count)
            timings["append"][0].append(lab_seconds)
            timings["append"][1].append(raw_seconds)
            for _ in range(3):
                lab_read, lab_rows = memorylab_history(session)
                raw_read, raw_rows = raw_history(conn, f"m{count - 1}")
                assert lab_rows == raw_rows == count
                timings["history_read"][0].append(lab_read)
                timings["history_read"][1].append(raw_read)
            conn.close()
            session.store.close()
    units = {"append": f"{count} appends, one transaction each", "history_read": f"one {count}-deep path"}
    targets = {"append": 2.0, "history_read": 2.0}
    results = {}
    for name, (lab, raw) in timings.items():
        lab_median, raw_median = statistics.median(lab), statistics.median(raw)
        results[name] = {"memorylab": lab_median, "baseline": raw_median,
                         "ratio": lab_median / raw_median, "target": targets[name], "unit": units[name]}
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller workload, fewer repetitions")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    results = run(args.quick)
    print(f"{'benchmark':<14}{'memorylab s':>13}{'sqlite3 s':>12}{'ratio':>8}{'target':>8}  workload")
    for name, r in results.items():
        flag = "" if r["ratio"] <= r["target"] else "  OVER TARGET"
        print(f"{name:<14}{r['memorylab']:>13.4f}{r['baseline']:>12.4f}{r['ratio']:>8.2f}{r['target']:>8.1f}"
              f"  {r['unit']}{flag}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
