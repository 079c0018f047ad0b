"""The lab at real scale: a store holding the samples, one session of 20,000 messages with a fork every
100 (200 branches) and three compaction overlays, and 3,000 small sessions; then every page rendered
through Streamlit's AppTest with the long session selected, first render and rerun.

    python benchmarks/scale.py [--db PATH] [--messages N] [--sessions N] [--page NAME ...]
    python benchmarks/scale.py --probe OPERATION TARGET

``--probe`` runs one of ``MEMORY_OPERATIONS`` on the long session of the store at TARGET (a file or a
PostgreSQL URL) and prints its peak memory growth and seconds as JSON (``memory_growth`` runs it in a
fresh process).

Without ``--db`` the store is built in a temporary directory; with it, an existing file is reused
as it is (build it once, measure many times).
"""
import argparse
import json
import logging
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memorylab import Session, Store, import_session, load_samples, plan_compaction  # noqa: E402
from memorylab.check import check_database  # noqa: E402
from memorylab.history.tool_pairs import lint_tool_pairs  # noqa: E402
from memorylab.importers import import_source  # noqa: E402
from memorylab.io import EXPORT_FORMAT, EXPORT_VERSION, write_export  # noqa: E402

LONG_SESSION = ("default", "scale-agent", "long-session")
"""(tenant, agent, session id) of the long session, as the lab's ``session_ref`` names it."""
PAGES = ("sessions", "chat", "tree", "context_blocks", "context_window", "compaction_lab", "search", "memory",
         "long_term")
FORK_EVERY = 100
TOOL_EVERY = 50


def long_session_export(count):
    """``count`` messages: one conversation whose every hundredth answer is regenerated (a sibling of
    the one before, which stays behind as a one-message branch), so the newest path is about
    ``count`` long and the tree has ``count / 100`` branches. Every ``TOOL_EVERY``-th message is an
    answer that also looked its ticket up (a tool call with its output), so the tool-pair lint has
    calls to walk."""
    messages = []
    for i in range(count):
        parent = i - 2 if i % FORK_EVERY == FORK_EVERY - 1 else i - 1
        role = "user" if i % 2 == 0 else "assistant"
        text = (f"Message {i}: the migration of table orders_{i % 37} needs batch {i % 11} re-run; "
                f"owner {('Ana', 'Bo', 'Chen')[i % 3]}, ticket MIG-{1000 + i}.")
        parts = [{"type": "text", "text": text}]
        if i % TOOL_EVERY == 1:
            parts.append({"type": "tool-lookup_ticket", "toolCallId": f"call-{i}", "toolName": "lookup_ticket",
                          "state": "output-available", "input": {"ticket": f"MIG-{1000 + i}"}, "output": "open"})
        messages.append({"id": f"m{i}", "parent_id": f"m{parent}" if parent >= 0 else None, "role": role,
                         "parts": parts, "created_at": "2026-01-01T00:00:00.000Z"})
    return {"format": EXPORT_FORMAT, "version": EXPORT_VERSION,
            "session": {"id": LONG_SESSION[2], "agent_id": LONG_SESSION[1],
                        "metadata": {"title": f"A {count:,}-message migration project"}},
            "messages": messages}


def build_scale_store(target, *, messages=20_000, small_sessions=3_000):
    """The samples, the long session (three overlays over the oldest three sevenths of its path) and
    ``small_sessions`` sessions of four messages, imported as OpenAI chat JSONL."""
    with Store(target) as store:
        load_samples(store)
        add_long_session(store, messages)
        with tempfile.TemporaryDirectory() as tmp:
            small = Path(tmp) / "small.jsonl"
            with open(small, "w", encoding="utf-8") as file:
                for number in range(small_sessions):
                    file.write(json.dumps({"id": f"small-{number:05d}", "messages": [
                        {"role": "user", "content": f"Where is order {number}?"},
                        {"role": "assistant", "content": "It shipped yesterday."},
                        {"role": "user", "content": "Thanks."},
                        {"role": "assistant", "content": "Anything else?"},
                    ]}) + "\n")
            import_source(store, small, agent_id="small-agent")


def add_long_session(store, messages):
    """The long session of ``messages`` messages, with three overlays over the oldest three sevenths of
    its newest path, as compaction leaves them."""
    session = import_session(store, long_session_export(messages))
    path = [m["id"] for m in session.get_history(apply_compactions=False)]
    span = len(path) // 7
    for start in (0, span, 2 * span):
        session.add_compaction(f"Summary of messages {start} to {start + span - 1}: batches re-run, "
                               "owners agreed.", path[start], path[start + span - 1])
    return session


def fill_store(target, messages, *, per_conversation=100):
    """Add ``messages`` more messages to the store, as conversations of ``per_conversation`` from the
    benchmark corpus (orders, refunds, deployments: the text the search queries look for), imported
    as OpenAI chat JSONL under the agent ``filler-agent``."""
    from corpus import openai_messages  # benchmarks/corpus.py, beside this script

    with tempfile.TemporaryDirectory() as tmp, Store(target) as store:
        source = Path(tmp) / "filler.jsonl"
        with open(source, "w", encoding="utf-8") as file:
            corpus = openai_messages(messages)
            for start in range(0, messages, per_conversation):
                file.write(json.dumps({"id": f"filler-{start // per_conversation:06d}",
                                       "messages": corpus[start:start + per_conversation]}) + "\n")
        import_source(store, source, agent_id="filler-agent")


