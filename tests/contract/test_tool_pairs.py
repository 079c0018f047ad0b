"""Tool-pair integrity: the lint on hand-made trees, samples and imported transcripts, on both
backends, and the ChatRunner that refuses or repairs an orphan before the model sees it."""
import random
import time

import pytest

from memorylab import InvalidInputError, Session, lint_tool_pairs, load_samples
from memorylab.history.overlays import apply_overlays
from memorylab.history.tool_pairs import MISSING_RESULT, lint_path, lint_tree
from memorylab.importers import import_source
from memorylab.llm.chat import ChatRunner, chat_errors
from memorylab.messages import is_tool_part
from tests.helpers import ROOT, text_message

CLAUDE_CODE = sorted((ROOT / "tests" / "data" / "claude_code").glob("*.jsonl"))


def calls(message_id, *call_ids, text=None):
    """An assistant message calling ``call_ids``, their results to come in tool messages."""
    parts = [{"type": "text", "text": text}] if text else []
    return {"id": message_id, "role": "assistant", "parts": parts + [
        {"type": "tool-read", "toolCallId": c, "toolName": "read", "input": {}, "state": "input-available"}
        for c in call_ids]}


def answered(message_id, call_id):
    """An assistant message whose call carries its own result."""
    return {"id": message_id, "role": "assistant", "parts": [
        {"type": "tool-read", "toolCallId": call_id, "toolName": "read", "input": {}, "output": "ok",
         "state": "output-available"}, {"type": "text", "text": "read it"}]}


def results(message_id, *call_ids):
    return {"id": message_id, "role": "tool", "parts": [
        {"type": "tool-read", "toolCallId": c, "toolName": "read", "output": "file text", "state": "output-available"}
        for c in call_ids]}


def user(message_id):
    return text_message(message_id, f"words of {message_id}")


def reply(message_id):
    return text_message(message_id, f"answer {message_id}", role="assistant")


def grow(session, *chain, parent=None):
    """Append ``chain`` one under the other, starting under ``parent`` (None: a new root)."""
    for message in chain:
        parent = session.append_message(message, parent_id=parent)["id"]
    return parent


def found(session):
    return [(f.kind, f.message_ids, f.tool_call_id, f.leaf_id, f.paths) for f in lint_tool_pairs(session)]


def test_calls_answered_inline_in_tool_messages_in_parallel_or_still_waiting_are_clean(session):
    grow(session, user("u1"), answered("a1", "c1"), calls("a2", "c2", "c3", text="two reads"),
         results("t2", "c3", "c2"), reply("a3"), user("u2"), calls("a4", "c4"), calls("a5", "c5"), results("t4", "c4"))
    assert found(session) == []  # c5 has no result yet, but only tool traffic follows it: the round goes on
    grow(session, calls("w1", "c9"), parent="a3")  # a branch ending in a call: waiting, not orphaned
    assert found(session) == []


def test_a_result_without_its_call_on_a_side_branch_only_names_that_branch(session):
    grow(session, user("u1"), calls("a1", "c1"), results("t1", "c1"), reply("a2"))
    side = grow(session, results("t9", "c1"), reply("b2"), parent="u1")
    [finding] = lint_tool_pairs(session)
    assert (finding.kind, finding.message_ids, finding.tool_call_id, finding.leaf_id) == \
        ("orphan_result", ("t9",), "c1", side)
    assert "t9" in finding.detail and "delete the result in t9" in finding.detail
    assert finding.to_dict()["message_ids"] == ["t9"]


def test_a_call_left_behind_by_later_turns_is_reported_once_for_every_branch_below_it(session):
    grow(session, user("u1"), calls("a1", "c1"), user("u2"), reply("x1"))
    grow(session, reply("y1"), parent="u2")
    assert found(session) == [("orphan_call", ("a1",), "c1", "x1", 2)]


def test_a_result_for_a_call_already_answered_is_an_orphan(session):
    grow(session, user("u1"), answered("a1", "c1"), results("t1", "c1"))
    [finding] = lint_tool_pairs(session)
    assert finding.kind == "orphan_result" and "already has its result" in finding.detail


def test_one_call_id_called_twice_on_a_path_is_a_duplicate(session):
    grow(session, user("u1"), calls("a1", "c1"), results("t1", "c1"), user("u2"), calls("a2", "c1"),
         results("t2", "c1"), reply("a3"))
    assert found(session) == [("duplicate_call_id", ("a1", "a2"), "c1", "a3", 1)]


