import re
import time
from datetime import datetime, timedelta, timezone

import pytest

from memorylab import (
    InvalidInputError,
    InvalidMessageError,
    MemoryAdmin,
    MemoryLabError,
    NotFoundError,
    Session,
)
from memorylab.errors import NothingToSummarizeError
from memorylab.memory.identity import identify
from memorylab.memory.manager import Memory, select_context, split_turns
from memorylab.messages import utc_now_iso
from tests.helpers import RecordingSummarizer

NOW = datetime.now(timezone.utc)


def next_millisecond():
    """Stored timestamps have millisecond precision: wait so the next write sorts after the last."""
    time.sleep(0.003)


def texts(messages):
    return [m["parts"][0]["text"] if m["parts"] else "" for m in messages]


def converse(memory, turns, key=None, start=1):
    """``turns`` user/assistant exchanges: "user N" then "assistant N"."""
    for n in range(start, start + turns):
        memory.append("user", f"user {n}", key=key)
        memory.append("assistant", f"assistant {n}", key=key)


# -- turns and what is sent ---------------------------------------------------------------------

def test_a_turn_starts_at_each_user_message():
    messages = [{"role": role, "id": str(i)} for i, role in
                enumerate(["system", "assistant", "user", "assistant", "tool", "assistant", "user", "user"])]
    assert [[m["role"] for m in turn] for turn in split_turns(messages)] == [
        ["system", "assistant"], ["user", "assistant", "tool", "assistant"], ["user"], ["user"]]
    assert split_turns([]) == []


def test_append_and_get_formatted(store):
    memory = Memory(store, memory_key="custom_key_123")
    memory.append("user", "Hello!", timestamp=NOW)
    memory.append("assistant", "Hi! How can I help you?", timestamp=NOW)
    assert memory.get_formatted() == "user: Hello!\nassistant: Hi! How can I help you?"
    assert memory.messages_for_model() == [
        {"role": "user", "content": "Hello!"}, {"role": "assistant", "content": "Hi! How can I help you?"}]


def test_append_takes_the_documents_message_object(store):
    memory = Memory(store, memory_key="custom_key_123")
    memory.append({"role": "user", "content": "Hello!", "timestamp": NOW})
    stored = memory.append({"role": "assistant", "content": "Hi! How can I help you?",
                            "timestamp": "2026-03-01T12:00:00+02:00", "metadata": {"channel": "whatsapp"}})
    assert (stored["created_at"], stored["metadata"]) == ("2026-03-01T10:00:00.000Z", {"channel": "whatsapp"})
    assert memory.get_formatted() == "user: Hello!\nassistant: Hi! How can I help you?"


@pytest.mark.parametrize("extra", [{"content": "Hi"}, {"timestamp": NOW}, {"metadata": {"a": 1}}])
def test_a_message_object_carries_everything_itself(store, extra):
    memory = Memory(store, memory_key="k")
    with pytest.raises(InvalidInputError, match="pass either a message dict or role and content"):
        memory.append({"role": "user", "content": "Hello!"}, **extra)
    assert not memory.exists()


def test_timestamps_are_stored_in_utc(store):
    memory = Memory(store, memory_key="k")
    memory.append("user", "aware", timestamp=datetime(2026, 3, 1, 12, 0, tzinfo=timezone(timedelta(hours=-3))))
    memory.append("user", "iso", timestamp="2026-03-01T12:00:00+02:00")
    assert [m["created_at"] for m in memory.get()["messages"]] == [
        "2026-03-01T15:00:00.000Z", "2026-03-01T10:00:00.000Z"]



def test_naive_timestamps_are_local_time(store, far_from_utc):
    memory = Memory(store, memory_key="k")
    memory.append("user", "naive", timestamp=datetime(2026, 3, 1, 12, 0))
    memory.append("user", "naive iso", timestamp="2026-03-01T12:00:00")
    assert [m["created_at"] for m in memory.get()["messages"]] == ["2026-03-01T22:00:00.000Z"] * 2


