import json
import time

import pytest

from memorylab.experiments.strategies import suggested_plan_settings
from memorylab.history import compaction
from memorylab.history.compaction import (
    DEFAULT_SUMMARY_TEMPLATE,
    SUMMARY_SECTIONS,
    build_summary_prompt,
    create_compact_function,
    plan_compaction,
)
from memorylab.history.overlays import apply_overlays, summary_message
from tests.helpers import ids


def message(message_id, text="", role="user", tokens=10, parts=None):
    return {
        "id": message_id, "role": role, "parts": parts or [{"type": "text", "text": text or f"text of {message_id}"}],
        "created_at": "2026-01-01T00:00:00.000Z", "metadata": {}, "tokens": tokens,
    }


def history(count, tokens=10):
    return [message(f"m{i}", role="user" if i % 2 else "assistant", tokens=tokens) for i in range(1, count + 1)]


def tool_call(message_id, call_id, output=None, tokens=10):
    part = {"type": "tool-search", "toolCallId": call_id, "toolName": "search", "input": {"q": call_id},
            "state": "input-available"}
    if output is not None:
        part.update(output=output, state="output-available")
    return message(message_id, role="assistant", tokens=tokens, parts=[part])


def tool_result(message_id, call_id, output="found it", tokens=10):
    return message(message_id, role="tool", tokens=tokens, parts=[
        {"type": "tool-search", "toolCallId": call_id, "toolName": "search", "output": output,
         "state": "output-available"}])


def summary(overlay_id, text, from_id, to_id, covered):
    overlay = {"id": overlay_id, "summary": text, "from_id": from_id, "to_id": to_id,
               "created_at": "2026-01-02T00:00:00.000Z"}
    return summary_message(overlay, covered)


def test_head_middle_and_tail_follow_the_settings():
    plan = plan_compaction(history(10), protect_head=3, tail_token_budget=25, min_tail_messages=2)
    assert ids(plan.head) == ["m1", "m2", "m3"]
    assert ids(plan.middle) == ["m4", "m5", "m6", "m7", "m8"]
    assert ids(plan.tail) == ["m9", "m10"]
    assert (plan.from_id, plan.to_id) == ("m4", "m8")
    assert plan.previous_summary is None
    assert (plan.tokens_before, plan.head_tokens, plan.middle_tokens, plan.tail_tokens) == (100, 30, 50, 20)
    assert plan.target_summary_tokens == 100
    assert plan.tokens_after == 30 + 100 + 20
    assert (plan.protect_head, plan.tail_token_budget, plan.min_tail_messages) == (3, 25, 2)


def test_nothing_to_compact_gives_none():
    assert plan_compaction([]) is None
    assert plan_compaction(history(5), protect_head=10) is None
    # everything after the head fits the tail budget
    assert plan_compaction(history(8), protect_head=3, tail_token_budget=1000) is None
    # the tail cannot reach into the head, and the middle is empty
    assert plan_compaction(history(5), protect_head=3, tail_token_budget=0, min_tail_messages=4) is None


def test_a_zero_tail_budget_still_keeps_the_newest_message():
    plan = plan_compaction(history(10), tail_token_budget=0, min_tail_messages=0)
    assert ids(plan.tail) == ["m10"]
    assert ids(plan.middle) == [f"m{i}" for i in range(4, 10)]


def test_min_tail_messages_wins_over_the_budget():
    plan = plan_compaction(history(12), tail_token_budget=10, min_tail_messages=5)
    assert ids(plan.tail) == ["m8", "m9", "m10", "m11", "m12"]
    assert plan.tail_tokens == 50


def test_the_tail_takes_only_consecutive_newest_messages_that_fit():
    messages = history(10)
    messages[7]["tokens"] = 500  # m8 does not fit, so m7 (small) must not be taken either
    plan = plan_compaction(messages, tail_token_budget=100, min_tail_messages=1)
    assert ids(plan.tail) == ["m9", "m10"]


def test_tail_boundary_moves_back_to_keep_a_separate_tool_result_with_its_call():
    messages = history(4) + [tool_call("call", "c1"), tool_result("result", "c1"), message("answer", role="assistant")]
    plan = plan_compaction(messages, tail_token_budget=20, min_tail_messages=1)
    assert ids(plan.tail) == ["call", "result", "answer"]
    assert ids(plan.middle) == ["m4"]