def test_an_overlay_that_hides_a_call_but_not_its_result_splits_the_pair(session):
    grow(session, user("u1"), calls("a1", "c1"), results("t1", "c1"), reply("a2"))
    session.add_compaction("the user asked to read a file", "u1", "a1")
    assert found(session) == [("split_by_overlay", ("a1", "t1"), "c1", "a2", 1)]
    assert "end the overlay at t1 or later" in lint_tool_pairs(session)[0].detail
    # The history as read holds the summary, not the call: there the result is simply orphaned.
    assert [(f.kind, f.message_ids) for f in lint_path(session.get_history())] == [("orphan_result", ("t1",))]


def test_an_overlay_on_one_branch_splits_pairs_only_there(session):
    grow(session, user("u1"), calls("a1", "c1"), results("tA", "c1"), reply("aA"))
    leaf = grow(session, results("tB", "c1"), calls("aB", "c2"), results("tB2", "c2"), user("uB"), parent="a1")
    session.add_compaction("branch B read two files", "tB", "aB")
    assert found(session) == [("split_by_overlay", ("a1", "tB"), "c1", leaf, 1),
                              ("split_by_overlay", ("aB", "tB2"), "c2", leaf, 1)]


def test_an_overlay_covering_a_whole_tool_round_leaves_nothing_to_report(session):
    grow(session, user("u1"), calls("a1", "c1"), results("t1", "c1"), reply("a2"), user("u2"))
    session.add_compaction("read a file, answered", "u1", "a2")
    assert found(session) == []


def random_tree(rng, size):
    """Messages of a random tree (parents first): calls, results (each call answered at most once, on
    whatever branch, or a call that never was) and turns. Duplicate ids and second results are left to
    the hand-made trees: with an overlay between them, the walk pairs by stored order, a read history
    by what it shows."""
    messages, unanswered = [], []
    for number in range(size):
        parent = messages[rng.randrange(len(messages))]["id"] if messages and rng.random() < 0.3 else (
            messages[-1]["id"] if messages else None)
        choice = rng.random()
        if choice < 0.3:
            unanswered.append(f"c{number}")
            message = calls(f"m{number}", f"c{number}")
        elif choice < 0.6 and unanswered:
            message = results(f"m{number}", unanswered.pop(rng.randrange(len(unanswered))))
        elif choice < 0.65:
            message = results(f"m{number}", f"gone{number}")
        else:
            message = user(f"m{number}") if number % 2 else reply(f"m{number}")
        messages.append({**message, "parent_id": parent})
    return messages


@pytest.mark.parametrize("seed", range(40))
def test_the_tree_walk_finds_what_linting_every_path_alone_finds(seed):
    rng = random.Random(seed)
    messages = random_tree(rng, 60)
    by_id = {m["id"]: m for m in messages}
    overlays = []
    for number, end in enumerate(rng.sample(list(by_id), 4), start=1):  # each over a stretch of one path
        path = path_to(by_id, end)
        start = path[rng.randrange(max(len(path) - 6, 0), len(path))]["id"]
        overlays.append({"id": number, "from_id": start, "to_id": end, "summary": "s",
                         "created_at": "2026-01-01T00:00:00.000Z"})
    parents = {m["parent_id"] for m in messages}
    expected = {}
    for leaf in [m["id"] for m in messages if m["id"] not in parents]:
        for f in lint_path(apply_overlays(path_to(by_id, leaf), overlays)):
            key = (f.kind, f.message_ids, f.tool_call_id)
            expected[key] = expected.get(key, 0) + 1
    actual = {}
    for f in lint_tree(messages, overlays):
        kind, ids = f.kind, f.message_ids
        if kind == "split_by_overlay":  # read as sent, the half of a split pair left visible is an orphan
            shown = {m["id"] for m in apply_overlays(path_to(by_id, f.leaf_id), overlays)}
            kind, ids = ("orphan_result", ids[1:]) if ids[1] in shown else ("orphan_call", ids[:1])
        key = (kind, ids, f.tool_call_id)
        actual[key] = actual.get(key, 0) + f.paths
    assert actual == expected


def path_to(by_id, leaf):
    path = []
    while leaf is not None:
        path.append(by_id[leaf])
        leaf = by_id[leaf]["parent_id"]
    return path[::-1]


def test_the_sample_sessions_lint_clean(store):
    load_samples(store)
    rows = store.sessions.list()
    coding = Session.open(store, "coding-csv-importer", agent_id="code-helper")
    assert any(is_tool_part(p) for m in coding.get_all_messages() for p in m["parts"])
    for row in rows:
        session = Session.open(store, row["session_id"], tenant_id=row["tenant_id"], agent_id=row["agent_id"])
        assert lint_tool_pairs(session) == [], row["session_id"]


