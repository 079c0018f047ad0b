"""The compaction audit at scale: ``python benchmarks/run.py --audit [--compactions N] [--json PATH]``.

Builds a SQLite store of sessions of 500 messages, each compacted ten times over consecutive
50-message spans with a ten-message tail (the sample conversations' messages, tool calls and results
included, cycled so every span holds real-shaped artifacts, each text made unique), then audits every
compaction the way ``memorylab audit`` does, in a fresh process, and reports the time and the peak memory:
what that process grew by, or the largest worker process it started, whichever is more. Target: 10,000
compactions in under 60 s.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

SPAN = 50
SPANS_PER_SESSION = 10
TAIL = 10
TARGET_SECONDS = 60.0


def _letters(number):
    word = ""
    while True:
        number, digit = divmod(number, 26)
        word += "abcdefghijklmnopqrstuvwxyz"[digit]
        if not number:
            return word


def _minute(i):
    return f"2026-01-{1 + i // 1440:02}T{i // 60 % 24:02}:{i % 60:02}:00Z"

_AUDIT_SCRIPT = """
import json, os, resource, sys, time
from memorylab import Store
from memorylab.audit import iter_store_audits
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.perf_counter()
count = artifacts = 0
with Store(sys.argv[1]) as store:
    for audit in iter_store_audits(store, workers=os.cpu_count()):
        count += 1
        artifacts += len(audit.kept) + len(audit.lost)
seconds = time.perf_counter() - started
own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # the largest worker process, whole
grown = max(own, workers) / 1024
print(json.dumps({"compactions": count, "artifacts": artifacts, "seconds": seconds, "peak_growth_mib": grown}))
"""


def _sample_messages():
    from memorylab.samples import sample_files

    messages = []
    for path in sample_files():
        messages += [m for m in json.loads(path.read_text())["messages"] if m["role"] != "system"]
    return messages


def build_store(path: Path, compactions: int) -> None:
    """Sessions of ``SPAN * SPANS_PER_SESSION`` messages with their compactions, written through the
    import writer (one transaction per session)."""
    from memorylab import Store
    from memorylab.importers import SourceMessage, SourceOverlay, SourceSession, write_sessions

    samples = _sample_messages()
    sessions = -(-compactions // SPANS_PER_SESSION)

    def message(number, i):
        """A sample message made unique (its text parts end with the session and message number, in letters), so
        no cache of the matcher sees the same text twice; one minute after the one before."""
        sample = samples[(number * 7 + i) % len(samples)]
        tag = f"{_letters(number)} {_letters(i)}"  # letters only: a tag of digits would add a number to every text
        parts = [{**part, "text": f"{part['text']} ({tag})"} if part.get("type") == "text" else part
                 for part in sample["parts"]]
        return {**sample, "id": f"s{number}m{i}", "parts": parts, "metadata": {}, "created_at": _minute(i)}

    def session(number):
        length = SPAN * SPANS_PER_SESSION
        messages = [SourceMessage(message(number, i), parent_id=f"s{number}m{i - 1}" if i else None)
                    for i in range(length)]
        spans = min(SPANS_PER_SESSION, compactions - number * SPANS_PER_SESSION)
        overlays = []
        for k in range(spans):
            covered = [m.message for m in messages[k * SPAN:(k + 1) * SPAN]]
            summary = f"Summary {k}: " + " ".join(
                (m["parts"][0].get("text") or "")[:80] for m in covered[::10])
            # Compacted as a live agent does: with the ten messages after the span in its tail.
            overlays.append(SourceOverlay(covered[0]["id"], covered[-1]["id"], summary,
                                          {"created_at": _minute((k + 1) * SPAN + TAIL)}))
        return SourceSession(f"bench-{number}", messages, overlays=overlays)

    with Store(path) as store:
        for number in range(sessions):
            write_sessions(store, [session(number)], source="benchmark", format_name="benchmark",
                           agent_id="bench", tenant_id="default")


def bench_audit(workdir: Path, compactions: int) -> dict:
    path = workdir / "audit.db"
    started = time.perf_counter()
    build_store(path, compactions)
    built = time.perf_counter() - started
    done = subprocess.run([sys.executable, "-c", _AUDIT_SCRIPT, str(path)], capture_output=True, text=True, check=True)
    measured = json.loads(done.stdout)
    return {**measured, "build_seconds": built, "span_messages": SPAN,
            "target_seconds": TARGET_SECONDS * compactions / 10_000}


def print_audit(measured: dict, markdown: bool) -> None:
    ok = "ok" if measured["seconds"] <= measured["target_seconds"] else "SLOW"
    row = (f"{measured['compactions']:,} compactions of {measured['span_messages']}-message spans",
           f"{measured['seconds']:.1f} s", f"{measured['target_seconds']:.0f} s",
           f"{measured['peak_growth_mib']:.0f} MiB", f"{measured['artifacts']:,}", ok)
    headers = ("audit", "time", "target", "peak RSS growth", "artifacts judged", "status")
    if markdown:
        print("| " + " | ".join(headers) + " |\n|" + "---|" * len(headers) + "\n| " + " | ".join(row) + " |")
    else:
        for header, value in zip(headers, row):
            print(f"{header:>18}: {value}")