def test_a_customer_talking_now_in_local_time_is_not_inactive(store, far_from_utc):
    memory = Memory(store, agent_id="sdr")
    memory.append("user", "are you still there?", timestamp=datetime.now(), key="user:1")
    assert memory.list(last_interaction_before=datetime.now(timezone.utc) - timedelta(hours=4)) == []
    assert memory.list(last_interaction_before=datetime.now() - timedelta(hours=4)) == []
    assert [r["id"] for r in memory.list(last_interaction_before=datetime.now() + timedelta(minutes=1))] == ["user:1"]


def test_a_tool_message_without_its_call_id_says_what_to_pass(store):
    memory = Memory(store, memory_key="k")
    with pytest.raises(InvalidMessageError, match="tool_call_id"):
        memory.append("tool", "result")
    memory.append({"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]})
    memory.append({"role": "tool", "tool_call_id": "call_1", "name": "lookup", "content": "result"})
    assert memory.messages_for_model()[-1] == {"role": "tool", "tool_call_id": "call_1", "content": "result"}


def test_a_refused_message_creates_no_memory(store):
    memory = Memory(store, memory_key="k")
    with pytest.raises(InvalidMessageError, match="role must be one of"):
        memory.append("robot", "beep")
    with pytest.raises(InvalidInputError, match="timestamp 'yesterday' is not an ISO-8601 timestamp"):
        memory.append("user", "hi", timestamp="yesterday")
    assert not memory.exists()


def test_max_turns_limits_what_is_sent_not_what_is_stored(store):
    memory = Memory(store, memory_key="k", max_turns=2)
    memory.append("system", "You are a sales assistant.")
    converse(memory, 4)
    assert texts(memory.context()) == ["user 3", "assistant 3", "user 4", "assistant 4"]
    assert memory.get_formatted() == "user: user 3\nassistant: assistant 3\nuser: user 4\nassistant: assistant 4"
    data = memory.get()
    assert len(data["messages"]) == 9
    assert data["total_turns"] == 5  # the leading system message is a turn of its own
    assert len(Session.open(store, "k").get_history()) == 9


def test_max_tokens_keeps_the_newest_whole_turns(store):
    memory = Memory(store, memory_key="k", max_tokens=40)
    converse(memory, 5)
    per_turn = sum(m["tokens"] for m in memory.get_recent(1))
    sent = memory.context()
    assert len(sent) == 2 * (40 // per_turn)
    assert texts(sent)[-1] == "assistant 5" and texts(sent)[0].startswith("user")
    assert sum(m["tokens"] for m in sent) <= 40


def test_the_newest_turn_is_sent_even_over_max_tokens(store):
    memory = Memory(store, memory_key="k", max_tokens=10)
    memory.append("user", "short")
    memory.append("user", "a long question " * 30)
    memory.append("assistant", "a long answer " * 30)
    assert texts(memory.context()) == ["a long question " * 30, "a long answer " * 30]


def test_select_context_pins_the_summary():
    summary = {"id": "compaction_1", "role": "assistant", "parts": [], "tokens": 50}
    turn = [{"id": "u", "role": "user", "tokens": 10}, {"id": "a", "role": "assistant", "tokens": 10}]
    older = [{"id": "u0", "role": "user", "tokens": 10}]
    assert [m["id"] for m in select_context([summary, *older, *turn], max_turns=1)] == ["compaction_1", "u", "a"]
    assert [m["id"] for m in select_context([summary, *older, *turn], max_tokens=75)] == ["compaction_1", "u", "a"]


def test_get_recent_returns_stored_turns(store):
    memory = Memory(store, memory_key="k", max_turns=1)
    converse(memory, 3)
    assert texts(memory.get_recent(2)) == ["user 2", "assistant 2", "user 3", "assistant 3"]
    assert texts(memory.get_recent(50)) == texts(memory.get()["messages"])
    with pytest.raises(InvalidInputError, match="n must be a positive integer, got 0"):
        memory.get_recent(0)
    assert memory.get_recent(5, key="nobody") == []


@pytest.mark.parametrize("setting", ["max_turns", "max_tokens", "summarize_after"])
@pytest.mark.parametrize("value", [0, -1, 2.5, True])
def test_limits_must_be_positive_integers(store, setting, value):
    with pytest.raises(InvalidInputError, match=f"{setting} must be a positive integer"):
        Memory(store, **{setting: value})


# -- reading, searching, clearing ---------------------------------------------------------------

def test_get_returns_everything_about_a_memory(store):
    memory = Memory(store, agent_id="sdr")
    with identify("+55 (11) 99999-9999"):
        converse(memory, 2)
        data = memory.get()
    assert data["key"] == "phone:+5511999999999"
    assert texts(data["messages"]) == ["user 1", "assistant 1", "user 2", "assistant 2"]
    assert data["entities"] == [{"type": "phone", "value": "+5511999999999"}]
    assert data["summary"] is None
    assert data["metadata"]["status"] is None
    assert data["metadata"]["created_at"] <= data["metadata"]["updated_at"]
    assert data["total_turns"] == 2
    assert data["total_tokens"] == sum(m["tokens"] for m in data["messages"]) > 0


def test_get_of_a_missing_memory_is_not_found(store):
    with pytest.raises(NotFoundError, match=re.escape("agent 'default' has no memory 'phone:+5511000000000'")):
        Memory(store).get("phone:+5511000000000")
    assert not Memory(store).exists("phone:+5511000000000")
    assert Memory(store).get_formatted("phone:+5511000000000") == ""
    assert not Memory(store).exists("phone:+5511000000000")  # reading created nothing


def test_search_stays_inside_one_memory(store):
    memory = Memory(store)
    memory.append("user", "my order 12345 has not arrived", key="user:123")
    memory.append("user", "order for user 456", key="user:456")
    hits = memory.search("order", key="user:123")
    assert [h["content"] for h in hits] == ["my order 12345 has not arrived"]
    assert memory.search('"unbalanced AND (', key="user:123") == []
    assert memory.search("order", key="user:789") == []


def test_clear_forgets_the_memory(store):
    memory = Memory(store, memory_key="k")
    converse(memory, 2)
    memory.set_status("closed")
    assert memory.clear() == 4
    assert not memory.exists()
    assert memory.clear() == 0
    memory.append("user", "back again")
    assert memory.get()["metadata"]["status"] is None


def test_memories_of_agents_and_tenants_are_separate(store):
    Memory(store, agent_id="support", memory_key="k").append("user", "to support")
    Memory(store, agent_id="sales", memory_key="k").append("user", "to sales")
    Memory(store, agent_id="support", tenant_id="globex", memory_key="k").append("user", "globex")
    assert texts(Memory(store, agent_id="support").get("k")["messages"]) == ["to support"]
    assert texts(Memory(store, agent_id="sales").get("k")["messages"]) == ["to sales"]
    assert texts(Memory(store, agent_id="support", tenant_id="globex").get("k")["messages"]) == ["globex"]


def test_explicit_memory_keys_are_normalised_like_identities(store):
    memory = Memory(store, agent_id="sdr")
    memory.append("user", "one", key="user:1")
    memory.append("user", "two", key="user:1 ")
    memory.append("user", "three", key=" phone:+55 (11) 99999-9999")
    memory.append("user", "four", key="email:Ana@Example.com")
    with identify("+5511999999999"):
        memory.append("user", "five")
    Memory(store, agent_id="sdr", memory_key="email:ana@example.com ").append("user", "six")
    memory.append("user", "seven", key="phone:123")  # not a phone number: kept as written, minus spaces
    memory.append("user", "eight", key=" phone:123")
    assert {r["id"]: r["message_count"] for r in memory.list()} == {
        "user:1": 2, "phone:+5511999999999": 2, "email:ana@example.com": 2, "phone:123": 2}
    assert texts(MemoryAdmin(store, tenant_id="default").get("sdr", "user:1 ")["messages"]) == ["one", "two"]


@pytest.mark.parametrize("key", ["user:1\u202e", "user:\u202e1", "\u200buser:1", "phone:+55119999\u2066"])
def test_memory_keys_with_invisible_characters_are_refused(store, key):
    with pytest.raises(InvalidInputError, match="invisible formatting characters"):
        Memory(store).append("user", "hi", key=key)
    with pytest.raises(InvalidInputError, match="invisible formatting characters"):
        Memory(store, memory_key=key)
    with pytest.raises(InvalidInputError, match="invisible formatting characters"), identify(key):
        pass
    assert Memory(store).list() == []


# -- status -------------------------------------------------------------------------------------

def test_status_lifecycle(store):
    memory = Memory(store, agent_id="sdr", memory_key="phone:+5511999999999")
    memory.append("user", "hi")
    assert memory.get()["metadata"]["status"] is None
    assert memory.set_status("qualified") == "qualified"
    assert memory.get()["metadata"]["status"] == "qualified"
    memory.set_status("closed")
    assert [r["status"] for r in memory.list()] == ["closed"]
    assert memory.set_status("in_progress") is None
    assert memory.list(status="in_progress")[0]["status"] is None
    memory.set_status("nurturing")
    assert memory.set_status(None) is None
    assert memory.get()["metadata"]["status"] is None


def test_set_status_needs_an_existing_memory(store):
    memory = Memory(store, agent_id="sdr")
    with pytest.raises(NotFoundError, match=re.escape("agent 'sdr' has no memory 'user:1': append a message first")):
        memory.set_status("qualified", key="user:1")
    assert memory.list() == [] and not memory.exists("user:1")


@pytest.mark.parametrize("status", ["", " closed", "closed ", "x" * 65, 7, "a\nb"])
def test_bad_statuses_are_refused(store, status):
    with pytest.raises(InvalidInputError, match="status must be a short label"):
        Memory(store, memory_key="k").set_status(status)


# -- listing --------------------------------------------------------------------------------------

@pytest.fixture
def leads(store):
    """Three leads of agent "sdr": one waiting on the user, one waiting on the agent, one closed."""
    memory = Memory(store, agent_id="sdr")
    old, older = NOW - timedelta(hours=5), NOW - timedelta(hours=8)
    memory.append("user", "How much is the plan?", timestamp=older, key="phone:+5511900000001")
    memory.append("assistant", "R$ 99 a month. Shall I sign you up?", timestamp=older, key="phone:+5511900000001")
    memory.append("user", "Can you call me?", timestamp=old, key="email:ana@example.com")
    memory.append("user", "I'm in", key="user:42")
    memory.append("assistant", "Welcome aboard!", key="user:42")
    memory.set_status("closed", key="user:42")
    Memory(store, agent_id="other").append("user", "not an sdr lead", key="phone:+5511900000001")
    return memory


def test_list_rows_tell_who_spoke_last(leads):
    rows = {row["id"]: row for row in leads.list()}
    assert set(rows) == {"phone:+5511900000001", "email:ana@example.com", "user:42"}
    phone = rows["phone:+5511900000001"]
    assert set(phone) == {"id", "entity_type", "entity_value", "status", "updated_at", "message_count",
                          "summary", "last_message"}
    assert (phone["entity_type"], phone["entity_value"]) == ("phone", "+5511900000001")
    assert phone["message_count"] == 2
    assert phone["last_message"]["role"] == "assistant"
    assert phone["last_message"]["content"] == "R$ 99 a month. Shall I sign you up?"
    assert rows["email:ana@example.com"]["last_message"]["role"] == "user"
    assert rows["user:42"]["status"] == "closed"


def test_follow_up_loop_finds_quiet_leads_where_the_agent_spoke_last(leads):
    inactive = leads.list(last_interaction_before=NOW - timedelta(hours=4))
    assert [r["id"] for r in inactive] == ["email:ana@example.com", "phone:+5511900000001"]
    follow_up = [r["id"] for r in inactive if not r["status"] and r["last_message"]["role"] == "assistant"]
    assert follow_up == ["phone:+5511900000001"]
    assert [r["id"] for r in leads.list(last_interaction_before=NOW - timedelta(hours=6))] == ["phone:+5511900000001"]
    assert leads.list(last_interaction_before=(NOW - timedelta(hours=9)).isoformat()) == []


def test_list_filters_by_status(leads):
    assert [r["id"] for r in leads.list(status="closed")] == ["user:42"]
    assert {r["id"] for r in leads.list(status="in_progress")} == {"phone:+5511900000001", "email:ana@example.com"}
    assert leads.list(status="qualified") == []


def test_list_is_ordered_by_update_and_pages(leads):
    next_millisecond()
    leads.append("user", "one more thing", key="phone:+5511900000001")
    ids = [r["id"] for r in leads.list()]
    assert ids == ["phone:+5511900000001", "user:42", "email:ana@example.com"]
    assert [r["id"] for r in leads.list(limit=1, offset=1)] == ids[1:2]
    assert leads.list(offset=3) == []


def test_list_by_date_field(store):
    memory = Memory(store, agent_id="sdr")
    memory.append("user", "first", key="a")
    next_millisecond()
    middle = utc_now_iso()
    next_millisecond()
    memory.append("user", "second", key="b")
    assert [r["id"] for r in memory.list(date_from=middle, date_field="created_at")] == ["b"]
    next_millisecond()
    memory.append("user", "a again", key="a")
    assert [r["id"] for r in memory.list(date_from=middle)] == ["a", "b"]
    assert [r["id"] for r in memory.list(date_from=middle, date_field="created_at")] == ["b"]


@pytest.mark.parametrize("filters, message", [
    ({"limit": 0}, "limit must be an integer from 1 to 100, got 0"),
    ({"limit": 101}, "limit must be an integer from 1 to 100, got 101"),
    ({"limit": "20"}, "limit must be an integer from 1 to 100, got '20'"),
    ({"offset": -1}, "offset must be a non-negative integer, got -1"),
    ({"date_field": "deleted_at"}, "date_field must be one of updated_at, created_at, got 'deleted_at'"),
    ({"date_from": "last week"}, "date_from 'last week' is not an ISO-8601 timestamp"),
    ({"status": ""}, "status must be a short label"),
])
def test_bad_list_filters_are_refused(store, filters, message):
    with pytest.raises(InvalidInputError, match=message):
        Memory(store).list(**filters)


def test_lab_sessions_are_listed_without_an_entity(store):
    Session.create(store, "support-order-4471").append_message({"role": "user", "content": "where is it?"})
    row, = Memory(store).list()
    assert (row["id"], row["entity_type"], row["entity_value"]) == ("support-order-4471", None, None)


# -- summaries ------------------------------------------------------------------------------------

def test_summarize_stores_an_overlay_that_is_sent_first(store):
    summarizer = RecordingSummarizer()
    memory = Memory(store, memory_key="k", summarizer=summarizer)
    converse(memory, 3)
    assert memory.summarize() == "summary #1"
    prompt = summarizer.prompts[0]
    assert "user: user 1" in prompt and "assistant: assistant 3" in prompt and "## Open Items" in prompt
    assert memory.get_formatted() == "Summary of the earlier conversation:\nsummary #1"
    memory.append("user", "user 4")
    assert memory.get_formatted() == "Summary of the earlier conversation:\nsummary #1\n\nuser: user 4"
    data = memory.get()
    assert data["summary"] == "summary #1"
    assert len(data["messages"]) == 7  # nothing stored was dropped
    overlay, = Session.open(store, "k").get_compactions()  # the lab draws it over the messages it covers
    assert (overlay["from_id"], overlay["to_id"]) == (data["messages"][0]["id"], data["messages"][5]["id"])
    assert memory.list()[0]["summary"] == "summary #1"


def test_a_second_summary_updates_the_first(store):
    summarizer = RecordingSummarizer()
    memory = Memory(store, memory_key="k", summarizer=summarizer)
    converse(memory, 2)
    memory.summarize()
    converse(memory, 1, start=3)
    assert memory.summarize() == "summary #2"
    second = summarizer.prompts[1]
    assert "summary #1" in second and "user: user 3" in second and "user: user 1" not in second
    assert memory.get()["summary"] == "summary #2"
    assert texts(memory.context()) == ["summary #2"]


def test_a_custom_prompt_is_an_instruction_followed_by_the_messages(store):
    summarizer = RecordingSummarizer()
    memory = Memory(store, memory_key="k", summarizer=summarizer,
                    summarize_prompt="Summarize in 3 bullet points: {issue}, solution, next steps")
    converse(memory, 1)
    memory.summarize()
    assert summarizer.prompts[0].startswith("Summarize in 3 bullet points: {issue}, solution, next steps\n\n")
    assert summarizer.prompts[0].endswith("<transcript>\nuser: user 1\nassistant: assistant 1\n</transcript>")
    memory.append("user", "user 2")
    memory.summarize(prompt="Decisions only:\n{transcript}\nEND")
    assert summarizer.prompts[1] == "Decisions only:\nuser: user 2\nEND"


def test_summarize_with_nothing_new_is_a_clear_error(store):
    memory = Memory(store, memory_key="k", summarizer=RecordingSummarizer())
    with pytest.raises(NothingToSummarizeError, match="nothing to summarize: memory 'k' has no messages"):
        memory.summarize()
    memory.append("user", "hello")
    memory.summarize()
    with pytest.raises(NothingToSummarizeError, match="nothing to summarize: memory 'k' has no messages since"):
        memory.summarize()


def test_an_empty_summary_is_refused_and_nothing_changes(store):
    memory = Memory(store, memory_key="k", summarizer=lambda prompt: "   ")
    memory.append("user", "hello")
    with pytest.raises(MemoryLabError, match="the summarizer returned no text"):
        memory.summarize()
    assert memory.get()["summary"] is None
    assert Session.open(store, "k").get_compactions() == []


def test_summarize_after_folds_turns_that_left_the_window(store):
    summarizer = RecordingSummarizer()
    memory = Memory(store, memory_key="k", max_turns=2, summarize_after=3, summarizer=summarizer)
    converse(memory, 4)
    assert summarizer.prompts == []  # two turns out of the window, fewer than three
    memory.append("user", "user 5")
    assert len(summarizer.prompts) == 1
    assert "user: user 3" in summarizer.prompts[0] and "user 4" not in summarizer.prompts[0]
    assert texts(memory.context()) == ["summary #1", "user 4", "assistant 4", "user 5"]
    memory.append("assistant", "assistant 5")
    converse(memory, 2, start=6)
    assert len(summarizer.prompts) == 1
    memory.append("user", "user 8")
    assert len(summarizer.prompts) == 2
    assert "summary #1" in summarizer.prompts[1] and "user: user 4" in summarizer.prompts[1]
    assert texts(memory.context()) == ["summary #2", "user 7", "assistant 7", "user 8"]
    assert memory.get()["total_turns"] == 8
    assert memory.get()["metadata"]["memorylab.summary"]["state"] == "summarized"


def test_summarize_after_without_max_turns_keeps_the_newest_turn(store):
    summarizer = RecordingSummarizer()
    memory = Memory(store, memory_key="k", summarize_after=2, summarizer=summarizer)
    converse(memory, 2)
    memory.append("user", "user 3")
    assert texts(memory.context()) == ["summary #1", "user 3"]


def test_a_failing_automatic_summary_never_fails_the_append(store):
    def broken(prompt):
        raise ConnectionError("model unreachable")

    memory = Memory(store, memory_key="k", summarize_after=1, summarizer=broken)
    memory.append("user", "user 1")
    with pytest.warns(RuntimeWarning, match="the summary failed: model unreachable"):
        stored = memory.append("user", "user 2")
    assert memory.get()["messages"][-1]["id"] == stored["id"]
    assert memory.get()["metadata"]["memorylab.summary"]["state"] == "error"
    assert "ConnectionError: model unreachable" in memory.get()["metadata"]["memorylab.summary"]["detail"]


def test_summarize_through_a_mocked_litellm_summarizer(store):
    from memorylab.llm import models as llm

    summarizer = llm.make_summarizer("gpt-4o-mini", mock_response="## Topic\nA refund for order 12345.")
    memory = Memory(store, memory_key="phone:+5511999999999", summarizer=summarizer)
    memory.append("user", "I want a refund for order 12345")
    memory.append("assistant", "Done: the refund is on its way.")
    assert memory.summarize() == "## Topic\nA refund for order 12345."
    assert memory.get_formatted().startswith("Summary of the earlier conversation:\n## Topic\nA refund")


def test_without_a_summarizer_the_model_comes_from_the_call_then_the_settings(store, monkeypatch):
    from memorylab.llm import models as llm

    def make_summarizer(model=llm.DEFAULT_LOCAL_MODEL):
        return lambda prompt: f"by {model}"

    monkeypatch.setattr(llm, "make_summarizer", make_summarizer)
    memory = Memory(store, memory_key="k", summarize_model="gpt-4o-mini")
    memory.append("user", "hello")
    assert memory.summarize() == "by gpt-4o-mini"
    memory.append("user", "again")
    assert memory.summarize(model="claude-haiku-4-5") == "by claude-haiku-4-5"
    Memory(store, memory_key="k2").append("user", "hi")
    assert Memory(store, memory_key="k2").summarize() == f"by {llm.DEFAULT_LOCAL_MODEL}"
