"""Importing Codex CLI session rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``).

Codex has no Python writer, so these tests read rollouts written by hand in its shape, kept in
``tests/data/codex/sessions`` (see the README beside them), and pieces of them cut, grown or broken in
``tmp_path``.
"""
import json
import shutil
from pathlib import Path

import pytest

from memorylab import Session
from memorylab.cli import main
from memorylab.importers import FORMATS, SourceProbe, detect_format, import_folder, import_source
from tests.contract.test_import_claude_code import DATA as CLAUDE_CODE
from tests.contract.test_import_claude_code import assert_broken_line_refused, assert_valid_request, lines_of
from tests.helpers import count_rows

SESSIONS = Path(__file__).resolve().parent.parent / "data" / "codex" / "sessions"
TOOL_ID, LEDGER_ID = "019a8c2e-4b1f-7d30-9e55-3c8a1f0b6d21", "019a9d41-7c2e-7f08-8b13-5e2d9a4c0f67"
TOOL_CALLS = SESSIONS / "2025/11/18" / f"rollout-2025-11-18T10-00-00-{TOOL_ID}.jsonl"
LEDGER = SESSIONS / "2025/11/20" / f"rollout-2025-11-20T15-00-00-{LEDGER_ID}.jsonl"
RESUMED_AT = 21
"""The ledger rollout's lines before ``codex resume`` appended to it."""


def tool(line):
    return f"{TOOL_ID}:{line}"


def ledger(line):
    return f"{LEDGER_ID}:{line}"


def opened(store, session_id):
    return Session.open(store, session_id, agent_id="codex")


def ids(messages):
    return [m["id"] for m in messages]


