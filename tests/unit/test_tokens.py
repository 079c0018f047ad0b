import math

from memorylab import estimate_message_tokens, estimate_string_tokens


def test_string_estimate_is_max_of_chars_and_words():
    assert estimate_string_tokens("") == 0
    assert estimate_string_tokens("abcd") == 2  # one word: ceil(1.3)
    assert estimate_string_tokens("abcdefghijkl") == 3  # 12 chars / 4
    assert estimate_string_tokens("abcdefghijklm") == 4
    # 10 one-letter words: 19 chars -> 5 by chars, 13 by words
    assert estimate_string_tokens("a b c d e f g h i j") == 13
    assert estimate_string_tokens("x" * 4001) == 1001


def test_estimate_matches_the_formula_on_mixed_text():
    samples = ["", "a", "short words here", "longwordwithoutspaces" * 7, "x y " * 333, "日本語のテキスト", "a\tb\nc"]
    for text in samples:
        assert estimate_string_tokens(text) == math.ceil(max(len(text) / 4, len(text.split()) * 1.3))


def test_message_estimate_counts_overhead_text_and_tool_json():
    text = {"role": "user", "parts": [{"type": "text", "text": "abcdefgh"}]}
    assert estimate_message_tokens([text]) == 4 + 2
    tool = {
        "role": "assistant",
        "parts": [{"type": "tool-read", "toolCallId": "c1", "toolName": "read",
                   "input": {"path": "a.py"}, "output": {"ok": True}, "state": "output-available"}],
    }
    expected = 4 + estimate_string_tokens('{"path":"a.py"}') + estimate_string_tokens('{"ok":true}')
    assert estimate_message_tokens([tool]) == expected
    assert estimate_message_tokens([text, tool]) == 6 + expected
    assert estimate_message_tokens(text) == 6
