"""Importing Claude Code session transcripts (``~/.claude/projects/<project>/<session id>.jsonl``).

Claude Code has no Python writer, so these tests read real-shaped transcripts kept in
``tests/data/claude_code`` (see its README for what each is modelled on), and pieces of them cut,
grown or broken in ``tmp_path``.
"""
import json
import shutil
from pathlib import Path

import pytest

from memorylab import ImportFormatError, Session, to_openai
from memorylab.importers import FORMATS, SourceProbe, detect_format, import_source
from tests.helpers import count_rows

DATA = Path(__file__).resolve().parent.parent / "data" / "claude_code"
TOOL_USE, COMPACTED, SIDECHAIN, RESUMED = (DATA / f"{name}.jsonl" for name in
                                           ("tool-use", "compacted", "sidechain", "resumed"))


def tool_use(n):
    return f"7a1e{n:04d}-1c2d-4e5f-8a9b-0c1d2e3f4a5b"


def compacted(n):
    return f"c0de{n:04d}-5b6c-4d7e-9f80-a1b2c3d4e5f6"


def sidechain(n):
    return f"d15c{n:04d}-3e4f-4a5b-8c6d-7e8f9a0b1c2d"


def opened(store, report):
    return Session.open(store, report.sessions[0].session_id, agent_id="claude-code")


def ids(messages):
    return [m["id"] for m in messages]


def assert_valid_request(history):
    """Every tool call is answered right after its message, and every tool message answers one."""
    request = to_openai(history)
    for index, message in enumerate(request):
        if message["role"] == "tool":
            assert request[index - 1]["role"] in ("assistant", "tool"), request[index - 1]
        calls = [c["id"] for c in message.get("tool_calls") or ()]
        answers = [m.get("tool_call_id") for m in request[index + 1:index + 1 + len(calls)]]
        assert answers == calls, (message, answers)
    return request


def lines_of(path):
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


def assert_broken_line_refused(store, tmp_path, source, number, line, problem):
    """``source`` with ``line`` put in as its line ``number`` is refused naming the file, the line and
    ``problem`` (a pattern), and nothing is written."""
    lines = lines_of(source)
    path = tmp_path / "broken.jsonl"
    path.write_text("".join(lines[:number - 1] + [line] + lines[number - 1:]), encoding="utf-8")
    with pytest.raises(ImportFormatError, match=f"broken\\.jsonl, {problem}.*nothing was imported"):
        import_source(store, path)
    assert store.sessions.count() == 0 and count_rows(store, "messages") == 0


def test_a_response_written_over_several_entries_is_one_message_with_its_calls_answered(store):
    report = import_source(store, TOOL_USE)
    assert (report.format, report.messages_found, report.messages_added) == ("claude-code", 9, 9)
    session = opened(store, report)
    assert session.session_id == "3f2c5b1e-8a47-4d0e-9c61-2b7d9e4f0a13"
    metadata = session.info["metadata"]
    assert metadata["title"] == "Fix the flaky weather cache test"
    assert metadata["skipped_entries"] == {"file-history-snapshot": 1, "system/turn_duration": 1}
    assert (metadata["cwd"], metadata["git_branch"]) == ("/home/ana/src/weather", "main")

    history = session.get_history()
    assert ids(history) == [tool_use(n) for n in (1, 2, 6, 7, 8, 10, 11, 13, 15)]
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "tool", "assistant", "tool", "assistant",
                                            "user", "assistant"]
    response = history[1]
    assert [p["type"] for p in response["parts"]] == ["reasoning", "text", "tool-Read", "tool-Bash"]
    assert response["parts"][0]["text"].startswith("A flaky expiry test")
    assert response["parts"][0]["providerMetadata"]["anthropic"]["signature"].startswith("EqQC")
    assert response["metadata"]["source_ids"] == [tool_use(n) for n in (2, 3, 4, 5)]
    assert response["metadata"]["model"] == "claude-sonnet-4-5-20250929"
    assert response["metadata"]["anthropic_usage"]["cache_read_input_tokens"] == 14302
    assert response["metadata"]["usage"]["prompt_tokens"] == 4 + 1873 + 14302  # cached input counts too
    assert response["metadata"]["stop_reason"] == "tool_use"
    assert response["created_at"] == "2025-10-14T09:12:07.402Z"

    read, bash, edit = history[2]["parts"][0], history[3]["parts"][0], history[5]["parts"][0]
    assert (read["toolName"], read["state"]) == ("Read", "output-available")
    assert read["output"].startswith("     1\u2192import time")
    assert (bash["type"], bash["state"]) == ("tool-Bash", "output-error")
    assert "1 failed" in bash["output"]
    assert edit["output"] == "The file /home/ana/src/weather/tests/test_cache.py has been updated."
    # Claude Code hangs the Read result on the Read entry, a sibling of the Bash entry: the results
    # follow their response as one chain instead.
    assert (history[2]["parent_id"], history[3]["parent_id"]) == (tool_use(2), tool_use(6))
    assert len(session.get_leaves()) == 1

    request = assert_valid_request(history)
    assert [c["id"] for c in request[1]["tool_calls"]] == ["toolu_01Read7sYvG2nQwE4kLp9Tz",
                                                          "toolu_01Bash3xRt8mKc5nVb2Lq4Wd"]
    assert request[1]["content"] == "I'll read the test and run it."  # the reasoning stays out of requests
    # The next prompt hangs on a skipped turn_duration note: it continues the response before it.
    assert history[7]["parent_id"] == tool_use(11)