def test_tail_boundary_keeps_parallel_results_with_their_call():
    messages = history(4) + [
        tool_call("call", "c1"), tool_result("r1", "c1"), tool_result("r2", "c2"), message("answer", role="assistant"),
    ]
    messages[4]["parts"].append({**messages[4]["parts"][0], "toolCallId": "c2"})
    plan = plan_compaction(messages, tail_token_budget=20, min_tail_messages=1)
    assert ids(plan.tail) == ["call", "r1", "r2", "answer"]


def test_a_call_with_its_output_in_one_message_is_not_moved():
    messages = history(6) + [tool_call("call", "c1", output={"hits": 3}), message("answer", role="assistant")]
    plan = plan_compaction(messages, tail_token_budget=20, min_tail_messages=1)
    assert ids(plan.tail) == ["call", "answer"]
    assert plan.to_id == "m6"


def test_head_boundary_moves_forward_to_take_the_tool_result():
    messages = [message("m1"), tool_call("call", "c1"), tool_result("result", "c1")] + history(10)[3:]
    plan = plan_compaction(messages, protect_head=2, tail_token_budget=20)
    assert ids(plan.head) == ["m1", "call", "result"]
    assert plan.from_id == "m4"


def test_head_boundary_takes_every_result_of_parallel_calls():
    messages = [message("m1"), tool_call("call", "c1"), tool_result("r1", "c1"), tool_result("r2", "c2")]
    messages += history(10)[4:]
    plan = plan_compaction(messages, protect_head=2, tail_token_budget=20)
    assert ids(plan.head) == ["m1", "call", "r1", "r2"]


def test_an_existing_summary_is_handed_over_and_superseded():
    originals = history(20)
    old = summary(1, "The user ordered A-100 on 3 May.", "m4", "m12", originals[3:12])
    overlaid = originals[:3] + [old] + originals[12:]
    plan = plan_compaction(overlaid, protect_head=3, tail_token_budget=20)
    assert ids(plan.middle)[0] == "compaction_1"
    assert plan.previous_summary == "The user ordered A-100 on 3 May."
    assert (plan.from_id, plan.to_id) == ("m4", "m18")
    assert "The user ordered A-100 on 3 May." in plan.prompt
    assert "rather than starting over" in plan.prompt
    assert "assistant: The user ordered" not in plan.prompt  # not summarized as if it were a message
    # stored as an overlay from the same start, the new summary hides the old one on read
    new = {"id": 2, "summary": "grown", "from_id": plan.from_id, "to_id": plan.to_id, "created_at": "2026-01-03"}
    raw = {"id": 1, "summary": "The user ordered A-100 on 3 May.", "from_id": "m4", "to_id": "m12",
           "created_at": "2026-01-02"}
    assert ids(apply_overlays(originals, [raw, new])) == ["m1", "m2", "m3", "compaction_2", "m19", "m20"]


def test_a_summary_inside_the_protected_head_goes_to_the_middle():
    originals = history(12)
    old = summary(5, "earlier facts", "m2", "m5", originals[1:5])
    overlaid = [originals[0], old] + originals[5:]
    plan = plan_compaction(overlaid, protect_head=3, tail_token_budget=20)
    assert ids(plan.head) == ["m1"]
    assert ids(plan.middle)[0] == "compaction_5"
    assert plan.from_id == "m2"
    assert plan.previous_summary == "earlier facts"


def test_a_summary_at_the_end_of_the_middle_maps_to_its_last_original():
    originals = history(10)
    old = summary(3, "middle facts", "m3", "m8", originals[2:8])
    overlaid = originals[:2] + [old] + originals[8:]
    plan = plan_compaction(overlaid, protect_head=1, tail_token_budget=20)
    assert ids(plan.middle) == ["m2", "compaction_3"]
    assert (plan.from_id, plan.to_id) == ("m2", "m8")


def test_a_middle_of_only_a_summary_is_nothing_to_compact():
    originals = history(10)
    overlaid = originals[:3] + [summary(1, "all of it", "m4", "m8", originals[3:8])] + originals[8:]
    assert plan_compaction(overlaid, protect_head=3, tail_token_budget=20) is None


