"""Claude Code files that join a session already stored: subagent and compaction-agent transcripts.

A subagent's file (``<session>/subagents/agent-<id>.jsonl``) carries its parent's ``sessionId`` and
goes into that session. Its report counts the branches of the stored tree, and an entry whose
parent is a message the session already holds hangs on that message.
"""
import json
from pathlib import Path

from memorylab import Session
from memorylab.importers import import_source

DATA = Path(__file__).resolve().parent.parent / "data" / "claude_code"


def opened(store, report):
    return Session.open(store, report.sessions[0].session_id, agent_id="claude-code")


def test_a_subagent_file_joining_a_stored_session_reports_the_branches_of_the_stored_tree(store, tmp_path):
    lines = (DATA / "sidechain.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    main = tmp_path / "5d0b9e7a.jsonl"
    main.write_text("".join(lines[:2] + lines[6:]), encoding="utf-8")
    agent = tmp_path / "agent-a3f9c2d1.jsonl"
    agent.write_text("".join(json.dumps({**json.loads(line), "agentId": "a3f9c2d1"}) + "\n" for line in lines[2:6]),
                     encoding="utf-8")
    assert import_source(store, main).sessions[0].branches == 2  # the edited prompt forks it

    report = import_source(store, agent)
    assert len(opened(store, report).get_leaves()) == 3
    assert (report.sessions[0].status, report.sessions[0].branches) == ("grew", 3)
    assert import_source(store, agent).sessions[0].branches == 3  # unchanged, counted the same