def rollout(path, *payloads, session_id="019aa000-0000-7000-8000-00000000000a"):
    """A rollout of ``(type, payload)`` lines after a session_meta, as Codex writes them."""
    lines = [{"timestamp": "2025-11-21T08:00:00.000Z", "type": "session_meta",
              "payload": {"id": session_id, "timestamp": "2025-11-21T08:00:00.000Z",
                          "cwd": "/w", "originator": "codex_cli_rs", "cli_version": "0.63.0"}}]
    lines += [{"timestamp": f"2025-11-21T08:00:{n:02d}.000Z", "type": kind, "payload": payload}
              for n, (kind, payload) in enumerate(payloads, 1)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def said(role, text):
    kind = "output_text" if role == "assistant" else "input_text"
    return "response_item", {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}


def call(call_id, command="ls"):
    return "response_item", {"type": "function_call", "name": "shell_command", "call_id": call_id,
                             "arguments": json.dumps({"command": command})}


def output(call_id, text="ok"):
    return "response_item", {"type": "function_call_output", "call_id": call_id, "output": text}


def test_a_response_is_one_message_with_its_calls_answered_and_its_usage_and_model(store):
    report = import_source(store, TOOL_CALLS)
    assert (report.format, report.messages_found, report.messages_added) == ("codex", 11, 11)
    session = opened(store, TOOL_ID)
    metadata = session.info["metadata"]
    assert metadata["title"].startswith("The cache expiry test in tests/test_cache.py fails")
    assert (metadata["cwd"], metadata["git_branch"], metadata["codex_version"]) == (
        "/home/ana/src/weather", "main", "0.63.0")
    assert metadata["models"] == ["gpt-5.1-codex"] and metadata["model_context_window"] == 272000
    assert metadata["token_usage"]["total_tokens"] == 30590 + 648  # the session's total at its end
    assert metadata["skipped_entries"] == {"event_msg/task_started": 1, "event_msg/user_message": 1,
                                           "event_msg/patch_apply_end": 1, "event_msg/agent_message": 1}

    history = session.get_history()
    assert ids(history) == [tool(n) for n in (2, 3, 6, 9, 13, 14, 15, 19, 21, 23, 24)]
    assert [m["role"] for m in history] == ["system", "user", "user", "assistant", "tool", "tool", "assistant",
                                            "tool", "assistant", "tool", "assistant"]
    assert history[1]["metadata"]["codex_context"] is True  # AGENTS.md and the environment, not a prompt
    first = history[3]
    assert [p["type"] for p in first["parts"]] == ["reasoning", "tool-shell_command", "tool-shell_command"]
    assert first["parts"][0]["text"].startswith("**Reading the flaky test**")
    assert first["parts"][0]["providerMetadata"]["openai"]["reasoningEncryptedContent"].startswith("gAAAAA")
    assert first["parts"][1]["input"] == {"command": "sed -n 1,80p tests/test_cache.py",
                                          "workdir": "/home/ana/src/weather"}
    assert first["metadata"]["source_lines"] == [9, 10, 11]
    assert (first["metadata"]["model"], first["metadata"]["effort"], first["metadata"]["turn_id"]) == (
        "gpt-5.1-codex", "medium", "0")
    assert first["metadata"]["usage"] == {"prompt_tokens": 6811, "completion_tokens": 212, "total_tokens": 7023}
    assert first["metadata"]["codex_usage"]["cached_input_tokens"] == 3072
    assert [m["parent_id"] for m in history[4:6]] == [tool(9), tool(13)]  # the outputs follow as a chain
    assert history[4]["parts"][0]["output"].startswith("Exit code: 0")

    patch = history[6]
    assert [p["type"] for p in patch["parts"]] == ["reasoning", "text", "tool-apply_patch"]
    assert patch["parts"][2]["input"].startswith("*** Begin Patch\n*** Update File: weather/cache.py")
    assert history[7]["parts"][0]["toolName"] == "apply_patch"
    shell = history[8]["parts"][0]
    assert (shell["type"], shell["input"]["command"]) == ("tool-local_shell",
                                                          ["bash", "-lc", "python -m pytest tests/test_cache.py -q"])
    assert history[9]["parts"][0]["state"] == "output-available"
    assert history[10]["parts"] == [{"type": "text", "text": history[10]["parts"][0]["text"]}]
    assert_valid_request(history)


def test_a_compaction_is_an_overlay_over_the_path_it_replaced_and_the_history_reads_what_followed(store):
    report = import_source(store, LEDGER)
    assert (report.messages_found, report.overlays_added, report.sessions[0].branches) == (12, 1, 1)
    session = opened(store, LEDGER_ID)
    (overlay,) = session.get_compactions()
    assert (overlay["from_id"], overlay["to_id"]) == (ledger(2), ledger(10))
    # What the model read instead: the kept context and prompt, then Codex's summary.
    assert "Make it faster; the data is in fixtures/ledger-2025-10.csv." in overlay["summary"]
    assert overlay["summary"].endswith("the plan is to batch the lookups. Nothing has been changed yet.")
    assert overlay["metadata"] == {"source_line": 14, "created_at": "2025-11-20T14:05:00.500Z",
                                   "message": overlay["metadata"]["message"], "replacement_items": 4}
    assert overlay["metadata"]["message"].startswith("Another language model started to solve this problem")

    history = session.get_history()
    assert history[0]["metadata"]["compaction"]["covered_messages"] == 6
    assert [m["parts"][0]["text"] for m in history[1:3]] == [
        "Go ahead and batch them.",
        "Done: find_entry now takes the whole batch of account ids and runs one IN query per 500 rows."]
    assert history[1]["parent_id"] == ledger(10)  # the conversation goes on from where it was compacted
    assert session.info["metadata"]["models"] == ["gpt-5.1-codex-max", "gpt-5.1-codex"]


def test_a_resumed_session_grows_its_own_file_and_an_import_adds_only_the_resumed_lines(store, tmp_path):
    lines = lines_of(LEDGER)
    path = tmp_path / LEDGER.name
    path.write_text("".join(lines[:RESUMED_AT]), encoding="utf-8")
    before = import_source(store, path)
    assert (before.messages_added, before.overlays_added) == (8, 1)

    with path.open("a", encoding="utf-8") as file:  # codex resume appends, with no new session_meta
        file.writelines(lines[RESUMED_AT:])
    resumed = import_source(store, path)
    assert (resumed.sessions[0].session_id, resumed.sessions[0].status) == (LEDGER_ID, "grew")
    assert (resumed.messages_found, resumed.messages_added, resumed.overlays_added) == (12, 4, 0)
    session = opened(store, LEDGER_ID)
    history = session.get_history()
    assert [m["id"] for m in history[3:]] == [ledger(n) for n in (22, 23, 25, 26)]
    assert history[-1]["metadata"]["model"] == "gpt-5.1-codex"  # the resumed turn's model
    assert len(session.get_leaves()) == 1

    again = import_source(store, path)
    assert (again.messages_added, again.overlays_added, again.sessions[0].status) == (0, 0, "unchanged")
    assert count_rows(store, "messages") == 12


def test_a_response_still_running_waits_and_a_grown_file_adds_only_what_is_new(store, tmp_path):
    lines = lines_of(TOOL_CALLS)
    path = tmp_path / TOOL_CALLS.name
    path.write_text("".join(lines[:12]), encoding="utf-8")  # two calls made, no output yet
    first = import_source(store, path)
    assert (first.messages_found, first.messages_added) == (3, 3)  # the response waits for its outputs

    path.write_text("".join(lines[:14]), encoding="utf-8")
    grown = import_source(store, path)
    assert (grown.sessions[0].status, grown.messages_added) == ("grew", 3)
    path.write_text("".join(lines), encoding="utf-8")
    grown = import_source(store, path)
    assert (grown.messages_found, grown.messages_added) == (11, 5)
    assert import_source(store, path).messages_added == 0
    assert count_rows(store, "messages") == 11
    assert_valid_request(opened(store, TOOL_ID).get_history())


def test_a_call_its_turn_ended_without_is_an_error_and_a_stray_output_is_kept_as_text(store, tmp_path):
    path = rollout(tmp_path / "r.jsonl", said("user", "list it"), call("c1"), call("c2"), output("c1", "a.txt"),
                   ("event_msg", {"type": "turn_aborted", "reason": "interrupted"}), output("c9", "late"))
    session = opened(store, import_source(store, path).sessions[0].session_id)
    history = session.get_history()
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "user"]
    calls = history[1]["parts"]
    assert [p["state"] for p in calls] == ["input-available", "output-error"]
    assert calls[1]["errorText"] == "Codex recorded no output for this call"
    assert (history[3]["parts"][0]["text"], history[3]["metadata"]["call_id"]) == ("late", "c9")


