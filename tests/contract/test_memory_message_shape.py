"""Memory gives back messages as the document appends them, ``{role, content, timestamp}``, as
``list()``'s ``last_message`` already does; the stored parts ride along for whoever needs them."""
from datetime import datetime, timezone

from memorylab import MemoryAdmin
from memorylab.memory.manager import Memory

SAID_AT = datetime(2026, 3, 1, 12, 30, tzinfo=timezone.utc)
WHEN = "2026-03-01T12:30:00.000Z"


def remembered(store):
    memory = Memory(store, memory_key="phone:+5511999999999")
    memory.append({"role": "user", "content": "My order number is 12345", "timestamp": SAID_AT})
    memory.append({"role": "assistant", "content": "", "timestamp": SAID_AT,
                   "tool_calls": [{"id": "call_1", "type": "function",
                                   "function": {"name": "lookup", "arguments": '{"order": 12345}'}}]})
    memory.append({"role": "tool", "tool_call_id": "call_1", "content": "shipped", "timestamp": SAID_AT})
    memory.append({"role": "assistant", "content": "Your order has shipped.", "timestamp": SAID_AT})
    return memory


def shown(messages):
    return [(m["role"], m["content"], m["timestamp"]) for m in messages]


SHOWN = [("user", "My order number is 12345", WHEN), ("assistant", "", WHEN), ("tool", "", WHEN),
         ("assistant", "Your order has shipped.", WHEN)]


def test_get_gives_each_message_its_content_and_timestamp(store):
    messages = remembered(store).get()["messages"]
    assert shown(messages) == SHOWN
    assert messages[1]["parts"][0]["toolName"] == "lookup" and messages[2]["parts"][0]["output"] == "shipped"


def test_get_recent_gives_each_message_its_content_and_timestamp(store):
    memory = remembered(store)
    memory.append({"role": "user", "content": "Thanks!", "timestamp": SAID_AT})
    assert shown(memory.get_recent(1)) == [("user", "Thanks!", WHEN)]
    assert shown(memory.get_recent(2)) == [*SHOWN, ("user", "Thanks!", WHEN)]


def test_the_newest_message_reads_as_lists_last_message(store):
    memory = remembered(store)
    assert {k: memory.get()["messages"][-1][k] for k in ("role", "content", "timestamp")} == (
        memory.list()[0]["last_message"])


def test_messages_read_back_can_be_set_again(store):
    """What ``get`` gives is what ``MemoryAdmin.set`` takes: the extra fields restate the stored ones."""
    messages = remembered(store).get()["messages"]
    admin = MemoryAdmin(store, tenant_id="default")
    admin.set("default", "phone:+5511000000000", messages)
    assert shown(Memory(store, memory_key="phone:+5511000000000").get()["messages"]) == SHOWN
