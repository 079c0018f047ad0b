"""``memorylab watch``: transcripts followed as they grow, each line read once.

The transcripts are those of the Claude Code and Codex import tests, written into ``tmp_path`` a few
bytes at a time (lines cut anywhere, as an agent's writes may be seen), with the watch looking in
between; what it leaves in the store is compared with a one-shot import of the whole file.
"""
import json
import os
import signal
import threading
import time

import pytest

from memorylab import Store
from memorylab.importers import import_source
from memorylab.importers.watch import Watcher, watch_sources
from tests.contract.test_import_claude_code import DATA as CLAUDE_CODE
from tests.contract.test_import_codex import SESSIONS as CODEX
from tests.helpers import memorylab_process

TRANSCRIPTS = sorted(CLAUDE_CODE.glob("*.jsonl")) + sorted(CODEX.rglob("*.jsonl"))
TOOL_USE_ID = "3f2c5b1e-8a47-4d0e-9c61-2b7d9e4f0a13"
PICKUP_SECONDS = 2.0


def tenant_sessions(store, tenant):
    """{session id: (messages with parents, overlays, metadata)} of every session of ``tenant``."""
    found = {}
    for row in store.sessions.list(tenant_id=tenant):
        storage = store.sessions.storage(store.sessions.find(tenant, row["agent_id"], row["session_id"]))
        messages = sorted((m["id"], m["parent_id"], m["role"], m["parts"], m["metadata"]) for m in storage.all())
        overlays = [(o["from_id"], o["to_id"], o["summary"], o["metadata"]) for o in storage.overlays()]
        found[row["session_id"]] = (messages, overlays, storage.info()["metadata"])
    return found


def grow(path, data, step, look):
    """Write ``data`` to ``path`` ``step`` bytes at a time, calling ``look()`` after each write."""
    for start in range(0, len(data), step):
        with open(path, "ab") as file:
            file.write(data[start:start + step])
        look()


def user_line(text, parent, uuid, session_id=TOOL_USE_ID):
    """A Claude Code user entry, as the agent appends it when the user types."""
    return json.dumps({"parentUuid": parent, "sessionId": session_id, "type": "user", "uuid": uuid,
                       "timestamp": "2025-10-14T10:00:00.000Z", "message": {"role": "user", "content": text}}) + "\n"


def last_uuid(path):
    return [json.loads(line) for line in path.read_text().splitlines()][-1]["uuid"]


def message_ids(store, session_id=TOOL_USE_ID, tenant="default"):
    pk = store.sessions.find(tenant, "claude-code", session_id)
    return set() if pk is None else {m["id"] for m in store.sessions.storage(pk).all()}


@pytest.mark.parametrize("transcript", TRANSCRIPTS, ids=lambda path: path.name[:40])
def test_a_file_watched_as_it_is_written_ends_as_a_one_shot_import_of_it(store, tmp_path, transcript):
    path = tmp_path / transcript.name
    path.touch()
    problems = []
    watcher = Watcher(store, [path], tenant_id="watched", on_problem=lambda file, message: problems.append(message))
    grow(path, transcript.read_bytes(), 97, watcher.poll)
    watcher.close()
    import_source(store, path, tenant_id="imported")
    assert problems == []
    assert tenant_sessions(store, "watched") == tenant_sessions(store, "imported")


def test_a_grown_file_is_read_from_where_the_watch_left_it_never_from_its_start(store, tmp_path):
    path = tmp_path / "session.jsonl"
    path.write_bytes((CLAUDE_CODE / "tool-use.jsonl").read_bytes())
    problems = []
    watcher = Watcher(store, [path], on_problem=lambda file, message: problems.append(message))
    watcher.poll()
    before = message_ids(store)
    # The first line is spoilt in place: a watch that read the file again from its start would refuse it.
    with open(path, "r+b") as file:
        first = file.readline()
        file.seek(0)
        file.write(b"x" * (len(first) - 1))
    with open(path, "a", encoding="utf-8") as file:
        file.write(user_line("And push it.", last_uuid(CLAUDE_CODE / "tool-use.jsonl"), "7a1e0099-aaaa"))
    watcher.poll()
    watcher.close()
    assert problems == []
    assert message_ids(store) - before >= {"7a1e0099-aaaa"}


