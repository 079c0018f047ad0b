"""How many LLM spans a second ``memorylab collect`` writes, from 20 OTLP/HTTP exporters at once.

``memorylab collect`` runs in a process of its own on an empty SQLite store. The spans are made
beforehand with the OpenTelemetry SDK (GenAI chat spans, each sending its conversation's whole
context: ``tests/otel_agent.synthetic_calls``), then 20 threads, each with its own real
``OTLPSpanExporter``, export theirs in batches of 512 (the SDK's batch processor's size). The clock
runs from the first export until the store holds every message those calls make; then every answer
is counted, one per span, so a span lost shows. Run by ``python benchmarks/run.py --only collect``.
"""
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.otel_agent import synthetic_calls, tracer_provider  # noqa: E402

EXPORTERS = 20
CALLS = 20
"""Calls a conversation: its last sends a context of 39 messages."""
BATCH = 512
TARGET_SPANS_PER_SECOND = 2000


def made_spans(conversations):
    """Each exporter's spans: ``conversations`` conversations of ``CALLS`` calls."""
    batches = []
    for exporter in range(EXPORTERS):
        provider = tracer_provider()
        for conversation in range(conversations):
            synthetic_calls(provider.get_tracer("load"), f"e{exporter}-c{conversation}", CALLS)
        batches.append(provider.memory.get_finished_spans())
    return batches


def measure(workdir, conversations):
    """(seconds, spans sent, answers stored, peak MiB of the collect process)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    spans = made_spans(conversations)
    total = sum(map(len, spans))
    database, port = workdir / "collect.db", _free_port()
    with open(workdir / "collect.log", "w") as log:
        process = subprocess.Popen([sys.executable, "-m", "memorylab", "--db", str(database), "collect", "--port",
                                    str(port), "--settle", "0.5"], cwd=ROOT, stdout=log, stderr=log,
                                   preexec_fn=_interruptible)
        try:
            _wait_for(port)
            failures = []

            def export(own):
                exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces", timeout=60)
                for start in range(0, len(own), BATCH):
                    if exporter.export(own[start:start + BATCH]) != SpanExportResult.SUCCESS:
                        failures.append(start)
                exporter.shutdown()

            started = time.perf_counter()
            threads = [threading.Thread(target=export, args=(own,)) for own in spans]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            _wait_until_stored(database, 2 * total, timeout=600)
            seconds = time.perf_counter() - started
            peak = _peak_mib(process.pid)
        finally:
            process.send_signal(signal.SIGINT)
            process.wait(timeout=120)
    with sqlite3.connect(database) as conn:
        answers = conn.execute("SELECT COUNT(*) FROM messages WHERE role = 'assistant'").fetchone()[0]
    return seconds, total - len(failures) * BATCH, answers, peak


def _interruptible():
    """The collector stops on SIGINT, as on Ctrl-C, even when this benchmark was started in the
    background by a script (which ignores SIGINT, and a child inherits that)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for(port, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"memorylab collect did not listen on port {port} within {timeout} s")


def _wait_until_stored(database, messages, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with sqlite3.connect(database) as conn:
                if conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] >= messages:
                    return
        except sqlite3.OperationalError:
            pass  # the collector's first write is making the tables
        time.sleep(0.05)


def _peak_mib(pid):
    status = Path(f"/proc/{pid}/status")
    if not status.exists():
        return None
    line = next(line for line in status.read_text().splitlines() if line.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        print(measure(Path(tmp), int(os.environ.get("CONVERSATIONS", "10"))))
