import pytest

from memorylab import InvalidInputError, Store
from memorylab.memory.kv import MAX_VALUE_BYTES, KVStore, kv_namespaces
from memorylab.store.kv import entry_version
from tests.helpers import count_rows


class FakeClock:
    """Seconds since the epoch that move only when a test says so."""

    def __init__(self, now=1_767_225_600.0):  # 2026-01-01T00:00:00Z
        self.now = now

    def __call__(self):
        return self.now

    def advance(self, seconds):
        self.now += seconds


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def kv(store, clock):
    return KVStore(store, tenant_id="acme", namespace="carts", clock=clock)


def shape(value):
    """The value with every element's exact type spelled out, so 1 and 1.0 and True differ."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shape(item) for item in value]
    return (type(value).__name__, value)


VALUES = [
    0, -7, 2 ** 70, 1.0, 0.1, -2.5e-300, 1e308, True, False, None, "", "ünïcødé ✓ 🎉 日本",
    [], {}, [1, 1.0, True, None, "1"],
    {"cart": [{"sku": "A-1", "qty": 2, "price": 19.9}], "meta": {"coupon": None, "tags": ["vip"]}},
]


@pytest.mark.parametrize("value", VALUES, ids=[repr(v)[:30] for v in VALUES])
def test_values_come_back_with_their_exact_types(kv, store_target, clock, value):
    kv.set("k", value)
    assert shape(kv.get("k", "missing")) == shape(value)
    with Store(store_target) as reopened:  # and from the database, not from a cache
        assert shape(KVStore(reopened, tenant_id="acme", namespace="carts", clock=clock).get("k")) == shape(value)


def test_a_stored_none_is_not_a_missing_key(kv):
    kv.set("coupon", None)
    assert kv.has("coupon")
    assert kv.get("coupon", "default") is None
    assert kv.get("absent", "default") == "default"
    assert kv.get_entry("absent") is None


def test_get_entry_has_timestamps_and_updates_keep_created_at(kv, clock):
    kv.set("flag", True, ttl=60)
    entry = kv.get_entry("flag")
    assert entry == {"key": "flag", "value": True, "expires_at": "2026-01-01T00:01:00.000Z",
                     "created_at": "2026-01-01T00:00:00.000Z", "updated_at": "2026-01-01T00:00:00.000Z",
                     "version": entry_version({"value": "true", "expires_at": "2026-01-01T00:01:00.000Z"})}
    clock.advance(30)
    kv.set("flag", False)  # a new value replaces the TTL too: no ttl means no expiry
    entry = kv.get_entry("flag")
    assert (entry["value"], entry["expires_at"]) == (False, None)
    assert entry["created_at"] == "2026-01-01T00:00:00.000Z"
    assert entry["updated_at"] == "2026-01-01T00:00:30.000Z"


def test_an_expired_entry_is_invisible_everywhere(kv, clock):
    kv.set("session-lock", "worker-1", ttl=10)
    kv.set("cart:1", {"items": 1})
    clock.advance(9.999)
    assert kv.get("session-lock") == "worker-1"
    clock.advance(0.001)
    assert kv.get("session-lock", "gone") == "gone"
    assert not kv.has("session-lock")
    assert kv.get_entry("session-lock") is None
    assert kv.keys() == ["cart:1"]
    assert kv.get_all("*") == {"cart:1": {"items": 1}}
    assert [e["key"] for e in kv.list_entries()] == ["cart:1"]
    assert kv.delete("session-lock") is False


def test_the_ttl_left_counts_down_by_the_stores_clock_and_never_reads_as_never(kv, clock):
    kv.set("session-lock", "worker-1", ttl=90)
    kv.set("cart:1", {"items": 1})
    assert kv.ttl_left(kv.get_entry("session-lock")) == 90
    assert kv.ttl_left(kv.get_entry("cart:1")) is None
    clock.advance(60.5)
    assert kv.ttl_left(kv.get_entry("session-lock")) == 29
    clock.advance(29.4)  # live for a tenth of a second more: written back as a TTL it must not mean "never"
    assert kv.ttl_left(kv.get_entry("session-lock")) == 1


def test_expired_entries_are_purged_by_the_next_write(kv, store, clock):
    kv.set("a", 1, ttl=5)
    kv.set("b", 2, ttl=5)
    clock.advance(5)
    count = lambda: count_rows(store, "kv_entries")  # noqa: E731
    assert count() == 2  # reads never write
    kv.set("c", 3)
    assert count() == 1


def test_setting_an_expired_key_starts_a_new_entry(kv, clock):
    kv.set("otp", "1234", ttl=5)
    clock.advance(6)
    kv.set("otp", "9999", ttl=5)
    entry = kv.get_entry("otp")
    assert entry["value"] == "9999"
    assert entry["created_at"] == "2026-01-01T00:00:06.000Z"


def test_clear_counts_live_entries_only(kv, clock):
    kv.set("a", 1)
    kv.set("b", 2, ttl=1)
    clock.advance(1)
    assert kv.clear() == 1
    assert kv.keys() == []


GLOB_KEYS = ["cart:1", "cart:2", "cart:10", "user:1", "100%", "50%off", "a_b", "axb", "[x]", "x", "a*b", "it's"]


@pytest.mark.parametrize("pattern, expected", [
    ("*", sorted(GLOB_KEYS)),
    ("cart:*", ["cart:1", "cart:10", "cart:2"]),
    ("cart:?", ["cart:1", "cart:2"]),
    ("*:1", ["cart:1", "user:1"]),
    ("*%", ["100%"]),  # % is a literal percent sign, not SQL LIKE's wildcard
    ("%", []),
    ("a_b", ["a_b"]),  # _ is a literal underscore, not SQL LIKE's single character
    ("[x]", ["[x]"]),  # [ is literal, not a GLOB character class
    ("[*", ["[x]"]),
    ("a*b", ["a*b", "a_b", "axb"]),  # * is always the wildcard
    ("*'*", ["it's"]),
    ("CART:*", []),  # keys are case-sensitive
    ("", []),
])
def test_glob_patterns(kv, pattern, expected):
    for key in GLOB_KEYS:
        kv.set(key, key)
    assert kv.keys(pattern) == expected
    assert kv.get_all(pattern) == {key: key for key in expected}
    assert kv.count(pattern) == len(expected)


def test_list_entries_pages_in_key_order(kv):
    for i in range(7):
        kv.set(f"item:{i}", i)
    page = kv.list_entries("item:*", limit=3, offset=2)
    assert [(e["key"], e["value"]) for e in page] == [("item:2", 2), ("item:3", 3), ("item:4", 4)]
    assert set(page[0]) == {"key", "value", "expires_at", "created_at", "updated_at", "version"}
    assert len(kv.list_entries(limit=1000)) == 7


def test_count_is_the_total_of_the_pages_and_skips_expired_entries(kv, clock):
    for i in range(7):
        kv.set(f"item:{i}", i, ttl=10 if i % 2 else None)
    kv.set("other", 0)
    pages = [kv.list_entries("item:*", limit=3, offset=offset) for offset in (0, 3, 6)]
    assert kv.count("item:*") == sum(len(page) for page in pages) == 7 and kv.count() == 8
    clock.advance(10)
    assert kv.count("item:*") == len(kv.keys("item:*")) == 4


def test_namespaces_page_by_name(store, clock):
    for namespace in ("c", "a", "b"):
        KVStore(store, tenant_id="acme", namespace=namespace, clock=clock).set("k", 1)
    assert [n["namespace"] for n in kv_namespaces(store, tenant_id="acme")] == ["a", "b", "c"]
    assert kv_namespaces(store, tenant_id="acme", limit=2, offset=1) == [
        {"namespace": "b", "entries": 1}, {"namespace": "c", "entries": 1}]


@pytest.mark.parametrize("limit, offset, message", [
    (0, 0, "limit must be an integer from 1 to 1000, got 0"),
    (1001, 0, "limit must be an integer from 1 to 1000, got 1001"),
    (True, 0, "limit must be an integer from 1 to 1000, got True"),
    (10, -1, "offset must be a non-negative integer, got -1"),
])
def test_bad_pages_are_refused(kv, limit, offset, message):
    with pytest.raises(InvalidInputError, match=message):
        kv.list_entries(limit=limit, offset=offset)


def test_key_length_limits(kv):
    kv.set("k" * 512, 1)
    assert kv.get("k" * 512) == 1
    with pytest.raises(InvalidInputError, match="a KV key is at most 512 characters; this one has 513"):
        kv.set("k" * 513, 1)
    with pytest.raises(InvalidInputError, match="a KV key must be a non-empty string, got ''"):
        kv.set("", 1)
    with pytest.raises(InvalidInputError, match="a KV key must be a non-empty string, got 42"):
        kv.get(42)
    with pytest.raises(InvalidInputError, match="contains control characters"):
        kv.set("a\x00b", 1)


def test_value_size_limit_counts_utf8_bytes(kv):
    fits = "é" * ((MAX_VALUE_BYTES - 2) // 2)  # two bytes each, plus the JSON quotes
    kv.set("big", fits)
    assert kv.get("big") == fits
    with pytest.raises(InvalidInputError,
                       match=r"value is 262,146 bytes as JSON; a KV value is at most 262,144 bytes \(256 KB\)"):
        kv.set("big", fits + "é")
    assert kv.get("big") == fits  # the refused write changed nothing


@pytest.mark.parametrize("value, message", [
    ((1, 2), "value is of type tuple; a KV value is made of dicts with string keys"),
    ({"ok": {1: "a"}}, r"value\['ok'\] has the key 1; JSON object keys are strings"),
    ([float("nan")], r"value\[0\] is nan, which JSON cannot hold"),
    ({"x": float("inf")}, r"value\['x'\] is inf, which JSON cannot hold"),
    ({"when": object()}, r"value\['when'\] is of type object"),
    (b"bytes", "value is of type bytes"),
    ({1, 2}, "value is of type set"),
    ("\ud800", "unpaired surrogates"),
])
def test_values_json_would_change_are_refused(kv, value, message):
    with pytest.raises(InvalidInputError, match=message):
        kv.set("k", value)
    assert not kv.has("k")


@pytest.mark.parametrize("ttl", [0, -1, 1.5, 10.0, True, "10", 10 ** 12])
def test_bad_ttls_are_refused(kv, ttl):
    with pytest.raises(InvalidInputError, match="ttl must be a whole number of seconds from 1 to"):
        kv.set("k", 1, ttl=ttl)
    assert not kv.has("k")


def test_tenants_and_namespaces_never_see_each_other(store, clock):
    acme_carts = KVStore(store, tenant_id="acme", namespace="carts", clock=clock)
    acme_flags = KVStore(store, tenant_id="acme", namespace="flags", clock=clock)
    globex_carts = KVStore(store, tenant_id="globex", namespace="carts", clock=clock)
    acme_carts.set("shared", "acme cart")
    acme_flags.set("shared", "acme flag")
    globex_carts.set("shared", "globex cart")
    assert [kv.get("shared") for kv in (acme_carts, acme_flags, globex_carts)] == [
        "acme cart", "acme flag", "globex cart"]
    assert globex_carts.keys() == ["shared"]
    assert acme_carts.clear() == 1
    assert acme_carts.get("shared") is None
    assert acme_flags.get("shared") == "acme flag"
    assert globex_carts.delete("shared") is True
    assert acme_flags.has("shared")


@pytest.mark.parametrize("key", ["'; DROP TABLE kv_entries; --", "%", "_", "\\", "[", "]", "*", "?",
                                 'quote"s', "a' OR '1'='1"])
def test_hostile_keys_are_plain_keys(kv, key):
    kv.set("neighbour", "untouched")
    kv.set(key, {"key": key})
    assert kv.get(key) == {"key": key}
    assert kv.delete(key) is True
    assert kv.keys() == ["neighbour"]


def test_default_clock_is_wall_time(store):
    kv = KVStore(store)
    kv.set("k", 1, ttl=3600)
    assert kv.get("k") == 1
    with pytest.raises(InvalidInputError, match="namespace must be a non-empty string"):
        KVStore(store, namespace="")