def test_a_malformed_line_is_named_and_the_other_files_are_still_watched(store, tmp_path):
    for name in ("broken", "fine"):
        (tmp_path / f"{name}.jsonl").write_bytes((CLAUDE_CODE / "tool-use.jsonl").read_bytes())
    problems = []
    watcher = Watcher(store, [tmp_path / "broken.jsonl"], tenant_id="broken",
                      on_problem=lambda file, message: problems.append((file.name, message)))
    watcher.paths.append(tmp_path / "fine.jsonl")
    watcher.poll()
    with open(tmp_path / "broken.jsonl", "a") as file:
        file.write('{"type": "user", "message": \n')
    watcher.poll()
    parent = last_uuid(CLAUDE_CODE / "tool-use.jsonl")
    with open(tmp_path / "fine.jsonl", "a") as file:
        file.write(user_line("Still here?", parent, "7a1e0098-aaaa"))
    watcher.poll()
    watcher.close()
    [(name, message)] = problems
    lines = len((CLAUDE_CODE / "tool-use.jsonl").read_text().splitlines())
    assert name == "broken.jsonl" and f"broken.jsonl, line {lines + 1}: not valid JSON" in message
    assert "7a1e0098-aaaa" in message_ids(store, tenant="broken")


def test_a_file_replaced_by_another_is_read_anew(store, tmp_path):
    path = tmp_path / "session.jsonl"
    path.write_bytes((CLAUDE_CODE / "tool-use.jsonl").read_bytes())
    watcher = Watcher(store, [tmp_path])
    watcher.poll()
    replacement = tmp_path / "next.tmp"
    replacement.write_bytes((CLAUDE_CODE / "resumed.jsonl").read_bytes())
    os.replace(replacement, path)
    watcher.poll()
    watcher.poll()
    watcher.close()
    assert {row["session_id"] for row in store.sessions.list()} == {TOOL_USE_ID,
                                                                   "e6a14c3b-9d27-4b58-8f10-3c5e7a9d2b46"}


def test_an_appended_line_is_in_the_store_within_two_seconds_and_new_files_are_picked_up(store, tmp_path):
    project = tmp_path / "projects" / "-home-ana-src-weather"
    project.mkdir(parents=True)
    stop = threading.Event()
    watching = threading.Thread(target=watch_sources, args=(store, [tmp_path / "projects"]), kwargs={"stop": stop})
    watching.start()
    try:
        path = project / f"{TOOL_USE_ID}.jsonl"
        path.write_bytes((CLAUDE_CODE / "tool-use.jsonl").read_bytes())  # a new file in the watched folder
        assert wait_for(lambda: message_ids(store), PICKUP_SECONDS * 2)
        with open(path, "a", encoding="utf-8") as file:
            file.write(user_line("And push it.", last_uuid(path), "7a1e0099-aaaa"))
        took = wait_for(lambda: "7a1e0099-aaaa" in message_ids(store), PICKUP_SECONDS)
        print(f"picked up in {took:.2f} s")
        assert took is not None
    finally:
        stop.set()
        watching.join(10)
    assert not watching.is_alive()


def wait_for(condition, seconds):
    """Seconds until ``condition()`` holds, polled every 20 ms; None when it did not within ``seconds``."""
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if condition():
            return time.monotonic() - start
        time.sleep(0.02)
    return None


def test_the_watch_command_imports_what_a_transcript_gains_and_stops_on_ctrl_c(tmp_path):
    path = tmp_path / "transcripts" / f"{TOOL_USE_ID}.jsonl"
    path.parent.mkdir()
    path.write_bytes((CLAUDE_CODE / "tool-use.jsonl").read_bytes())
    db = tmp_path / "lab.db"
    Store(str(db)).close()
    watch = memorylab_process("--db", str(db), "watch", str(path.parent))
    try:
        with Store(str(db)) as store:
            assert wait_for(lambda: message_ids(store), 15)
            with open(path, "a", encoding="utf-8") as file:
                file.write(user_line("And push it.", last_uuid(path), "7a1e0099-aaaa"))
            assert wait_for(lambda: "7a1e0099-aaaa" in message_ids(store), PICKUP_SECONDS)
    finally:
        watch.send_signal(signal.SIGINT)
        out, err = watch.communicate(timeout=15)
    assert watch.returncode == 0, err
    assert f"{path}: {TOOL_USE_ID} (agent claude-code) +" in out
    assert "watch stopped" in err