def test_a_rolled_back_turn_stays_behind_as_a_branch(store, tmp_path):
    path = rollout(tmp_path / "r.jsonl", said("user", "rename it"), said("assistant", "renamed"),
                   said("user", "now delete it"), said("assistant", "deleted"),
                   ("event_msg", {"type": "thread_rolled_back", "num_turns": 1}),
                   said("user", "no, archive it"), said("assistant", "archived"))
    session_id = import_source(store, path).sessions[0].session_id
    session = opened(store, session_id)
    assert [m["parts"][0]["text"] for m in session.get_history()] == ["rename it", "renamed", "no, archive it",
                                                                    "archived"]
    assert len(session.get_leaves()) == 2
    assert session.get_message(f"{session_id}:7")["parent_id"] == f"{session_id}:3"


def test_a_rollout_without_replacement_history_reads_the_prompts_and_the_summary(store, tmp_path):
    path = rollout(tmp_path / "r.jsonl", said("user", "<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"),
                   said("user", "port cli.py to click"), said("assistant", "ported"),
                   ("compacted", {"message": "cli.py is ported to click."}), said("user", "thanks"))
    session = opened(store, import_source(store, path).sessions[0].session_id)
    (overlay,) = session.get_compactions()
    assert overlay["summary"] == "port cli.py to click\n\ncli.py is ported to click."
    assert overlay["metadata"]["message"] == "cli.py is ported to click."  # the summary Codex wrote
    assert "replacement_items" not in overlay["metadata"]

    remote = rollout(tmp_path / "remote.jsonl", said("user", "go"), said("assistant", "went"),
                     ("compacted", {"message": "", "replacement_history": [
                         {"type": "compaction", "encrypted_content": "gAAAAABp"}]}),
                     session_id="019aa000-0000-7000-8000-00000000000c")
    remote_session = opened(store, import_source(store, remote).sessions[0].session_id)
    (encrypted,) = remote_session.get_compactions()
    assert encrypted["summary"].startswith("(Codex kept no readable summary")
    assert encrypted["metadata"]["encrypted"] is True