def page_times(target, pages=PAGES, repetitions=3):
    """``{page: (first render, rerun)}`` in seconds, medians over ``repetitions`` fresh AppTests, each
    with the long session selected."""
    from streamlit.testing.v1 import AppTest

    # Each AppTest run in bare mode warns of a missing script context, once per run.
    logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").setLevel(logging.ERROR)
    os.environ["MEMORYLAB_DB"] = str(target)
    AppTest.from_file(str(ROOT / "app_pages" / "sessions.py"), default_timeout=600).run()  # imports, caches
    times = {}
    for page in pages:
        firsts, reruns = [], []
        for _ in range(repetitions):
            app = AppTest.from_file(str(ROOT / "app_pages" / f"{page}.py"), default_timeout=600)
            app.session_state["session_ref"] = LONG_SESSION
            started = time.perf_counter()
            app.run()
            firsts.append(time.perf_counter() - started)
            if app.exception:
                raise RuntimeError(f"{page}: {app.exception[0].message}")
            started = time.perf_counter()
            app.run()
            reruns.append(time.perf_counter() - started)
        times[page] = (statistics.median(firsts), statistics.median(reruns))
    return times


MEMORY_OPERATIONS = {
    "get_history": lambda session, scratch: session.get_history(),
    "iter_history": lambda session, scratch: sum(1 for _ in session.iter_history()),
    "write_export": lambda session, scratch: write_export(session, Path(scratch) / "export.json"),
    "Session.plan_compaction": lambda session, scratch: session.plan_compaction(),
    "plan_compaction(get_history())": lambda session, scratch: plan_compaction(session.get_history()),
    "tool-pair lint": lambda session, scratch: lint_tool_pairs(session),
    "memorylab check": lambda session, scratch: check_database(session.store),
}
"""What ``--probe`` measures, each on the long session: the whole-list reads and their bounded twins."""


def peak_mib():
    """The process's peak resident memory so far, in MiB: Linux's VmHWM, which starts afresh with the
    program, where it has one (ru_maxrss carries the peak of the process that started this one across
    exec, so a probe started by a big benchmark would see no growth at all), else ru_maxrss."""
    status = Path("/proc/self/status")
    if status.exists():
        line = next(line for line in status.read_text().splitlines() if line.startswith("VmHWM:"))
        return int(line.split()[1]) / 1024
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return maxrss / 1024 / (1024 if sys.platform == "darwin" else 1)  # bytes on macOS, KiB elsewhere


def probe(operation, target):
    """``{"mib", "seconds"}`` of one operation: peak memory growth over the process as it stood after
    imports and opening the store and the session, and time taken."""
    with Store(target) as store, tempfile.TemporaryDirectory() as scratch:
        session = Session.open(store, LONG_SESSION[2], tenant_id=LONG_SESSION[0], agent_id=LONG_SESSION[1])
        session.get_latest_leaf_id()
        before, started = peak_mib(), time.perf_counter()
        MEMORY_OPERATIONS[operation](session, scratch)
        return {"mib": peak_mib() - before, "seconds": time.perf_counter() - started}


def memory_growth(operation, target, timeout=600):
    """``probe`` in a fresh Python process, so that no earlier read has raised its peak already;
    ``{"mib": None, "seconds": None}`` when it runs past ``timeout`` seconds."""
    try:
        done = subprocess.run([sys.executable, __file__, "--probe", operation, str(target)], capture_output=True,
                              text=True, check=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"mib": None, "seconds": None}
    return json.loads(done.stdout.splitlines()[-1])


def main():
    if sys.argv[1:2] == ["--probe"]:
        print(json.dumps(probe(*sys.argv[2:4])))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", help="the scale store: built here when the file does not exist, else reused")
    parser.add_argument("--messages", type=int, default=20_000, help="messages of the long session")
    parser.add_argument("--sessions", type=int, default=3_000, help="small sessions beside it")
    parser.add_argument("--page", action="append", choices=PAGES, help="measure only this page (repeatable)")
    parser.add_argument("--repetitions", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(args.db) if args.db else Path(tmp) / "scale.db"
        if not target.exists():
            started = time.perf_counter()
            build_scale_store(target, messages=args.messages, small_sessions=args.sessions)
            print(f"built {target} in {time.perf_counter() - started:.1f} s")
        with Store(target) as store:
            session = Session.open(store, LONG_SESSION[2], agent_id=LONG_SESSION[1])
            print(f"{store.sessions.count():,} sessions; the long one: {session.stats()['messages']:,} messages, "
                  f"{session.stats()['branches']} branches")
        for page, (first, rerun) in page_times(target, args.page or PAGES, args.repetitions).items():
            print(f"{page:<16} first {first:6.2f} s   rerun {rerun:6.2f} s")


if __name__ == "__main__":
    main()
