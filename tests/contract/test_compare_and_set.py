"""Compare-and-set writes: each write the lab edits through takes the ``version`` it read as
``expected=``, and a base that changed since is refused with what is stored now, nothing written."""
import threading

import pytest

from memorylab import Experiments, KVStore, Memory, Session, Store
from memorylab.errors import ConflictError, InvalidInputError
from memorylab.memory.longterm import LongTermMemory
from memorylab.store.compare_and_set import MISSING, StaleWriteError
from tests.helpers import text_message


@pytest.fixture
def blocks(session):
    return session.with_context("memory", max_tokens=500)


def test_a_block_write_from_its_current_version_goes_through(blocks):
    read = blocks.get_context_block("memory")
    written = blocks.replace_context_block("memory", "likes tea", expected=read["version"])
    assert written["content"] == "likes tea" and written["version"] != read["version"]


def test_a_block_write_from_a_stale_version_is_refused_with_the_stored_text(blocks):
    stale = blocks.get_context_block("memory")["version"]
    blocks.replace_context_block("memory", "A wrote this")
    with pytest.raises(StaleWriteError, match="block 'memory' changed since it was read") as refused:
        blocks.replace_context_block("memory", "B's old text", expected=stale)
    assert isinstance(refused.value, ConflictError)
    assert refused.value.stored == "A wrote this" and refused.value.expected == stale
    assert blocks.get_context_block("memory")["content"] == "A wrote this"
    blocks.replace_context_block("memory", "B on purpose", expected=refused.value.version)
    assert blocks.get_context_block("memory")["content"] == "B on purpose"


def test_a_block_without_a_version_check_is_written_as_before(blocks):
    blocks.replace_context_block("memory", "one")
    assert blocks.replace_context_block("memory", "two")["content"] == "two"


def test_a_block_written_by_another_store_handle_is_seen(store_target, blocks):
    stale = blocks.get_context_block("memory")["version"]
    with Store(store_target) as other:
        Session.open(other, "s1").with_context("memory").replace_context_block("memory", "from elsewhere")
    with pytest.raises(StaleWriteError):
        blocks.replace_context_block("memory", "mine", expected=stale)


def test_a_block_kept_by_a_provider_of_its_own_cannot_check_versions(session):
    class Notes:
        text = ""

        def get(self):
            return self.text

        def set(self, content):
            self.text = content

    session.with_context("notes", provider=Notes())
    with pytest.raises(InvalidInputError, match="cannot check versions"):
        session.replace_context_block("notes", "x", expected=session.get_context_block("notes")["version"])


def test_a_version_must_be_a_string(blocks):
    with pytest.raises(InvalidInputError, match="expected must be a version string"):
        blocks.replace_context_block("memory", "x", expected=3)


