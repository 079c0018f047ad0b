import json

import pytest

from memorylab.history.window import ContextWindow, length, simple_cut


def chat(count, size=20):
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"{i:03d}" + "x" * (size - 3)}
            for i in range(count)]


def contents(messages):
    return [message["content"][:3] for message in messages]


def analysis_handler(full_context, context_window, memo, settings):
    if len(context_window) > 6:
        return "keep_last_four"
    return None


def keep_last_four(full_context, context_window, memo, settings):
    memo = {"previous_turns": len(full_context) - 4, "note": "older turns were summarized by the app"}
    return None, list(context_window[-4:]), memo


def test_length_counts_the_compact_json_of_role_and_content():
    message = {"role": "user", "content": "héllo \"you\""}
    assert length([message]) == len('{"role":"user","content":"héllo \\"you\\""}')
    assert length([message, message]) == 2 * length([message])
    assert ContextWindow.length([]) == 0


def test_a_window_that_fits_is_left_alone():
    window = ContextWindow(max_length=1000)
    window.add_chat_history(chat(5))
    assert window.context_window == chat(5)
    assert window.resize() is None


def test_simple_cut_keeps_the_newest_messages_that_fit():
    window = ContextWindow(max_length=length(chat(10)[-3:]) + 5)
    for message in chat(10):
        window.add_chat_history(message)
    assert contents(window.context_window) == ["007", "008", "009"]
    assert window.window_length <= window.max_length
    assert window.full_context == chat(10)


def test_when_the_newest_message_alone_is_too_long_its_end_is_kept():
    window = ContextWindow(max_length=60)
    window.add_chat_history(chat(2))
    window.add_chat_history({"role": "assistant", "content": "start " + "é" * 200 + " the end"})
    [kept] = window.context_window
    assert kept["role"] == "assistant"
    assert kept["content"].endswith("é the end")
    assert ("start " + "é" * 200 + " the end").endswith(kept["content"])
    assert window.window_length == 60  # as much of the end as fits, to the character


def test_simple_cut_counts_escaped_characters():
    [kept] = simple_cut([], [{"role": "user", "content": "\n" * 100}], None, {"max_length": 50})[1]
    assert length([kept]) <= 50
    assert length([kept]) >= 49


def test_reads_are_copies():
    window = ContextWindow()
    window.add_chat_history(chat(2))
    window.memo = {"facts": ["a"]}
    window.full_context[0]["content"] = "changed"
    window.context_window.append({"role": "user", "content": "sneaked in"})
    window.memo["facts"].append("b")
    assert window.full_context == chat(2)
    assert window.context_window == chat(2)
    assert window.memo == {"facts": ["a"]}


def test_added_messages_are_copied_in():
    window = ContextWindow()
    message = {"role": "user", "content": "hi"}
    window.add_chat_history(message)
    message["content"] = "edited afterwards"
    assert window.context_window == [{"role": "user", "content": "hi"}]


def test_the_memo_must_be_json():
    window = ContextWindow()
    with pytest.raises(ValueError, match="memo"):
        window.memo = {"when": object()}
    assert window.memo is None


def test_a_memo_handler_keeps_the_last_four_and_takes_notes():
    window = ContextWindow()
    window.register_analysis_handler(analysis_handler)
    window.register_resize_handler("keep_last_four", keep_last_four)
    window.add_chat_history(chat(6))
    assert len(window.context_window) == 6
    window.add_chat_history(chat(7)[6])
    assert contents(window.context_window) == ["003", "004", "005", "006"]
    assert window.memo == {"previous_turns": 3, "note": "older turns were summarized by the app"}
    assert len(window.full_context) == 7


def test_a_registered_analysis_handler_replaces_the_default_one():
    # The seed's recipe: its handler alone decides, so simple_cut never runs behind it.
    window = ContextWindow(max_length=150)
    window.register_analysis_handler(analysis_handler)
    window.register_resize_handler("keep_last_four", keep_last_four)
    for message in chat(8):
        window.add_chat_history(message)
    assert contents(window.context_window) == ["003", "004", "005", "006", "007"]
    assert window.window_length > window.max_length
    assert window.memo == {"previous_turns": 3, "note": "older turns were summarized by the app"}


