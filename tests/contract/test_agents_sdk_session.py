"""memorylab as the memory of an OpenAI Agents SDK agent: ``Runner.run(..., session=MemorylabSession(...))``.

The agent, its scripted model and its real function tool are those of ``test_import_openai_agents.py``;
here they run on a memorylab session, whose items must read back through the SDK as the SDK's own
``SQLiteSession`` gives them, and through memorylab as a tree of messages with tool parts.
"""
import asyncio
import inspect
import json

import pytest
from agents.memory import Session as SdkSession

from memorylab import InvalidMessageError, NotFoundError, message_text, to_openai
from memorylab.agents_sdk import MemorylabSession
from memorylab.importers import import_source
from memorylab.importers.openai_items import MAX_KEPT_ITEM_BYTES
from tests.contract.test_import_openai_agents import (
    EXCHANGE,
    ScriptedModel,
    assert_tool_calls_answered,
    in_loop,
    opened,
    run_agent,
    sdk_session,
)


def items_of(session, limit=None):
    return in_loop(session.get_items(limit))


def test_an_agent_runs_on_memorylab_and_its_items_read_back_as_the_sdk_keeps_them(store, tmp_path):
    model = ScriptedModel()
    session = MemorylabSession("trip", store)
    assert run_agent(session, "Weather in Paris?", "And in Rome?", model=model) == [
        "Paris: 18C and sunny.", "Rome: 18C and sunny."]

    sdk_items = sdk_session(tmp_path / "agent.db", "trip", "Weather in Paris?", "And in Rome?")
    items = items_of(session)
    assert items == sdk_items
    assert model.requests[-1] == items[:-1]  # the second run's last request held the whole first run
    assert items_of(session, 3) == items[-3:] and items_of(session, 0) == []

    history = opened(store).get_history()
    assert [m["metadata"]["openai_type"] for m in history] == EXCHANGE * 2
    assert [m["role"] for m in history] == ["user", "assistant", "assistant", "tool", "assistant"] * 2
    assert [p["type"] for m in history for p in m["parts"] if p["type"].startswith("tool-")] == [
        "tool-get_weather"] * 4
    assert history[3]["parts"][0]["output"] == "Paris: 18C and sunny"
    assert message_text(history[-1]) == "Rome: 18C and sunny."
    assert_tool_calls_answered(to_openai(history))
    assert len(opened(store).get_leaves()) == 1


def test_a_new_session_object_continues_the_same_history(store):
    run_agent(MemorylabSession("trip", store), "Weather in Paris?")
    first_run = items_of(MemorylabSession("trip", store))
    model = ScriptedModel()
    later = MemorylabSession("trip", store, session_settings={"limit": 4})
    run_agent(later, "And in Rome?", model=model)
    assert model.requests[0] == first_run[-4:] + [{"content": "And in Rome?", "role": "user"}]
    assert len(items_of(later)) == 4 and len(items_of(later, 100)) == 10
    assert [m["metadata"]["openai_type"] for m in opened(store).get_history()] == EXCHANGE * 2


def test_an_imported_sqlite_session_goes_on_in_memorylab(store, tmp_path):
    path = tmp_path / "agent.db"
    sdk_items = sdk_session(path, "trip", "Weather in Paris?")
    import_source(store, path)
    session = MemorylabSession("trip", store)
    assert items_of(session) == sdk_items

    model = ScriptedModel()
    run_agent(session, "And in Rome?", model=model)
    assert model.requests[0][:5] == sdk_items
    history = opened(store).get_history()
    assert [m["id"] for m in history[:5]] == [f"agent_messages-{row}" for row in range(1, 6)]
    assert history[5]["parent_id"] == "agent_messages-5" and len(history) == 10


def test_pop_item_removes_the_newest_item_and_the_next_run_takes_its_place(store):
    session = MemorylabSession("trip", store)
    run_agent(session, "Weather in Paris?")
    before = items_of(session)
    assert in_loop(session.pop_item()) == before[-1]
    assert items_of(session) == before[:-1]
    memory = opened(store)
    assert len(memory.get_all_messages()) == 4 and session.head_id == memory.get_history()[-1]["id"]

    run_agent(session, "And in Rome?")
    assert [m["metadata"]["openai_type"] for m in memory.get_history()] == EXCHANGE[:4] + EXCHANGE
    assert len(memory.get_leaves()) == 1


def test_fork_continues_from_an_earlier_message_and_leaves_a_branch(store):
    session = MemorylabSession("trip", store)
    run_agent(session, "Weather in Paris?", "And in Rome?")
    memory = opened(store)
    rome_branch = memory.get_history()
    first_answer = rome_branch[4]["id"]
    session.fork(first_answer)
    assert session.head_id == first_answer and len(items_of(session)) == 5

    model = ScriptedModel()
    run_agent(session, "And in Oslo?", model=model)
    assert "Rome" not in json.dumps(model.requests)
    oslo_branch = memory.get_history()
    assert [m["id"] for m in oslo_branch[:5]] == [m["id"] for m in rome_branch[:5]]
    assert message_text(oslo_branch[-1]) == "Oslo: 18C and sunny."
    assert [leaf["id"] for leaf in memory.get_leaves()] == [oslo_branch[-1]["id"], rome_branch[-1]["id"]]
    assert [m["id"] for m in memory.get_branches(first_answer)] == [rome_branch[5]["id"], oslo_branch[5]["id"]]
    for leaf in memory.get_leaves():
        assert_tool_calls_answered(to_openai(memory.get_history(leaf["id"])))

    in_loop(session.pop_item())
    assert [leaf["id"] for leaf in memory.get_leaves()] == [oslo_branch[-2]["id"], rome_branch[-1]["id"]]
    with pytest.raises(NotFoundError, match="no message 'nowhere'"):
        session.fork("nowhere")
    session.fork(None)
    assert items_of(session) == [] and in_loop(session.pop_item()) is None


