import copy
import json
import re

import pytest

from memorylab.history.truncation import (
    enforce_row_size_limit,
    json_size,
    mask_older_tool_outputs,
    masked_output_placeholder,
    shorten_tool_output,
    stored_bytes,
    truncate_older_messages,
    truncate_text,
)
from memorylab.tokens import estimate_message_tokens

MARKER = re.compile(r"\.\.\. \[(truncated \d+ chars|\d+ more items?)\]")


def text_message(message_id, text, role="user"):
    return {"id": message_id, "role": role, "parts": [{"type": "text", "text": text}], "metadata": {}}


def tool_message(message_id, output, tool_input=None):
    return {"id": message_id, "role": "assistant", "metadata": {}, "parts": [
        {"type": "tool-fetch", "toolCallId": f"call-{message_id}", "toolName": "fetch",
         "input": tool_input if tool_input is not None else {"url": "https://example.com"},
         "output": output, "state": "output-available"}]}


def size_without_markers(value):
    """Compact JSON characters of ``value`` less the marker texts it holds."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return len(text) - sum(len(match.group(0)) for match in MARKER.finditer(text))


def cut_output(output, limit=500):
    [message] = truncate_older_messages([tool_message("a", output)], keep_recent=0, max_tool_output_chars=limit)
    return message["parts"][0]["output"]


def test_long_text_in_older_messages_is_cut_with_the_count():
    messages = [text_message("old", "a" * 12_000), text_message("new", "b" * 12_000)]
    cut = truncate_older_messages(messages, keep_recent=1)
    assert cut[0]["parts"][0]["text"] == "a" * 10_000 + "... [truncated 2000 chars]"
    assert cut[1] is messages[1]


def test_a_cut_that_would_not_save_anything_is_skipped():
    assert truncate_text("x" * 10_010, 10_000) == "x" * 10_010
    assert truncate_text("short", 100) == "short"


def test_string_outputs_are_cut_to_the_limit():
    assert cut_output("z" * 2000) == "z" * 500 + "... [truncated 1500 chars]"


def test_objects_keep_their_keys_and_fit_the_limit():
    output = {"status": 200, "url": "https://example.com/a", "body": "<html>" + "x" * 5000,
              "headers": {"server": "nginx", "set-cookie": "y" * 3000}, "ok": True}
    cut = cut_output(output)
    assert list(cut) == list(output)
    assert list(cut["headers"]) == ["server", "set-cookie"]
    assert (cut["status"], cut["ok"], cut["url"], cut["headers"]["server"]) == (
        200, True, "https://example.com/a", "nginx")
    assert cut["body"].startswith("<html>xxx") and MARKER.search(cut["body"])
    assert size_without_markers(cut) <= 500


def test_arrays_keep_leading_items_and_say_how_many_went():
    output = [{"id": i, "title": f"result {i}", "snippet": "s" * 80} for i in range(100)]
    cut = cut_output(output)
    assert isinstance(cut, list)
    assert cut[0] == output[0]
    assert re.fullmatch(r"\.\.\. \[\d+ more items\]", cut[-1])
    omitted = int(re.search(r"\d+", cut[-1]).group(0))
    assert len(cut) - 1 + omitted == 100
    assert size_without_markers(cut) <= 500


def test_a_list_of_one_huge_item_keeps_a_preview_of_it():
    cut = cut_output(["q" * 5000])
    assert len(cut) == 1
    assert cut[0].startswith("qqq") and cut[0].endswith("chars]")
    assert size_without_markers(cut) <= 500


def test_primitives_are_never_changed():
    for output in (10 ** 600, True, None, 3.5):
        assert cut_output(output, limit=5) is output
    numbers = {f"k{i}": i for i in range(300)}
    assert cut_output(numbers) is numbers  # nothing in it can shrink, so it stays whole


def test_unicode_is_cut_by_characters_and_stays_valid():
    output = {"text": "日本語のテキスト🙂" * 300, "tags": ["ünïcødé"] * 200}
    cut = cut_output(output, limit=300)
    json.loads(json.dumps(cut, ensure_ascii=False))
    assert cut["text"].startswith("日本語のテキスト🙂")
    assert cut["tags"][0] == "ünïcødé"
    assert size_without_markers(cut) <= 300


def test_control_characters_count_with_their_escapes():
    cut = cut_output({"log": "\n\t\x01" * 2000}, limit=200)
    assert size_without_markers(cut) <= 200


def test_cutting_never_makes_a_message_bigger():
    outputs = [
        {f"field{i}": "v" * 30 for i in range(40)},
        [["x" * 10] * 5 for _ in range(60)],
        "y" * 520,
        {"a": [1, 2, 3] * 300, "b": {"c": "d" * 900}},
    ]
    for output in outputs:
        cut = shorten_tool_output(output, 500)
        assert json_size(cut) <= json_size(output)


def test_the_input_is_never_mutated_and_untouched_messages_keep_identity():
    messages = [
        text_message("m1", "fine"),
        tool_message("m2", {"rows": ["r" * 100] * 50}, tool_input={"query": "q" * 2000}),
        text_message("m3", "t" * 20_000, role="assistant"),
        {"id": "m4", "role": "assistant", "parts": [{"type": "reasoning", "text": "r" * 20_000}]},
        text_message("m5", "u" * 20_000),
        tool_message("m6", "o" * 5000),
    ]
    before = copy.deepcopy(messages)
    cut = truncate_older_messages(messages, keep_recent=2)
    assert messages == before
    assert cut[0] is messages[0]
    assert cut[3] is messages[3]  # reasoning parts are not text parts
    assert cut[4] is messages[4] and cut[5] is messages[5]  # the recent ones
    assert cut[1] is not messages[1] and cut[2] is not messages[2]
    assert cut[1]["parts"][0]["input"] is messages[1]["parts"][0]["input"]  # inputs stay whole
    assert cut[1]["metadata"] is messages[1]["metadata"]


def test_keep_recent_covers_everything_or_nothing():
    messages = [text_message(f"m{i}", "w" * 20_000) for i in range(3)]
    assert all(new is old for new, old in zip(truncate_older_messages(messages, keep_recent=10), messages))
    assert all(new is not old for new, old in zip(truncate_older_messages(messages, keep_recent=0), messages))
    with pytest.raises(ValueError, match="keep_recent"):
        truncate_older_messages(messages, keep_recent=-1)


def test_a_cut_message_gets_a_fresh_token_estimate():
    message = {**text_message("m1", "w" * 40_000), "tokens": 10_004}
    [cut] = truncate_older_messages([message], keep_recent=0)
    assert cut["tokens"] < 3000
    assert message["tokens"] == 10_004


def test_a_message_that_fits_the_row_is_returned_as_is():
    message = tool_message("m1", "small")
    assert enforce_row_size_limit(message) is message


def test_an_oversized_string_output_becomes_a_preview_with_a_note():
    message = tool_message("m1", "d" * 5_000_000)
    message["parts"].insert(0, {"type": "text", "text": "Here is the file."})
    before = copy.deepcopy(message)
    stored = enforce_row_size_limit(message)
    assert message == before
    assert stored_bytes(stored) <= 1_800_000
    output = stored["parts"][1]["output"]
    assert output.startswith("ddd")
    assert "too large to store" in output and "Re-run the tool" in output
    assert stored["parts"][0] == {"type": "text", "text": "Here is the file."}
    record = stored["metadata"]["row_size_limit"]
    assert record["original_bytes"] == stored_bytes(message)
    assert record["stored_bytes"] == stored_bytes(stored)
    assert record["shrunk"] == [{"part": 1, "field": "output", "original_chars": 5_000_000}]


def test_an_oversized_object_output_stays_an_object_with_its_small_fields_whole():
    message = tool_message("m1", {"status": 200, "path": "/srv/data.csv", "data": "d" * 5_000_000})
    stored = enforce_row_size_limit(message)
    output = stored["parts"][0]["output"]
    assert isinstance(output, dict) and list(output) == ["status", "path", "data"]
    assert output["status"] == 200 and output["path"] == "/srv/data.csv"
    assert output["data"].startswith("ddd") and re.search(r"\[truncated \d+ chars\]$", output["data"])
    assert stored_bytes(stored) < 10_000
    shrunk = stored["metadata"]["row_size_limit"]["shrunk"][0]
    assert shrunk["original_chars"] == json_size(message["parts"][0]["output"])


def test_an_oversized_list_output_keeps_its_leading_items_and_counts_the_rest():
    rows = [{"id": i, "name": f"row {i}"} for i in range(100_000)]
    stored = enforce_row_size_limit(tool_message("m1", rows))
    output = stored["parts"][0]["output"]
    assert isinstance(output, list) and output[0] == {"id": 0, "name": "row 0"}
    assert re.fullmatch(r"\.\.\. \[\d+ more items\]", output[-1])
    assert len(output) - 1 + int(re.search(r"\d+", output[-1]).group()) == 100_000


def test_an_object_with_too_many_keys_to_keep_becomes_a_marker_object():
    wide = {f"key{i}": i for i in range(200_000)}
    stored = enforce_row_size_limit(tool_message("m1", wide))
    output = stored["parts"][0]["output"]
    assert output["__truncated"] is True
    assert output["__truncatedChars"] == json_size(wide)
    assert output["preview"].startswith('{"key0":0,"key1":1')
    assert stored_bytes(stored) < 10_000


def test_only_as_many_outputs_as_needed_are_replaced_largest_first():
    message = tool_message("m1", "a" * 1_000_000)
    message["parts"].append({**message["parts"][0], "toolCallId": "second", "output": "b" * 1_500_000})
    stored = enforce_row_size_limit(message)
    assert [entry["part"] for entry in stored["metadata"]["row_size_limit"]["shrunk"]] == [1]
    assert stored["parts"][0]["output"] == "a" * 1_000_000


def test_an_oversized_text_part_is_cut_with_the_marker():
    message = text_message("m1", "é" * 1_500_000, role="assistant")  # 3 MB of UTF-8
    message["metadata"] = {"source": "import"}
    stored = enforce_row_size_limit(message)
    assert 1_790_000 < stored_bytes(stored) <= 1_800_000
    text = stored["parts"][0]["text"]
    assert re.search(r"\.\.\. \[truncated \d+ chars\]$", text)
    assert stored["metadata"]["source"] == "import"
    assert stored["metadata"]["row_size_limit"]["shrunk"] == [
        {"part": 0, "field": "text", "original_chars": 1_500_000}]
    assert stored["metadata"]["row_size_limit"]["stored_bytes"] == stored_bytes(stored)


def test_a_message_that_cannot_be_shrunk_enough_is_refused():
    message = tool_message("m1", "small", tool_input={"content": "c" * 3_000_000})
    with pytest.raises(ValueError, match="limit is 1800000"):
        enforce_row_size_limit(message)


def test_an_output_smaller_than_its_preview_is_left_whole():
    message = tool_message("m1", "s" * 1500)
    message["parts"].append({"type": "text", "text": "t" * 2_000_000})
    stored = enforce_row_size_limit(message)
    assert stored["parts"][0]["output"] == "s" * 1500
    assert stored["metadata"]["row_size_limit"]["shrunk"] == [
        {"part": 1, "field": "text", "original_chars": 2_000_000}]


# -- observation masking -------------------------------------------------------------------------------

def reasoning_and_call(message_id, output):
    message = tool_message(message_id, output)
    message["parts"] = [{"type": "reasoning", "text": "I should fetch the page first."},
                        {"type": "text", "text": "Fetching it."}, *message["parts"]]
    return message


def test_masking_replaces_older_tool_outputs_and_keeps_reasoning_text_and_calls():
    messages = [reasoning_and_call("a", "x" * 2000), reasoning_and_call("b", {"rows": list(range(400))}),
                text_message("c", "what did it say?"), reasoning_and_call("d", "y" * 2000)]
    masked = mask_older_tool_outputs(messages, keep_recent=2)
    for before, after in zip(messages[:2], masked[:2]):
        assert after["parts"][:2] == before["parts"][:2]  # reasoning and text whole
        assert after["parts"][2]["input"] == before["parts"][2]["input"]  # the action whole
        assert after["parts"][2]["output"] == masked_output_placeholder(before["parts"][2]["output"])
    assert masked[0]["parts"][2]["output"] == "[tool output masked: 2000 characters; re-run the tool to see it]"
    assert masked[2] is messages[2] and masked[3] is messages[3]  # the recent window is left whole
    assert messages[0]["parts"][2]["output"] == "x" * 2000  # the input is never mutated


def test_masking_leaves_short_outputs_and_masked_ones_alone():
    short = tool_message("a", "ok")
    masked_once = mask_older_tool_outputs([tool_message("b", "z" * 5000)], keep_recent=0)
    assert mask_older_tool_outputs([short], keep_recent=0)[0] is short
    assert mask_older_tool_outputs(masked_once, keep_recent=0)[0] is masked_once[0]


def test_a_masked_message_carries_a_fresh_token_estimate():
    message = tool_message("a", "w" * 4000) | {"tokens": 1000}
    [masked] = mask_older_tool_outputs([message], keep_recent=0)
    assert masked["tokens"] == estimate_message_tokens([masked]) < 100
