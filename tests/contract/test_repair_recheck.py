"""``check --repair`` moves a row only while it is still damaged: the application may rewrite a row
between the check that listed it and the repair's transaction, and what it wrote then must stay.

The repair sets each listed row aside in a transaction of its own (``Quarantine.set_aside``); these
tests list the damage, let the application write, then run that step, as the interleaving happens
when the lab or an agent writes while ``memorylab check --repair`` runs."""
import pytest

from memorylab import KVStore, Session
from memorylab.check import repair_database
from memorylab.store.quarantine import Quarantine
from tests.helpers import count_rows, text_message


def damage(store, sql, *params):
    """Write behind the engine's back, as a careless script or a bad disk would."""
    with store.transaction() as conn:
        conn.execute(sql, params)


def kv_fixed_meanwhile(store):
    kv = KVStore(store, tenant_id="acme", namespace="prefs")
    kv.set("theme", {"mode": "dark"})
    damage(store, "UPDATE kv_entries SET value = '{\"mode\": dar' WHERE key = 'theme'")
    return lambda: kv.set("theme", {"mode": "light"}), lambda: kv.get("theme") == {"mode": "light"}


def metadata_fixed_meanwhile(store):
    session = Session.create(store, "s1")
    session.append_message(text_message("m1", "hello"))
    damage(store, "UPDATE sessions SET metadata = '[1, 2]' WHERE session_id = 's1'")
    return (lambda: session.set_metadata({"title": "mended"}),
            lambda: Session.open(store, "s1").info["metadata"] == {"title": "mended"})


REWRITES = {"a KV value": kv_fixed_meanwhile, "a session's metadata": metadata_fixed_meanwhile}


@pytest.mark.parametrize("rewrite", list(REWRITES))
def test_a_row_the_application_rewrote_after_the_check_is_left_as_it_wrote_it(store, rewrite):
    fix, fixed = REWRITES[rewrite](store)
    [listed] = store.integrity.damaged_rows()
    fix()
    assert Quarantine(store).set_aside(listed["table"], listed["key"], listed["problem"]) is None
    assert fixed()
    assert count_rows(store, "quarantine") == 0 and store.integrity.damaged_rows() == []


@pytest.mark.parametrize("rewrite", list(REWRITES))
def test_a_row_still_damaged_when_the_repair_reaches_it_is_set_aside(store, rewrite):
    REWRITES[rewrite](store)
    [line] = repair_database(store)
    assert line.startswith("set aside ") and count_rows(store, "quarantine") == 1
    assert store.integrity.damaged_rows() == []
