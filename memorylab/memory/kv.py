"""KVStore: values that must come back exactly as stored (a cart, a flag, a counter).

Memory is the wrong place for business data: its history is trimmed for the model and folded into
summaries. A KV entry is any JSON value, kept until it is deleted or its TTL runs out, shared by
every agent of a tenant and separated by namespace. Values are checked before anything is written,
so a refused value leaves the store as it was.
"""
from __future__ import annotations

import json
import math
import re
import time
from datetime import datetime, timezone
from typing import Any

from ..errors import InvalidInputError
from ..messages import to_utc_iso
from ..shapes import KVEntry, KVRows
from ..store.compare_and_set import StaleWriteError, check_expected
from ..store.rows import acyclic_dumps
from ..validation import check_identifier, check_page, is_integer

MAX_KEY_LENGTH = 512
MAX_VALUE_BYTES = 256 * 1024
MAX_TTL_SECONDS = 100 * 365 * 24 * 3600
MAX_PATTERN_LENGTH = 1024
MAX_PAGE_SIZE = 1000
_CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f]")


def check_key(key) -> str:
    """KV keys are 1 to 512 characters of text without control characters."""
    if not isinstance(key, str) or not key:
        raise InvalidInputError(f"a KV key must be a non-empty string, got {key!r}")
    if len(key) > MAX_KEY_LENGTH:
        raise InvalidInputError(f"a KV key is at most {MAX_KEY_LENGTH} characters; this one has {len(key)}")
    if _CONTROL_CHARACTERS.search(key) or not _encodable(key):
        raise InvalidInputError(f"KV key {key[:80]!r} contains control characters or unpaired surrogates")
    return key