def test_compact_summaries_become_overlays_and_the_history_reads_summary_then_newer(store):
    report = import_source(store, COMPACTED)
    assert (report.messages_found, report.overlays_added) == (10, 2)
    session = opened(store, report)

    stored = session.get_history(apply_compactions=False)
    assert ids(stored) == [compacted(n) for n in (1, 2, 4, 5, 6, 7, 10, 11, 14, 15)]
    assert stored[6]["parent_id"] == compacted(7)  # under the boundary's logical parent
    manual, auto = session.get_compactions()
    assert (manual["from_id"], manual["to_id"]) == (compacted(1), compacted(7))
    assert (auto["from_id"], auto["to_id"]) == (compacted(1), compacted(11))
    assert manual["summary"].startswith("This session is being continued from a previous conversation")
    assert "Primary Request and Intent: add retries" in manual["summary"]
    assert manual["metadata"] == {"source_id": compacted(9), "boundary_id": compacted(8),
                                  "created_at": "2025-11-03T14:03:01.266Z", "trigger": "manual", "pre_tokens": 48211}
    assert auto["metadata"]["trigger"] == "auto"

    history = session.get_history()
    assert [m["parts"][0]["text"] for m in history] == [auto["summary"], "Tag a release.", "Tagged v1.4.0."]
    session.remove_compaction(auto["id"])
    history = session.get_history()
    assert history[0]["parts"][0]["text"] == manual["summary"]
    assert ids(history[1:]) == [compacted(n) for n in (10, 11, 14, 15)]
    assert_valid_request(history)


def test_a_subagent_sidechain_and_an_edited_prompt_are_kept_as_branches(store):
    session = opened(store, import_source(store, SIDECHAIN))
    leaves = session.get_leaves()
    assert ids(leaves) == [sidechain(12), sidechain(10), sidechain(6)]

    main = session.get_history()
    assert ids(main) == [sidechain(n) for n in (1, 2, 7, 8, 11, 12)]
    assert main[2]["parts"][0]["output"].startswith("The configuration is loaded by load_config")
    edited = session.get_history(sidechain(10))
    assert ids(edited) == [sidechain(n) for n in (1, 2, 7, 8, 9, 10)]

    subagent = session.get_history(sidechain(6))
    assert ids(subagent) == [sidechain(n) for n in (3, 4, 5, 6)]
    assert subagent[0]["parent_id"] is None
    assert all(m["metadata"]["sidechain"] for m in subagent)
    assert "sidechain" not in main[0]["metadata"]
    assert subagent[2]["parts"][0]["toolName"] == "Grep"
    for history in (main, edited, subagent):
        assert_valid_request(history)


def test_a_resumed_session_stays_one_history_under_its_first_session_id(store):
    report = import_source(store, RESUMED)
    session = opened(store, report)
    assert session.session_id == "e6a14c3b-9d27-4b58-8f10-3c5e7a9d2b46"
    assert session.info["metadata"]["title"] == "Markdown export for notes"
    history = session.get_history()
    assert len(history) == 6 and len(session.get_leaves()) == 1
    assert {m["metadata"]["session_id"] for m in history[4:]} == {"0c94f8d1-7b3e-4a26-9c5d-e1f20a3b4c57"}
    assert history[4]["parent_id"] == history[3]["id"]


def test_importing_again_adds_nothing_and_a_grown_transcript_adds_only_its_new_entries(store, tmp_path):
    lines = lines_of(TOOL_USE)
    path = tmp_path / "3f2c5b1e-8a47-4d0e-9c61-2b7d9e4f0a13.jsonl"
    path.write_text("".join(lines[:7]), encoding="utf-8")  # ends inside a response whose calls run
    first = import_source(store, path)
    assert (first.messages_found, first.messages_added) == (1, 1)  # the response waits for its results

    path.write_text("".join(lines[:13]), encoding="utf-8")
    grown = import_source(store, path)
    assert (grown.sessions[0].status, grown.messages_added) == ("grew", 6)
    with path.open("a", encoding="utf-8") as file:
        file.writelines(lines[13:])
    grown = import_source(store, path)
    assert (grown.messages_found, grown.messages_added) == (9, 2)
    assert import_source(store, path).messages_added == 0
    assert count_rows(store, "messages") == 9

    whole = opened(store, grown).get_history()
    assert ids(whole) == [tool_use(n) for n in (1, 2, 6, 7, 8, 10, 11, 13, 15)]
    assert [p["type"] for p in whole[1]["parts"]] == ["reasoning", "text", "tool-Read", "tool-Bash"]
    assert_valid_request(whole)

    import_source(store, COMPACTED)
    again = import_source(store, COMPACTED)
    assert (again.messages_added, again.overlays_added, again.sessions[0].status) == (0, 0, "unchanged")