def test_older_summaries_stay_in_the_transcript_and_the_newest_is_updated():
    originals = history(20)
    first = summary(1, "first stretch: budget is 40k", "m2", "m4", originals[1:4])
    second = summary(2, "second stretch: vendor is Acme", "m6", "m9", originals[5:9])
    overlaid = [originals[0], first, originals[4], second] + originals[9:]
    plan = plan_compaction(overlaid, protect_head=1, tail_token_budget=20)
    assert plan.previous_summary == "second stretch: vendor is Acme"
    assert "earlier summary: first stretch: budget is 40k" in plan.prompt
    assert plan.from_id == "m2"


def test_the_prompt_asks_for_the_four_sections_and_the_target():
    plan = plan_compaction(history(30, tokens=50), tail_token_budget=100)
    for section in SUMMARY_SECTIONS:
        assert f"## {section}" in plan.prompt
    assert f"about {plan.target_summary_tokens} tokens" in plan.prompt
    assert "user: text of m5" in plan.prompt


def test_the_target_is_a_fifth_of_the_middle_rounded_up_and_at_least_100():
    messages = history(10)
    messages[4]["tokens"] = 963  # middle m4..m8 = 10 + 963 + 30 = 1003 tokens
    plan = plan_compaction(messages, tail_token_budget=20)
    assert plan.middle_tokens == 1003
    assert plan.target_summary_tokens == 201
    assert plan_compaction(history(10), tail_token_budget=20).target_summary_tokens == 100


def test_the_transcript_shows_tool_calls_with_cut_outputs_and_no_reasoning():
    long_output = {"rows": ["x" * 40] * 20}
    messages = [
        message("u", "find the invoices"),
        message("a", role="assistant", parts=[{"type": "reasoning", "text": "secret chain of thought"},
                                             {"type": "text", "text": "Searching."}]),
        tool_call("call", "c1"), tool_result("result", "c1", output=long_output),
        tool_call("inline", "c2", output="2 hits"),
    ]
    prompt = build_summary_prompt(messages, target_tokens=100)
    assert "secret chain of thought" not in prompt
    assert "assistant: Searching." in prompt
    assert 'assistant: tool search({"q":"c2"}) -> 2 hits' in prompt
    line = next(line for line in prompt.splitlines() if '"q":"c1"' in line)
    assert line.startswith('assistant: tool search({"q":"c1"}) -> {"rows":["xxx')
    assert line.endswith("chars]")
    assert "[truncated" in line
    assert len(line) < 400
    assert "tool: tool search" not in prompt  # the separate result is shown once, with its call


def test_a_custom_template_is_filled_exactly():
    template = "Summarize in {target_tokens} tokens.\n{previous_summary}---\n{transcript}"
    prompt = build_summary_prompt([message("a", "hello")], target_tokens=120, template=template)
    assert prompt == "Summarize in 120 tokens.\n---\nuser: hello"
    with_previous = build_summary_prompt([message("a", "hello")], previous_summary="old", target_tokens=120,
                                         template=template)
    assert "<previous_summary>\nold\n</previous_summary>" in with_previous
    plan = plan_compaction(history(10), tail_token_budget=20, prompt_template=template)
    assert plan.prompt.startswith("Summarize in 100 tokens.")
    assert plan.prompt_template == template
    assert "{transcript}" in DEFAULT_SUMMARY_TEMPLATE


@pytest.mark.parametrize("template, complaint", [
    ("Summarize {previous_summary} in {target_tokens} tokens", "{transcript}"),
    ("{transcript} for {audience}", "audience"),
    ("{transcript} {", "not a valid format string"),
])
def test_a_bad_template_is_refused_with_the_reason(template, complaint):
    with pytest.raises(ValueError, match="template") as error:
        plan_compaction(history(10), prompt_template=template)
    assert complaint in str(error.value)
    with pytest.raises(ValueError):
        create_compact_function(lambda prompt: "x", prompt_template=template)


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="protect_head"):
        plan_compaction(history(3), protect_head=-1)
    with pytest.raises(ValueError, match="tail_token_budget"):
        plan_compaction(history(3), tail_token_budget="many")