def _encodable(text):
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_json_value(value, where):
    """Refuse what JSON would store as something else: tuples, non-string dict keys, NaN."""
    if value is None or isinstance(value, (bool, int, str)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInputError(f"{where} is {value!r}, which JSON cannot hold")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_json_value(item, f"{where}[{index}]")
    elif isinstance(value, dict):
        for name, item in value.items():
            if not isinstance(name, str):
                raise InvalidInputError(
                    f"{where} has the key {name!r}; JSON object keys are strings, so it would come back changed"
                )
            _check_json_value(item, f"{where}[{name!r}]")
    else:
        raise InvalidInputError(
            f"{where} is of type {type(value).__name__}; a KV value is made of dicts with string keys, lists, "
            "strings, numbers, booleans and None"
        )


# One encoder for every value, built once: a value that holds itself fails as too deeply nested.
_dumps = acyclic_dumps(allow_nan=False)


def _exact_json(value):
    """The JSON text of ``value`` when decoding it gives back an equal value.

    One encode and one decode, both in C; only a value that fails (a tuple, a non-string key, NaN,
    another type) is walked in Python, to name what is wrong. Walking every value first cost more
    than the encode and the decode together.
    """
    try:
        text = _dumps(value)
        if json.loads(text) == value:
            return text
    except (TypeError, ValueError):
        pass
    _check_json_value(value, "value")
    return _dumps(value)


def encode_value(value) -> str:
    """The compact JSON text of a value, or InvalidInputError saying why it cannot be stored exactly."""
    try:
        text = _exact_json(value)
    except RecursionError:
        raise InvalidInputError("value is nested too deeply to store as JSON") from None
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidInputError("value contains unpaired surrogates and cannot be stored as UTF-8") from None
    if size > MAX_VALUE_BYTES:
        raise InvalidInputError(
            f"value is {size:,} bytes as JSON; a KV value is at most {MAX_VALUE_BYTES:,} bytes (256 KB)"
        )
    return text


def check_ttl(ttl) -> int | None:
    if ttl is None:
        return None
    if not is_integer(ttl) or not 1 <= ttl <= MAX_TTL_SECONDS:
        raise InvalidInputError(
            f"ttl must be a whole number of seconds from 1 to {MAX_TTL_SECONDS:,}, got {ttl!r}; "
            "pass ttl=None for an entry that never expires"
        )
    return ttl


def _check_pattern(pattern):
    if not isinstance(pattern, str) or len(pattern) > MAX_PATTERN_LENGTH:
        raise InvalidInputError(
            f"a key pattern must be a string of at most {MAX_PATTERN_LENGTH} characters, got {pattern!r:.80}"
        )
    return pattern


def _entry(row):
    """A stored row whose value is still JSON text (one a refused write reports), as an entry."""
    return dict(row, value=json.loads(row["value"]))


def kv_namespaces(store, *, tenant_id="default", limit=None, offset=0) -> list[dict]:
    """The tenant's namespaces that hold live entries, with their entry counts (for browsers), by
    name: all of them, or the page ``limit``/``offset``."""
    if limit is not None:
        check_page(limit, offset, MAX_PAGE_SIZE)
    now = to_utc_iso(datetime.now(timezone.utc))
    return store.kv.namespaces(check_identifier(tenant_id, "tenant id"), now=now,
                               limit=-1 if limit is None else limit, offset=offset)


class KVStore:
    """Exact JSON values by key, optionally expiring: ``KVStore(store, tenant_id=..., namespace=...)``.

    ``clock`` returns the current time in seconds since the epoch (``time.time`` by default); tests
    pass their own to expire entries without sleeping. Patterns are globs: ``*`` matches any run of
    characters, ``?`` exactly one, and every other character (``%``, ``_``, ``[``...) only itself.
    """

    def __init__(self, store, *, tenant_id="default", namespace="default", clock=None):
        self.store = store
        self.tenant_id = check_identifier(tenant_id, "tenant id")
        self.namespace = check_identifier(namespace, "namespace")
        self.clock = clock or time.time

    def __repr__(self):
        return f"<KVStore tenant={self.tenant_id!r} namespace={self.namespace!r}>"

    def _now(self, offset=0):
        return to_utc_iso(datetime.fromtimestamp(self.clock() + offset, timezone.utc))

    def _scope(self):
        return self.tenant_id, self.namespace

    def set(self, key, value, ttl=None, *, expected=None) -> None:
        """Store ``value`` under ``key``, replacing value and TTL; ``ttl`` seconds until it expires.

        ``expected``: the entry's ``version`` as read (``MISSING``: there was none). An entry changed,
        created or removed since is a ``StaleWriteError`` whose ``stored`` is the live entry (or None).
        """
        check_key(key)
        text = encode_value(value)
        expires_at = None if check_ttl(ttl) is None else self._now(ttl)
        try:
            self.store.kv.set(*self._scope(), key, text, expires_at=expires_at, now=self._now(),
                              expected=check_expected(expected))
        except StaleWriteError as stale:
            raise StaleWriteError(f"KV entry {key!r}", expected=expected, version=stale.version,
                                  stored=stale.stored and _entry(stale.stored)) from None

    def ttl_left(self, entry) -> int | None:
        """Whole seconds until ``entry`` (as ``get_entry`` returns it) expires, by this store's clock: at
        least 1 while it is live, so a TTL written back from it never means "never"; None: it never expires."""
        if entry["expires_at"] is None:
            return None
        expires = datetime.fromisoformat(entry["expires_at"].replace("Z", "+00:00")).timestamp()
        return max(int(expires - self.clock()), 1)

    def get_entry(self, key) -> KVEntry | None:
        """``{"key", "value", "expires_at", "created_at", "updated_at", "version"}``, or None when missing
        or expired; ``version`` is what ``set(..., expected=)`` compares."""
        return self.store.kv.get(*self._scope(), check_key(key), now=self._now())

    def get(self, key, default=None) -> Any:
        """The stored value (a stored ``None`` too); ``default`` only when the key is missing or expired."""
        entry = self._live(key)
        return default if entry is None else entry["value"]

    def has(self, key) -> bool:
        return self._live(key) is not None

    def _live(self, key):
        """The live entry without its version, which ``get`` and ``has`` have no use for."""
        return self.store.kv.get(*self._scope(), check_key(key), now=self._now(), versioned=False)

    def delete(self, key) -> bool:
        """Remove ``key``; True when there was a live entry."""
        return self.store.kv.delete(*self._scope(), check_key(key), now=self._now())

    def list_entries(self, pattern=None, *, limit=100, offset=0) -> KVRows:
        """A page of entries (with timestamps) whose keys match ``pattern``, sorted by key."""
        check_page(limit, offset, MAX_PAGE_SIZE)
        return KVRows(self.store.kv.entries(
            *self._scope(), _check_pattern("*" if pattern is None else pattern),
            now=self._now(), limit=limit, offset=offset))

    def count(self, pattern="*") -> int:
        """How many live entries match ``pattern``: the total ``list_entries`` pages through."""
        return self.store.kv.count(*self._scope(), _check_pattern(pattern), now=self._now())

    def _matching(self, pattern):
        return self.store.kv.entries(*self._scope(), _check_pattern(pattern), now=self._now())

    def keys(self, pattern="*") -> list[str]:
        """Every live key matching ``pattern``, sorted."""
        return [row["key"] for row in self._matching(pattern)]

    def get_all(self, pattern="*") -> dict[str, Any]:
        """``{key: value}`` for every live key matching ``pattern``."""
        return {row["key"]: row["value"] for row in self._matching(pattern)}

    def clear(self) -> int:
        """Remove every entry of this namespace; returns how many live ones there were."""
        return self.store.kv.clear(*self._scope(), now=self._now())
