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
MAIN = DATA / "compacted-mid-file.jsonl"
COMPACTION_AGENT = DATA / "agent-acompact-7f3e2a91c4b8d605.jsonl"


def main_entry(n):
    return f"b07a{n:04d}-6d2e-4c81-9a3f-5e7b1c0d4f26"


def agent_entry(n):
    return f"ac0c{n:04d}-2b9d-4e57-8f16-3a4c6e8d0b12"


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


def test_a_compaction_agent_file_hangs_on_the_stored_message_it_continues(store):
    main = import_source(store, MAIN)
    report = import_source(store, COMPACTION_AGENT)
    joined = report.sessions[0]
    assert (joined.session_id, joined.status, joined.messages_added) == (main.sessions[0].session_id, "grew", 2)
    assert joined.branches == 2

    session = opened(store, report)
    prompt, response = session.get_message(agent_entry(1)), session.get_message(agent_entry(2))
    # It names the last entry of the main transcript's response, which is stored as the response's message.
    assert prompt["parent_id"] == main_entry(5)
    assert response["parent_id"] == agent_entry(1)
    assert prompt["metadata"]["agent_id"] == "acompact-7f3e2a91c4b8d605" and prompt["metadata"]["sidechain"]
    assert [p["type"] for p in response["parts"]] == ["reasoning", "text"]
    first_of_each_leaf = {session.get_history(leaf["id"], apply_compactions=False)[0]["id"]
                          for leaf in session.get_leaves()}
    assert first_of_each_leaf == {main_entry(1)}  # one tree, not one more per entry of the agent's file

    compaction = session.get_history(agent_entry(2), apply_compactions=False)
    assert [m["id"] for m in compaction] == [main_entry(n) for n in (1, 2, 4, 5)] + [agent_entry(1), agent_entry(2)]
    assert [m["id"] for m in session.get_history(main_entry(11), apply_compactions=False)] == [
        main_entry(n) for n in (1, 2, 4, 5, 10, 11)]
    assert import_source(store, COMPACTION_AGENT).messages_added == 0


def test_a_compaction_agent_file_imported_before_its_main_transcript_starts_a_tree_of_its_own(store):
    session = opened(store, import_source(store, COMPACTION_AGENT))
    assert session.get_message(agent_entry(1))["parent_id"] is None
    assert [m["id"] for m in session.get_history(agent_entry(2))] == [agent_entry(1), agent_entry(2)]


def test_an_entry_naming_a_stored_message_by_its_own_id_hangs_on_it(store, tmp_path):
    import_source(store, MAIN)
    agent = tmp_path / "agent-acompact-7f3e2a91c4b8d605.jsonl"
    entries = [json.loads(line) for line in COMPACTION_AGENT.read_text(encoding="utf-8").splitlines()]
    entries[0]["parentUuid"] = main_entry(10)  # the user's prompt, one entry, stored under its uuid
    agent.write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")
    session = opened(store, import_source(store, agent))
    assert session.get_message(agent_entry(1))["parent_id"] == main_entry(10)