def test_a_token_counter_replaces_the_stored_counts():
    seen = []

    def counter(messages):
        seen.append(messages)
        return 100

    plan = plan_compaction(history(10), tail_token_budget=250, token_counter=counter)
    assert all(isinstance(batch, list) and len(batch) == 1 for batch in seen)
    assert ids(plan.tail) == ["m9", "m10"]
    assert plan.tokens_before == 1000


def test_messages_without_stored_tokens_are_estimated():
    messages = [{key: value for key, value in m.items() if key != "tokens"} for m in history(10)]
    plan = plan_compaction(messages, tail_token_budget=24)
    # "text of mN": 3 words -> 4 tokens, plus 4 per message
    assert plan.tokens_before == 10 * (4 + 4)
    assert ids(plan.tail) == ["m8", "m9", "m10"]


def test_to_dict_is_json_with_ids():
    plan = plan_compaction(history(10), tail_token_budget=20)
    plain = json.loads(json.dumps(plan.to_dict()))
    assert plain["head_ids"] == ["m1", "m2", "m3"]
    assert plain["middle_ids"] == ["m4", "m5", "m6", "m7", "m8"]
    assert plain["tail_ids"] == ["m9", "m10"]
    assert plain["prompt"] == plan.prompt
    assert plain["tokens_after"] == plan.tokens_after


def test_compact_runs_exactly_the_planned_compaction():
    prompts = []

    def summarize(prompt):
        prompts.append(prompt)
        return "  ## Topic\nInvoices\n"

    messages = history(40, tokens=30)
    settings = {"protect_head": 2, "tail_token_budget": 200, "min_tail_messages": 3}
    plan = plan_compaction(messages, **settings)
    result = create_compact_function(summarize, **settings)(messages)
    assert prompts == [plan.prompt]
    assert (result["from_id"], result["to_id"]) == (plan.from_id, plan.to_id)
    assert result["plan"] == plan
    assert result["summary"] == "## Topic\nInvoices"


def test_compact_gives_none_without_a_plan_or_a_summary():
    calls = []
    compact = create_compact_function(lambda prompt: calls.append(prompt) or "   \n", tail_token_budget=20)
    assert compact(history(10)) is None  # the model answered with whitespace
    assert len(calls) == 1
    assert create_compact_function(lambda prompt: None, tail_token_budget=20)(history(10)) is None
    assert compact(history(3)) is None  # nothing to compact: the model is not asked
    assert len(calls) == 1


def test_summarizer_errors_propagate():
    def failing(prompt):
        raise RuntimeError("model is down")

    with pytest.raises(RuntimeError, match="model is down"):
        create_compact_function(failing, tail_token_budget=20)(history(10))
    with pytest.raises(TypeError, match="string"):
        create_compact_function(lambda prompt: 42, tail_token_budget=20)(history(10))


def test_planning_ten_thousand_messages_uses_the_stored_counts(monkeypatch):
    def no_tokenizing(messages):
        raise AssertionError("plan_compaction re-tokenized a message that has a stored count")

    monkeypatch.setattr(compaction, "estimate_message_tokens", no_tokenizing)
    messages = history(10_000, tokens=25)
    started = time.perf_counter()
    plan = plan_compaction(messages)
    elapsed = time.perf_counter() - started
    print(f"plan_compaction over 10,000 messages: {elapsed * 1000:.1f} ms")
    assert ids(plan.head) == ["m1", "m2", "m3"]
    assert len(plan.tail) == 800  # 20,000 / 25
    assert len(plan.middle) == 10_000 - 3 - 800
    assert (plan.from_id, plan.to_id) == ("m4", "m9200")
    assert plan.tokens_before == 250_000
    assert plan.target_summary_tokens == (len(plan.middle) * 25 + 4) // 5


def test_suggested_settings_compact_a_branch_of_any_size_with_a_tail_share_rounded_to_100():
    branch = history(40, tokens=50)  # 2,000 tokens
    settings = suggested_plan_settings(branch)
    assert settings == {"protect_head": 3, "tail_token_budget": 500, "min_tail_messages": 2}
    assert suggested_plan_settings(branch, tail_share=8)["tail_token_budget"] == 200
    assert suggested_plan_settings(history(3))["tail_token_budget"] == 100  # never under 100
    assert plan_compaction(branch, **settings).middle
