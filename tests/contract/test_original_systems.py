"""Where memorylab follows the systems its seeds describe, checked against what those systems do:
Cloudflare's Session (the counter's prompt) and Agently (the window's cut, long-term keyword match)."""
import pytest

from memorylab import ContextWindow, InvalidInputError, Session, Store
from memorylab.memory.longterm import GLOBAL, LongTermMemory
from tests.helpers import text_message

# -- Cloudflare: a token counter sees the prompt the session will send ------------------------------

def frozen_session(store):
    return Session.create(store, "frozen").with_context("memory", max_tokens=500).with_frozen_prompt_store()


def test_a_counter_in_a_new_process_sees_the_stored_frozen_prompt(store_target):
    with Store(store_target) as store:
        first = frozen_session(store)
        first.replace_context_block("memory", "the customer is on the Pro plan")
        frozen = first.freeze_system_prompt()
        first.replace_context_block("memory", "the customer moved to the Free plan")  # stored, not frozen
    with Store(store_target) as store:
        restarted, seen = frozen_session(store), []
        restarted.compact_after(10_000, token_counter=lambda context: seen.append(context.system_prompt) or 0)
        restarted.append_message(text_message("m0", "hello"))
        assert seen == [frozen]
        assert restarted.compaction_context().system_prompt == frozen == restarted.freeze_system_prompt()
        assert "Free plan" in restarted.render_system_prompt()


def test_without_a_stored_prompt_the_counter_sees_what_freezing_would_render(store):
    session = frozen_session(store)
    session.replace_context_block("memory", "the customer is on the Pro plan")
    assert session.compaction_context().system_prompt == session.render_system_prompt()
    assert session.freeze_system_prompt() == session.render_system_prompt()


# -- Agently: a list of parts longer than the window alone ------------------------------------------

def test_a_list_of_parts_that_no_part_fits_keeps_the_end_of_its_text_as_a_string():
    window = ContextWindow(max_length=60)
    words = " ".join(f"word{i}" for i in range(40))
    window.add_chat_history({"role": "user", "content": [{"type": "text", "text": "first part"},
                                                          {"type": "image_url", "image_url": {"url": "x.png"}},
                                                          {"type": "text", "text": words}]})
    [kept] = window.context_window
    assert isinstance(kept["content"], str) and kept["content"]
    assert words.endswith(kept["content"])
    assert window.window_length <= 60
    assert len(kept["content"]) == 60 - len('{"role":"user","content":""}')  # as much of the end as fits


def test_a_list_of_parts_without_text_that_no_part_fits_keeps_an_empty_string():
    window = ContextWindow(max_length=40)
    window.add_chat_history({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x" * 80}}]})
    assert window.context_window == [{"role": "user", "content": ""}]


# -- Agently: long-term keyword search matches whole words, then substrings --------------------------

@pytest.fixture
def orders(store):
    """Id 1 about pizza, 2 tagged "orders"."""
    lab = LongTermMemory(store, workspace="lab")
    lab.add_record("Marta's favourite food is pizza")
    lab.add_record("Parcel A-4471 ships on Monday", tags=["orders"])
    return lab


def recall(memory, prompt):
    found = memory.prepare_request("s1", prompt)
    return [m["id"] for m in found["GLOBAL_MEMORY"]], found["diagnostics"]["scopes"][GLOBAL]["candidate_source"]


def test_a_word_matches_whole_words_only_and_a_fragment_falls_back_to_substrings(orders):
    assert recall(orders, "pizza") == ([1], "keyword")
    assert recall(orders, "pizz") == ([1], "substring")
    assert recall(orders, "order") == ([2], "substring")  # the tag is "orders"
    assert recall(orders, "orders") == ([2], "keyword")


def test_prefix_matching_is_a_setting(store, orders):
    prefixes = LongTermMemory(store, workspace="lab", settings={"keyword_match": "prefixes"})
    assert recall(prefixes, "pizz") == ([1], "keyword")
    assert recall(prefixes, "order") == ([2], "keyword")


def test_the_store_matches_words_prefixes_or_substrings(orders):
    def found(query, match):
        return [r["id"] for r in orders.store.long_term.candidates("lab", GLOBAL, None, query=query, match=match)]

    assert found("pizz ships", "words") == [2] and sorted(found("pizz ships", "prefixes")) == [1, 2]
    assert found("izz", "substring") == [1]
    with pytest.raises(InvalidInputError, match="match must be one of"):
        found("pizza", "stems")


def test_an_unknown_keyword_match_setting_is_refused(store):
    with pytest.raises(InvalidInputError, match="keyword_match must be one of .*'words'.*'prefixes'"):
        LongTermMemory(store, workspace="lab", settings={"keyword_match": "substring"})