def test_a_second_analysis_handler_replaces_the_first_and_none_restores_the_default():
    window = ContextWindow(max_length=100, auto_resize=False)
    window.register_analysis_handler(lambda *args: pytest.fail("a replaced handler ran"))
    window.register_analysis_handler(lambda *args: "keep_one")
    window.register_resize_handler("keep_one", lambda full, ctx, memo, settings: (None, ctx[-1:], None))
    window.add_chat_history(chat(3))
    assert len(window.context_window) == 3  # auto_resize is off
    assert window.resize() == "keep_one"
    assert contents(window.context_window) == ["002"]
    window.register_analysis_handler(None)
    window.set_chat_history(chat(10))
    assert window.resize() == "simple_cut"
    assert window.window_length <= 100
    with pytest.raises(ValueError, match="callable or None"):
        window.register_analysis_handler("keep_one")


def test_handlers_receive_the_settings():
    seen = []
    window = ContextWindow(max_length=777)
    window.register_analysis_handler(lambda full, ctx, memo, settings: seen.append(settings))
    window.add_chat_history(chat(1))
    assert seen == [{"max_length": 777, "auto_resize": True}]


def test_an_unknown_strategy_warns_and_changes_nothing():
    window = ContextWindow(max_length=30)
    window.register_analysis_handler(lambda *args: "summarize_with_gpt")
    with pytest.warns(UserWarning, match="summarize_with_gpt"):
        window.add_chat_history(chat(5))
    assert window.context_window == chat(5)


def test_a_resize_handler_with_a_wrong_result_is_an_error():
    window = ContextWindow(auto_resize=False)
    window.register_analysis_handler(lambda *args: "broken")
    window.register_resize_handler("broken", lambda *args: ["only the window"])
    window.add_chat_history(chat(2))
    with pytest.raises(ValueError, match="broken"):
        window.resize()
    assert window.context_window == chat(2)


def test_setting_then_adding_never_duplicates():
    window = ContextWindow()
    window.set_chat_history(chat(3))
    window.add_chat_history(chat(4)[3])
    assert window.full_context == chat(4)
    assert window.context_window == chat(4)
    window.set_chat_history(chat(2))
    assert window.full_context == chat(2)


def test_setting_a_long_history_runs_the_policy_and_keeps_the_memo():
    window = ContextWindow(max_length=100)
    window.memo = {"note": "kept across set"}
    window.set_chat_history(chat(20))
    assert window.window_length <= 100
    assert len(window.full_context) == 20
    assert window.memo == {"note": "kept across set"}


def test_reset_forgets_the_messages_and_keeps_the_memo():
    window = ContextWindow()
    window.add_chat_history(chat(3))
    window.memo = {"note": "kept across reset"}
    window.reset_chat_history()
    assert (window.full_context, window.context_window, window.memo) == ([], [], {"note": "kept across reset"})
    window.memo = None  # forgetting the memo too is one more line
    assert window.memo is None


def test_one_message_or_a_tuple_of_them_is_accepted_wherever_a_list_is():
    window = ContextWindow()
    window.set_chat_history({"role": "user", "content": "only me"})
    assert window.full_context == [{"role": "user", "content": "only me"}]
    window.add_chat_history(tuple(chat(2)))
    assert window.context_window == [{"role": "user", "content": "only me"}, *chat(2)]
    window.set_chat_history(tuple(chat(3)))
    assert window.full_context == chat(3)
    with pytest.raises(ValueError, match="add_chat_history takes one message .a dict. or a list of them"):
        window.add_chat_history("hello")


PICTURE = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}


def test_content_may_be_a_list_of_parts():
    window = ContextWindow()
    message = {"role": "user", "content": [{"type": "text", "text": "what is this?"}, PICTURE]}
    window.add_chat_history(message)
    assert window.context_window == [message]
    assert window.window_length == len(json.dumps(message, ensure_ascii=False, separators=(",", ":")))


def test_simple_cut_keeps_the_last_parts_of_a_long_list_of_parts():
    parts = [{"type": "text", "text": f"part {i} " + "x" * 40} for i in range(5)]
    window = ContextWindow(max_length=180)
    window.add_chat_history({"role": "user", "content": parts})
    [kept] = window.context_window
    assert kept["content"] == parts[-2:]
    assert window.window_length <= 180