def test_a_transcript_cut_at_its_start_imports_what_it_holds(store, tmp_path):
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(lines_of(TOOL_USE)[7:]), encoding="utf-8")  # from the first tool result on
    session = opened(store, import_source(store, cut))
    orphan = session.get_message(tool_use(6))
    assert (orphan["role"], orphan["parent_id"]) == ("user", None)  # its call is not in the file
    assert orphan["parts"][0]["text"].startswith("     1\u2192import time")
    history = session.get_history()
    assert ids(history) == [tool_use(n) for n in (7, 8, 10, 11, 13, 15)]
    assert_valid_request(history)

    after_compaction = tmp_path / "after.jsonl"
    after_compaction.write_text("".join(lines_of(COMPACTED)[7:]), encoding="utf-8")  # from the first boundary
    session = opened(store, import_source(store, after_compaction))
    summary = session.get_message(compacted(9))  # what it summarized is not in the file: kept as a message
    assert (summary["role"], summary["parent_id"], summary["metadata"]["compact_summary"]) == ("user", None, True)
    (overlay,) = session.get_compactions()
    assert (overlay["from_id"], overlay["to_id"]) == (compacted(9), compacted(11))
    assert [m["parts"][0]["text"] for m in session.get_history()][1:] == ["Tag a release.", "Tagged v1.4.0."]


@pytest.mark.parametrize("line, problem", [
    ('{"type":"user","uuid":"7a1e0099-1c2d", "message": {"role": "us\n', "line 9: not valid JSON"),
    ('{"type":"assistant","uuid":"7a1e0099-1c2d"}\n',
     "line 9: expected a 'uuid' and a 'message' object in this assistant entry"),
    ('["not", "an", "entry"]\n', r"line 9: expected a transcript entry \(a JSON object\), got list"),
    ('{"type":"user","uuid":"u9","parentUuid":null,"message":{"role":"user","content":7}}\n',
     "line 9: expected message.content to be a string or a list"),
])
def test_a_broken_line_is_refused_naming_the_file_and_line_and_nothing_is_written(store, tmp_path, line, problem):
    assert_broken_line_refused(store, tmp_path, TOOL_USE, 9, line, problem)


def test_a_transcript_is_told_apart_from_other_jsonl(tmp_path):
    for path in (TOOL_USE, COMPACTED, SIDECHAIN, RESUMED):
        assert detect_format(path).name == "claude-code"
    copy = shutil.copy(TOOL_USE, tmp_path / "no-extension")
    assert detect_format(copy).name == "claude-code"

    chats = tmp_path / "chats.jsonl"
    chats.write_text("".join(json.dumps({"messages": [{"role": "user", "content": f"hi {n}"},
                                                     {"role": "assistant", "content": "hello"}]}) + "\n"
                             for n in range(3)))
    assert detect_format(chats).name == "openai-messages"
    assert not FORMATS["claude-code"].detect(SourceProbe(chats))
    events = tmp_path / "events.jsonl"
    events.write_text('{"type": "click", "x": 1}\n{"type": "scroll", "y": 2}\n')
    assert not FORMATS["claude-code"].detect(SourceProbe(events))

    long_prompt = tmp_path / "long.jsonl"  # a first line longer than what detection reads
    first = json.loads(lines_of(TOOL_USE)[2])
    first["message"]["content"] = "x" * 300_000
    long_prompt.write_text(json.dumps(first) + "\n" + "".join(lines_of(TOOL_USE)[3:]), encoding="utf-8")
    assert detect_format(long_prompt).name == "claude-code"


def test_a_subagent_file_joins_its_parent_session_as_a_tree_of_its_own(store, tmp_path):
    lines = lines_of(SIDECHAIN)
    main = tmp_path / "5d0b9e7a.jsonl"
    main.write_text("".join(lines[:2] + lines[6:]), encoding="utf-8")
    agent = tmp_path / "agent-a3f9c2d1.jsonl"  # newer releases write a subagent to a file of its own
    agent.write_text("".join(json.dumps({**json.loads(line), "agentId": "a3f9c2d1"}) + "\n" for line in lines[2:6]),
                     encoding="utf-8")
    import_source(store, main)
    report = import_source(store, agent)
    assert (report.sessions[0].status, report.messages_added) == ("grew", 4)
    session = opened(store, report)
    subagent = session.get_history(sidechain(6))
    assert ids(subagent) == [sidechain(n) for n in (3, 4, 5, 6)]
    assert subagent[0]["parent_id"] is None and subagent[0]["metadata"]["agent_id"] == "a3f9c2d1"
    assert ids(session.get_history(sidechain(12))) == [sidechain(n) for n in (1, 2, 7, 8, 11, 12)]