def test_clear_session_empties_the_session_and_the_next_run_starts_afresh(store):
    session = MemorylabSession("trip", store)
    run_agent(session, "Weather in Paris?")
    in_loop(session.clear_session())
    assert items_of(session) == [] and opened(store).get_all_messages() == []
    assert in_loop(session.pop_item()) is None
    run_agent(session, "Weather in Oslo?")
    assert [m["parent_id"] for m in opened(store).get_history()][:1] == [None]
    assert len(items_of(session)) == 5


def test_items_memorylab_has_no_part_for_come_back_exactly_and_requests_stay_valid(store):
    session = MemorylabSession("trip", store)
    unusual = [
        {"role": "user", "content": [{"type": "input_text", "text": "What is in this picture?"},
                                     {"type": "input_image", "image_url": "https://example.com/cat.png",
                                      "detail": "auto"}]},
        {"type": "web_search_call", "id": "ws_1", "status": "completed",
         "action": {"type": "search", "query": "cats"}},
        {"type": "item_reference", "id": "msg_earlier"},
        {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
         "content": [{"type": "refusal", "refusal": "I cannot say."}]},
    ]
    in_loop(session.add_items(unusual))
    assert items_of(session) == unusual
    history = opened(store).get_history()
    assert history[0]["parts"][1] == {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
    assert [m["parts"] for m in history[1:3]] == [[], []]
    request = to_openai(history)
    assert [m["role"] for m in request] == ["user", "assistant", "assistant", "assistant"]
    assert request[3]["content"] == "I cannot say." and not any("tool_calls" in m for m in request)


def test_a_tool_output_is_named_after_its_call_from_an_earlier_batch(store):
    session = MemorylabSession("trip", store)
    call = {"type": "function_call", "call_id": "call_9", "name": "get_weather", "arguments": '{"city": "Lima"}'}
    in_loop(session.add_items([call]))
    in_loop(session.add_items([{"type": "function_call_output", "call_id": "call_9", "output": "warm"}]))
    result = opened(store).get_history()[-1]["parts"][0]
    assert (result["type"], result["toolName"], result["toolCallId"]) == ("tool-get_weather", "get_weather", "call_9")


def test_messages_written_in_memorylab_are_given_to_the_sdk_as_items(store):
    session = MemorylabSession("trip", store)
    memory = opened(store)
    memory.append_message({"role": "user", "content": "Weather in Lima?"})
    memory.append_message({"role": "assistant", "content": "Checking.", "tool_calls": [
        {"id": "call_7", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Lima"}'}}]})
    memory.append_message({"role": "tool", "tool_call_id": "call_7", "content": "Lima: 20C"})
    assert items_of(session) == [
        {"role": "user", "content": "Weather in Lima?"},
        {"role": "assistant", "content": "Checking."},
        {"type": "function_call", "call_id": "call_7", "name": "get_weather", "arguments": '{"city": "Lima"}'},
        {"type": "function_call_output", "call_id": "call_7", "output": "Lima: 20C"},
    ]
    model = ScriptedModel()
    assert run_agent(session, "And in Quito?", model=model) == ["Quito: 18C and sunny."]
    assert model.requests[0][:4] == items_of(session)[:4]


def test_a_batch_with_an_item_memorylab_cannot_store_adds_nothing(store):
    session = MemorylabSession("trip", store)
    in_loop(session.add_items([{"role": "user", "content": "Weather in Paris?"}]))
    batch = [{"role": "user", "content": "And in Rome?"},
             {"type": "function_call_output", "call_id": "", "output": "a result without its call"}]
    with pytest.raises(InvalidMessageError, match="toolCallId"):
        in_loop(session.add_items(batch))
    assert items_of(session) == [{"role": "user", "content": "Weather in Paris?"}]


def test_an_item_too_large_to_keep_twice_comes_back_from_its_parts(store):
    session = MemorylabSession("trip", store)
    output = "sunny " * (MAX_KEPT_ITEM_BYTES // 6 + 1)
    items = [{"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city": "Paris"}'},
             {"type": "function_call_output", "call_id": "call_1", "output": output}]
    in_loop(session.add_items(items))
    stored = opened(store).get_history()[-1]
    assert "openai_item" not in stored["metadata"] and stored["parts"][0]["output"] == output
    assert items_of(session) == items


def test_concurrent_batches_are_appended_whole_one_after_another(store):
    session = MemorylabSession("trip", store)

    async def turns():
        await asyncio.gather(*(session.add_items([{"role": "user", "content": f"question {n}"},
                                                  {"role": "assistant", "content": f"answer {n}"}])
                               for n in range(8)))

    in_loop(turns())
    texts = [item["content"] for item in items_of(session)]
    assert len(texts) == 16 and len(opened(store).get_leaves()) == 1
    assert all(answer == question.replace("question", "answer") for question, answer in zip(texts[::2], texts[1::2]))


def test_it_is_a_session_by_the_sdk_protocol(store):
    session = MemorylabSession("trip", store)
    assert isinstance(session, SdkSession)
    assert all(inspect.iscoroutinefunction(getattr(session, name))
               for name in ("get_items", "add_items", "pop_item", "clear_session"))
    assert (session.session_id, session.session_settings.limit) == ("trip", None)