def test_of_two_writers_from_one_version_exactly_one_wins(store_target, blocks):
    base = blocks.get_context_block("memory")["version"]
    outcomes = []

    def write(text):
        with Store(store_target) as own:
            try:
                Session.open(own, "s1").with_context("memory").replace_context_block("memory", text, expected=base)
                outcomes.append(text)
            except StaleWriteError:
                outcomes.append("refused")

    threads = [threading.Thread(target=write, args=(f"writer {n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    [winner] = [outcome for outcome in outcomes if outcome != "refused"]
    assert outcomes.count("refused") == 3
    assert blocks.get_context_block("memory")["content"] == winner


def test_a_kv_entry_written_since_it_was_read_is_refused(store):
    kv = KVStore(store, namespace="carts")
    kv.set("cart", {"items": 1})
    stale = kv.get_entry("cart")["version"]
    kv.set("cart", {"items": 2}, expected=stale)
    with pytest.raises(StaleWriteError, match="KV entry 'cart' changed") as refused:
        kv.set("cart", {"items": 0}, expected=stale)
    assert refused.value.stored["value"] == {"items": 2}
    assert kv.get("cart") == {"items": 2}
    kv.set("cart", {"items": 3}, expected=refused.value.version)
    assert kv.get("cart") == {"items": 3}


def test_a_new_kv_entry_is_refused_when_the_key_was_taken_meanwhile(store):
    kv = KVStore(store)
    kv.set("flag", True, expected=MISSING)
    with pytest.raises(StaleWriteError, match="KV entry 'flag' exists already"):
        kv.set("flag", False, expected=MISSING)
    assert kv.get("flag") is True


def test_a_kv_entry_removed_since_it_was_read_is_refused(store):
    kv = KVStore(store)
    kv.set("flag", True)
    stale = kv.get_entry("flag")["version"]
    kv.delete("flag")
    with pytest.raises(StaleWriteError, match="was removed") as refused:
        kv.set("flag", False, expected=stale)
    assert refused.value.stored is None and refused.value.version == MISSING
    assert not kv.has("flag")


def test_a_kv_ttl_change_is_a_new_version(store):
    kv = KVStore(store)
    kv.set("token", "abc")
    stale = kv.get_entry("token")["version"]
    kv.set("token", "abc", ttl=60)
    with pytest.raises(StaleWriteError):
        kv.set("token", "xyz", expected=stale)


def test_a_kv_version_is_the_same_in_a_listing(store):
    kv = KVStore(store)
    kv.set("a", [1, 2])
    assert kv.list_entries()[0]["version"] == kv.get_entry("a")["version"]


@pytest.fixture
def records(store):
    return LongTermMemory(store, workspace="w")


def test_a_record_edited_since_it_was_read_is_refused_with_the_stored_record(records):
    record = records.add_record("prefers email", tags=["contact"])
    records.update_record(record["id"], expected=record["version"], summary="prefers phone")
    with pytest.raises(StaleWriteError, match=f"memory record {record['id']} changed") as refused:
        records.update_record(record["id"], expected=record["version"], summary="prefers post")
    assert refused.value.stored["summary"] == "prefers phone"
    assert records.get_record(record["id"])["summary"] == "prefers phone"
    records.update_record(record["id"], expected=refused.value.version, summary="prefers post")
    assert records.get_record(record["id"])["summary"] == "prefers post"


def test_a_record_version_changes_with_every_editable_field(records):
    record = records.add_record("a fact", importance=0.5)
    changed = records.update_record(record["id"], importance=0.9)
    assert changed["version"] != record["version"] and records.records()[0]["version"] == changed["version"]


@pytest.fixture
def experiments(store):
    session = Session.create(store, "case-session")
    session.append_message(text_message("m1", "the code is 4471"))
    return Experiments(store)


def spec(description):
    return {"name": "exp", "description": description, "arms": [{"name": "full", "strategy": "none"}],
            "cases": [{"name": "c", "session": "case-session",
                       "probes": [{"id": "p", "question": "code?", "facts": ["4471"]}]}]}


def test_an_experiment_saved_since_it_was_read_is_refused_with_the_saved_spec(experiments):
    assert experiments.version("exp") == MISSING
    experiments.save(spec("first"), expected=MISSING)
    stale = experiments.version("exp")
    experiments.save(spec("A's change"), expected=stale)
    with pytest.raises(StaleWriteError, match="experiment 'exp' changed") as refused:
        experiments.save(spec("B's change"), expected=stale)
    assert refused.value.stored.description == "A's change"
    with pytest.raises(StaleWriteError):
        experiments.run(spec("B runs it"), expected=stale)
    assert experiments.get("exp").description == "A's change"
    assert experiments.trials("exp") == []
    experiments.save(spec("B on purpose"), expected=refused.value.version)
    assert experiments.get("exp").description == "B on purpose"


def test_an_experiment_name_taken_meanwhile_is_refused(experiments):
    experiments.save(spec("someone else's"))
    with pytest.raises(StaleWriteError, match="exists already"):
        experiments.save(spec("mine"), expected=MISSING)
    assert experiments.get("exp").description == "someone else's"


def test_an_unchanged_save_keeps_the_version(experiments):
    experiments.save(spec("same"))
    version = experiments.version("exp")
    experiments.save(spec("same"), expected=version)
    assert experiments.version("exp") == version


def test_a_status_set_since_it_was_read_is_refused(store):
    memory = Memory(store, agent_id="sales", memory_key="email:ana@example.com")
    memory.append("user", "I would like a demo")
    memory.set_status("qualified", expected=None)
    with pytest.raises(StaleWriteError, match="status of session") as refused:
        memory.set_status("closed", expected=None)
    assert refused.value.stored == "qualified" and memory.get()["metadata"]["status"] == "qualified"
    memory.set_status("closed", expected="qualified")
    memory.set_status("in_progress")  # no expected: written as before
    assert memory.get()["metadata"]["status"] is None
