import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from memorylab import InvalidInputError, Session
from memorylab.memory.identity import current_identity, detect_type, identify, make_identity, parse_memory_key
from memorylab.memory.manager import Memory


@pytest.mark.parametrize("value, key", [
    ("user@example.com", "email:user@example.com"),
    ("Ana.Souza@Example.COM", "email:ana.souza@example.com"),
    ("ana+leads@example.co.uk", "email:ana+leads@example.co.uk"),
    ("+5511999999999", "phone:+5511999999999"),
    ("+55 (11) 99999-9999", "phone:+5511999999999"),
    ("+1 415.555.2671", "phone:+14155552671"),
    ("  +44 20 7946 0958 ", "phone:+442079460958"),
    ("123e4567-E89B-12d3-a456-426614174000", "uuid:123e4567-e89b-12d3-a456-426614174000"),
    ("https://example.com/customers/42?ref=ad", "url:https://example.com/customers/42?ref=ad"),
    ("cust-42", "id:cust-42"),
    ("5511999999999", "id:5511999999999"),  # without "+" a run of digits is an id, not a phone
    ("+123", "id:+123"),  # too short for E.164
    ("+0 11 2222 3333", "id:+0 11 2222 3333"),  # no country code starts with 0
    ("user@localhost", "id:user@localhost"),
])
def test_a_bare_value_gets_its_type_detected_and_normalized(value, key):
    assert make_identity(value).key == key
    with identify(value) as identity:
        assert identity.key == key
        assert current_identity() == identity
    assert current_identity() is None


def test_detect_type_names_the_type_only():
    assert [detect_type(v) for v in ("a@b.io", "+5511999999999", "https://x.io", "42")] == [
        "email", "phone", "url", "id"]


def test_an_explicit_type_is_used_and_known_types_are_still_checked():
    with identify(type="user", value="123") as identity:
        assert identity.key == "user:123"
    with identify(type="phone", value="+55 (11) 99999-9999") as identity:
        assert identity.key == "phone:+5511999999999"
    with identify(type="id", value="ana@example.com") as identity:
        assert identity.key == "id:ana@example.com"
    with pytest.raises(InvalidInputError, match="not a phone number: write it with its country code"):
        make_identity("11 99999-9999", type="phone")
    with pytest.raises(InvalidInputError, match="'nope' is not a valid email"):
        make_identity("nope", type="email")
    with pytest.raises(InvalidInputError, match="identity type must be a lowercase word"):
        make_identity("x", type="Customer Id")


@pytest.mark.parametrize("value", [None, "", "   ", "line\nbreak", "x" * 201])
def test_unusable_values_are_refused(value):
    with pytest.raises(InvalidInputError):
        with identify(value):
            pass


def test_identities_nest_and_the_outer_one_comes_back():
    with identify("outer@example.com"):
        with identify("+5511999999999"):
            assert current_identity().key == "phone:+5511999999999"
        assert current_identity().key == "email:outer@example.com"


def test_memory_uses_the_identify_context(store):
    memory = Memory(store)
    with identify("+5511999999999"):
        memory.append("user", "My order number is 12345")
        assert memory.exists()
    session = Session.open(store, "phone:+5511999999999")  # the memory is a session the lab shows
    assert session.get_history()[0]["parts"][0]["text"] == "My order number is 12345"
    assert not memory.exists("phone:+5511888888888")


def test_memory_key_overrides_identify_and_key_overrides_both(store):
    memory = Memory(store, memory_key="custom_key_123")
    with identify("ana@example.com"):
        memory.append("user", "hello")
        memory.append("user", "elsewhere", key="order:77")
    assert Memory(store).exists("custom_key_123")
    assert Memory(store).exists("order:77")
    assert not Memory(store).exists("email:ana@example.com")


def test_without_a_key_the_error_says_how_to_set_one(store):
    with pytest.raises(InvalidInputError, match=r"no memory key: pass key=\.\.\., create the Memory with memory_key"):
        Memory(store).append("user", "hello")


def test_identify_in_a_loop_binds_each_value_once(store):
    memory = Memory(store)
    phones = ["+5511900000001", "+5511900000002", "+5511900000003"]
    for phone in phones:
        with identify(phone):
            memory.append("assistant", f"Following up with {phone}")
    assert current_identity() is None
    for phone in phones:
        assert [m["parts"][0]["text"] for m in memory.get(f"phone:{phone}")["messages"]] == [
            f"Following up with {phone}"]


def test_threads_with_different_identities_never_mix(store):
    memory = Memory(store, agent_id="sdr")
    users = [f"user{i}@example.com" for i in range(6)]
    barrier = threading.Barrier(len(users))
    errors = []

    def converse(email):
        try:
            with identify(email):
                barrier.wait()
                for turn in range(5):
                    memory.append("user", f"{email} says {turn}")
                    memory.append("assistant", f"reply to {email} {turn}")
        except Exception as error:  # surfaced below: a thread's exception would otherwise vanish
            errors.append(error)

    threads = [threading.Thread(target=converse, args=(email,)) for email in users]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for email in users:
        texts = [m["parts"][0]["text"] for m in memory.get(f"email:{email}")["messages"]]
        assert len(texts) == 10
        assert all(email in text for text in texts)


def test_a_new_thread_does_not_inherit_an_identity():
    seen = []
    with identify("main@example.com"):
        thread = threading.Thread(target=lambda: seen.append(current_identity()))
        thread.start()
        thread.join()
    assert seen == [None]


def test_asyncio_tasks_keep_their_own_identity(store):
    memory = Memory(store)

    async def converse(value):
        with identify(value):
            for turn in range(4):
                memory.append("user", f"{value} turn {turn}")
                await asyncio.sleep(0)  # hand over to the other task mid-conversation
            return current_identity().key

    async def main():
        return await asyncio.gather(converse("+5511911111111"), converse("bob@example.com"))

    # A thread of its own: a session-wide Playwright browser may keep a loop running on this one.
    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(asyncio.run, main()).result() == ["phone:+5511911111111", "email:bob@example.com"]
    for key, value in (("phone:+5511911111111", "+5511911111111"), ("email:bob@example.com", "bob@example.com")):
        assert all(m["parts"][0]["text"].startswith(value) for m in memory.get(key)["messages"])
        assert memory.get(key)["total_turns"] == 4


def test_parse_memory_key_splits_type_and_value():
    assert parse_memory_key("phone:+5511999999999") == ("phone", "+5511999999999")
    assert parse_memory_key("url:https://x.io/a:b") == ("url", "https://x.io/a:b")
    assert parse_memory_key("custom_key_123") == (None, None)
    assert parse_memory_key("Support-Order-4471") == (None, None)