@pytest.mark.parametrize("transcript", CLAUDE_CODE, ids=lambda p: p.name)
def test_imported_claude_code_transcripts_lint_clean(store, transcript):
    report = import_source(store, transcript)
    for row in store.sessions.list(agent_id="claude-code"):
        session = Session.open(store, row["session_id"], agent_id="claude-code")
        assert lint_tool_pairs(session) == []
    assert report.messages_added


def test_the_parallel_calls_of_an_imported_transcript_are_paired(store):
    import_source(store, ROOT / "tests" / "data" / "claude_code" / "tool-use.jsonl")
    [row] = store.sessions.list(agent_id="claude-code")
    session = Session.open(store, row["session_id"], agent_id="claude-code")
    tool_parts = [p for m in session.get_all_messages() for p in m["parts"] if is_tool_part(p)]
    assert len({p["toolCallId"] for p in tool_parts}) >= 2 and lint_tool_pairs(session) == []
    session.delete_messages([m["id"] for m in session.get_all_messages() if m["role"] == "tool"][:1])
    assert {f.kind for f in lint_tool_pairs(session)} == {"orphan_call"}


LINT_SECONDS = 1.5
"""The lint of 20,000 messages with 200 branches, read already (measured: 0.23 to 0.42 s on a busy core)."""


def long_branched_tree(count=20_000, branches=200):
    """A tool round every three messages along one trunk; every hundredth message also starts a
    five-message side branch, a fifth of which hang under a call and so orphan it."""
    messages = []
    for number in range(count - 5 * branches):
        kind = number % 3
        message = (calls(f"t{number}", f"c{number}") if kind == 1 else
                   results(f"t{number}", f"c{number - 1}") if kind == 2 else user(f"t{number}"))
        messages.append({**message, "parent_id": f"t{number - 1}" if number else None})
    for branch in range(branches):
        parent = f"t{branch * 93 + (1 if branch % 5 == 0 else 2)}"  # a call, or the result that answers it
        for step in range(5):
            message = user(f"b{branch}.{step}") if step % 2 == 0 else reply(f"b{branch}.{step}")
            messages.append({**message, "parent_id": parent})
            parent = message["id"]
    return messages


def test_twenty_thousand_messages_on_two_hundred_branches_lint_in_well_under_a_second():
    messages = long_branched_tree()
    started = time.perf_counter()
    findings = lint_tree(messages, [{"id": 1, "from_id": "t3", "to_id": "t9000", "summary": "s",
                                     "created_at": "2026-01-01T00:00:00.000Z"}])
    elapsed = time.perf_counter() - started
    assert len(messages) == 20_000 and elapsed < LINT_SECONDS, elapsed
    orphaned = {f.message_ids for f in findings}
    assert {f.kind for f in findings} == {"orphan_call"} and len(orphaned) == 40  # branches under a call
    assert all(f.paths == 1 for f in findings)


def refused_history(session):
    """u1 - a1 (calls c1, never answered) - u2 - t9 (answers a call nobody made) - a2."""
    grow(session, user("u1"), calls("a1", "c1"), user("u2"), results("t9", "c7"), reply("a2"))


def test_the_chat_runner_refuses_a_history_with_an_orphan_and_names_the_message(session, litellm):
    refused_history(session)
    runner = ChatRunner(session, model="gpt-4o-mini", mock_response="ok")
    with pytest.raises(InvalidInputError, match="a1 calls 'c1'") as raised:
        runner.send("and now?")
    assert "delete the result in t9" in str(raised.value) and "repair_tool_pairs=True" in str(raised.value)
    assert chat_errors(session)[-1]["kind"] == "tool_pairs"
    assert runner.last_request is None  # nothing reached the model


def test_the_chat_runner_repairs_orphans_in_the_request_only(session, litellm):
    refused_history(session)
    stored = {m["id"]: m["parts"] for m in session.get_all_messages()}
    runner = ChatRunner(session, model="gpt-4o-mini", mock_response="ok", repair_tool_pairs=True)
    answer = runner.send("and now?")
    assert answer["parts"] == [{"type": "text", "text": "ok"}]
    sent = runner.last_request["messages"]
    call_at = next(i for i, m in enumerate(sent) if m.get("tool_calls"))
    assert sent[call_at + 1] == {"role": "tool", "tool_call_id": "c1", "content": MISSING_RESULT}
    assert not any(m.get("tool_call_id") == "c7" for m in sent)
    assert {m["id"]: m["parts"] for m in session.get_all_messages() if m["id"] in stored} == stored
    assert runner.build_request(answer["parent_id"])["messages"] == sent  # what the lab shows is what was sent