@pytest.mark.parametrize("bad, complaint", [
    ("just text", "dict"),
    ({"role": "user"}, "content"),
    ({"role": "user", "content": ["part"]}, "content"),
    ({"role": "user", "content": [PICTURE, None]}, "content"),
    ({"role": "user", "content": {"type": "text", "text": "a part, not a list"}}, "content"),
    ({"role": None, "content": "hi"}, "role"),
])
def test_malformed_messages_are_refused_and_nothing_is_added(bad, complaint):
    window = ContextWindow()
    with pytest.raises(ValueError, match=complaint):
        window.add_chat_history([{"role": "user", "content": "ok"}, bad])
    assert window.full_context == []


def test_max_length_must_be_positive():
    with pytest.raises(ValueError, match="max_length"):
        ContextWindow(max_length=0)


def make_window():
    window = ContextWindow(max_length=120, auto_resize=False)
    window.set_chat_history(chat(8) + [{"role": "user", "content": "ünïcødé 🙂\n\"quoted\": yes"}])
    window.register_resize_handler("keep_last_four", keep_last_four)
    window.register_analysis_handler(lambda *args: "keep_last_four")
    window.resize()
    return window


@pytest.mark.parametrize("export, load", [("to_json", ContextWindow.load_json), ("to_yaml", ContextWindow.load_yaml)])
def test_export_and_import_round_trip(export, load):
    window = make_window()
    restored = load(getattr(window, export)())
    assert restored.to_dict() == window.to_dict()
    assert len(restored.full_context) == 9 and len(restored.context_window) == 4
    assert restored.memo == {"previous_turns": 5, "note": "older turns were summarized by the app"}
    assert (restored.max_length, restored.auto_resize) == (120, False)


@pytest.mark.parametrize("export, load", [("to_json", "load_json"), ("to_yaml", "load_yaml")])
def test_loading_into_a_window_replaces_its_state_and_keeps_its_handlers(export, load):
    saved = getattr(make_window(), export)()
    window = ContextWindow(max_length=500)
    window.register_analysis_handler(lambda *args: "keep_one")
    window.register_resize_handler("keep_one", lambda full, ctx, memo, settings: (None, ctx[-1:], None))
    window.add_chat_history(chat(2))
    assert getattr(window, load)(saved) is window
    assert window.to_dict() == make_window().to_dict()
    assert window.resize() == "keep_one"  # registered handlers are code: loading leaves them
    assert len(window.context_window) == 1


def test_a_failed_load_into_a_window_leaves_it_as_it_was():
    window = make_window()
    before = window.to_dict()
    with pytest.raises(ValueError, match="context_window"):
        window.load_json('{"full_context": []}')
    assert window.to_dict() == before


@pytest.mark.parametrize("text", ["a\x85b", "\u2028 line \u2029 separators", "nel at the end\x85", "\x85"])
def test_yaml_keeps_the_line_breaks_it_would_fold(text):
    window = ContextWindow()
    window.add_chat_history({"role": "user", "content": text})
    window.memo = {text: [text]}
    restored = ContextWindow.load_yaml(window.to_yaml())
    assert restored.to_dict() == window.to_dict()


def test_json_export_is_readable_json():
    state = json.loads(make_window().to_json())
    assert set(state) == {"full_context", "context_window", "memo", "max_length", "auto_resize"}


@pytest.mark.parametrize("load, text, complaint", [
    (ContextWindow.load_json, '{"full_context": [', "not valid JSON"),
    (ContextWindow.load_yaml, "full_context: [\n  - {role: user", "not valid YAML"),
    (ContextWindow.load_json, "[1, 2]", "mapping"),
    (ContextWindow.load_json, '{"full_context": []}', "context_window"),
    (ContextWindow.load_json, '{"full_context": [], "context_window": [{"role": "user"}]}', "content"),
    (ContextWindow.load_json, '{"full_context": [], "context_window": [], "max_length": 0}', "max_length"),
    (ContextWindow.load_json, '{"full_context": [], "context_window": [], "auto_resize": "yes"}', "auto_resize"),
    (ContextWindow.load_json, '{"full_context": [], "context_window": [], "extra": 1}', "extra"),
    (ContextWindow.load_yaml, "full_context: []\ncontext_window: []\nmemo: 2026-01-01\n", "memo"),
])
def test_broken_imports_are_refused_clearly(load, text, complaint):
    window = make_window()
    before = window.to_dict()
    with pytest.raises(ValueError, match=complaint):
        load(text)
    assert window.to_dict() == before