def test_a_fork_is_a_session_of_its_own_naming_the_one_it_forked_from(store, tmp_path):
    fork = tmp_path / "rollout-2025-11-21T09-00-00-019aa111-0000-7000-8000-00000000000b.jsonl"
    parent_meta = json.loads(lines_of(LEDGER)[0])
    lines = [{"timestamp": "2025-11-21T09:00:00.000Z", "type": "session_meta",
              "payload": {**parent_meta["payload"], "id": "019aa111-0000-7000-8000-00000000000b",
                          "forked_from_id": LEDGER_ID}}, parent_meta]
    lines += [json.loads(line) for line in lines_of(LEDGER)[1:12]]  # the history it forked from, copied
    fork.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    import_source(store, LEDGER)
    report = import_source(store, fork)
    assert report.sessions[0].session_id == "019aa111-0000-7000-8000-00000000000b"
    session = opened(store, "019aa111-0000-7000-8000-00000000000b")
    assert session.info["metadata"]["forked_from_id"] == LEDGER_ID
    assert session.info["metadata"]["skipped_entries"]["session_meta"] == 1  # the copied meta
    assert len(session.get_history()) == 6


@pytest.mark.parametrize("line, problem", [
    ('{"timestamp":"2025-11-18T09:00:10.000Z","type":"response_item","payload":{"type":"mess\n',
     "line 13: not valid JSON"),
    ('["not", "a", "line"]\n', r"line 13: expected a rollout line \(a JSON object with a 'type' and a 'payload'"),
    ('{"timestamp":"2025-11-18T09:00:10.000Z","type":"response_item","payload":"text"}\n',
     r"line 13: expected a rollout line"),
    ('{"timestamp":7,"type":"response_item","payload":{"type":"message","role":"user","content":[]}}\n',
     "line 13: timestamp must be a datetime or an ISO-8601 string"),
    ('{"timestamp":"yesterday","type":"response_item","payload":{"type":"message","role":"user","content":[]}}\n',
     "line 13: timestamp 'yesterday' is not an ISO-8601 timestamp"),
])
def test_a_broken_line_is_refused_naming_the_file_and_line_and_nothing_is_written(store, tmp_path, line, problem):
    assert_broken_line_refused(store, tmp_path, TOOL_CALLS, 13, line, problem)


def test_a_rollout_is_told_apart_from_other_jsonl_and_claimed_by_no_other_format(tmp_path):
    for path in (TOOL_CALLS, LEDGER):
        assert detect_format(path).name == "codex"
        assert [name for name, f in FORMATS.items() if f.detect(SourceProbe(path))] == ["codex"]
    for path in CLAUDE_CODE.glob("*.jsonl"):
        assert not FORMATS["codex"].detect(SourceProbe(path))
    events = tmp_path / "events.jsonl"
    events.write_text('{"type": "click", "payload": {}}\n{"type": "scroll", "payload": {}}\n')
    assert not FORMATS["codex"].detect(SourceProbe(events))

    long_meta = tmp_path / "long.jsonl"  # a first line longer than what detection reads
    first = json.loads(lines_of(TOOL_CALLS)[0])
    first["payload"]["base_instructions"] = {"text": "x" * 300_000}
    long_meta.write_text(json.dumps(first, separators=(",", ":")) + "\n" + "".join(lines_of(TOOL_CALLS)[1:]))
    assert detect_format(long_meta).name == "codex"


def test_a_sessions_folder_imports_every_rollout_once(store, store_target, tmp_path, capsys):
    tree = shutil.copytree(SESSIONS, tmp_path / "sessions")
    (tree / "2025" / "notes.json").write_text('{"not": "a rollout"}')
    skipped = []
    reports = list(import_folder(store, tree, skipped=lambda file, why: skipped.append(file.name)))
    assert [r.sessions[0].session_id for r in reports] == [TOOL_ID, LEDGER_ID]
    assert sum(r.messages_added for r in reports) == 23 and skipped == ["notes.json"]

    assert main(["--db", str(store_target), "import", str(tree)]) == 0
    printed = capsys.readouterr()
    assert "2 file(s) imported" in printed.out and "unchanged" in printed.out and "notes.json" in printed.err
    assert count_rows(store, "messages") == 23


def test_audit_of_a_rollout_reports_what_its_compaction_lost(capsys):
    assert main(["audit", str(LEDGER)]) == 0
    printed = capsys.readouterr().out
    assert f"{LEDGER_ID} overlay 1: 6 messages" in printed
    assert "lost path       ledger/reconcile.py" in printed
    assert "lost path       fixtures/ledger-2025-10.csv" not in printed  # Codex kept the prompt naming it
