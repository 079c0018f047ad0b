"""One agent session seen by two ``MemorylabSession`` objects, each on its own store connection (two
processes, as a worker and the lab are): a clear by either leaves an empty session that the other goes
on appending to, as two of the SDK's own ``SQLiteSession`` objects on one database do."""
import pytest
from agents import SQLiteSession

from memorylab import Store
from memorylab.agents_sdk import MemorylabSession
from tests.contract.test_agents_sdk_session import items_of
from tests.contract.test_import_openai_agents import in_loop, opened, run_agent


@pytest.fixture
def other_store(store_target):
    """A second connection to the test's store: another process's view of it."""
    with Store(store_target) as other:
        yield other


def pop_then_cleared_elsewhere_then_asked(first, second):
    """``first`` answers, takes back its last item (its head is now a message of its own choosing),
    ``second`` clears the session, ``first`` is asked again; the items it then holds."""
    run_agent(first, "Weather in Paris?")
    in_loop(first.pop_item())
    in_loop(second.clear_session())
    assert items_of(first) == []
    run_agent(first, "Weather in Oslo?")
    return items_of(first)


def test_after_a_clear_elsewhere_the_next_run_appends_as_the_sdks_own_session_does(store, other_store, tmp_path):
    sdk_path = tmp_path / "agent.db"
    sdk_first, sdk_second = SQLiteSession("trip", sdk_path), SQLiteSession("trip", sdk_path)
    try:
        expected = pop_then_cleared_elsewhere_then_asked(sdk_first, sdk_second)
    finally:
        sdk_first.close()
        sdk_second.close()

    first, second = MemorylabSession("trip", store), MemorylabSession("trip", other_store)
    assert pop_then_cleared_elsewhere_then_asked(first, second) == expected
    assert items_of(second) == expected
    history = opened(store).get_history()
    assert history[0]["parent_id"] is None and len(history) == len(expected) == 5


def test_every_later_turn_after_a_clear_elsewhere_is_kept(store, other_store):
    first, second = MemorylabSession("trip", store), MemorylabSession("trip", other_store)
    in_loop(first.add_items([{"role": "user", "content": "one"}, {"role": "assistant", "content": "two"}]))
    first.fork(opened(store).get_history()[0]["id"])
    in_loop(second.clear_session())
    for turn in ("three", "four"):
        in_loop(first.add_items([{"role": "user", "content": turn}]))
    assert items_of(first) == items_of(second) == [{"role": "user", "content": "three"},
                                                   {"role": "user", "content": "four"}]
    assert in_loop(first.pop_item()) == {"role": "user", "content": "four"}


def test_a_head_removed_elsewhere_gives_way_to_the_newest_message(store, other_store):
    first, second = MemorylabSession("trip", store), MemorylabSession("trip", other_store)
    in_loop(first.add_items([{"role": "user", "content": "one"}, {"role": "assistant", "content": "two"}]))
    in_loop(first.pop_item())
    in_loop(second.add_items([{"role": "assistant", "content": "an answer from elsewhere"}]))
    second.memory.delete_messages([opened(other_store).get_history()[0]["id"]])
    assert items_of(first) == [{"role": "assistant", "content": "an answer from elsewhere"}]
    in_loop(first.add_items([{"role": "user", "content": "three"}]))
    assert items_of(second) == [{"role": "assistant", "content": "an answer from elsewhere"},
                                {"role": "user", "content": "three"}]
