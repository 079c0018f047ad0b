"""The KV store's rows: JSON values by tenant, namespace and key, with optional expiry.

Timestamps arrive already in the store's ISO form, so the clock stays with the caller
(``memorylab.memory.kv``). Expired rows are filtered out of every read and deleted by the next write to
their namespace.
"""
from __future__ import annotations

from .compare_and_set import MISSING, check_version, version_of
from .repository import Repository
from .rows import read_json, readable

_LIVE = "(expires_at IS NULL OR expires_at > :now)"
_COLUMNS = "key, value, expires_at, created_at, updated_at"
_SET_ENTRY = ("INSERT INTO kv_entries (tenant_id, namespace, key, value, expires_at, created_at, updated_at)"
              " VALUES (:tenant, :ns, :key, :value, :expires_at, :now, :now)")
# An expired entry of the key is a new one: its created_at goes, as if the purge had removed it first.
_REPLACE_ENTRY = (" ON CONFLICT (tenant_id, namespace, key) DO UPDATE SET value = excluded.value,"
                  " expires_at = excluded.expires_at, updated_at = excluded.updated_at, created_at = CASE"
                  " WHEN kv_entries.expires_at <= excluded.updated_at THEN excluded.created_at"
                  " ELSE kv_entries.created_at END")
_PURGE = "DELETE FROM kv_entries WHERE tenant_id = :tenant AND namespace = :ns AND expires_at <= :now"
# Chained, the purge leaves the key's own row to the upsert: one statement may not change a row twice.
_PURGE_AND_SET = f"WITH purged AS ({_PURGE} AND key <> :key) {_SET_ENTRY}{_REPLACE_ENTRY}"


def entry_version(row) -> str:
    """The version of a stored entry: its JSON text and expiry (``MISSING`` for none)."""
    return MISSING if row is None else version_of(row["value"], row["expires_at"])


def _versioned(row):
    return dict(row, version=entry_version(row))


def _readable(row, tenant_id, namespace, versioned=True):
    """The entry with its ``value`` decoded and (``versioned``) its ``version``; DamagedRowError when the
    stored text is unreadable (a read by key raises it, a list leaves the entry out with a
    DamagedRowWarning)."""
    value = read_json(row["value"], object,
                      f"KV entry {row['key']!r} (namespace {namespace!r}, tenant {tenant_id!r})", "value")
    return dict(row, value=value, **({"version": entry_version(row)} if versioned else {}))


class KVEntries(Repository):
    def _no_limit(self, limit):
        return limit if limit >= 0 else self.dialect.no_limit

    def _purge_expired(self, conn, tenant_id, namespace, now):
        conn.execute(_PURGE, {"tenant": tenant_id, "ns": namespace, "now": now})

    def set(self, tenant_id, namespace, key, value, *, expires_at, now, expected=None) -> None:
        """Store a JSON text; ``created_at`` survives an update of a live entry. With ``expected`` (the
        ``version`` of the entry as read, ``MISSING`` for none), only while the live entry is still at
        that version; else ``StaleWriteError`` with the stored row."""
        row = {"tenant": tenant_id, "ns": namespace, "key": key, "value": value, "expires_at": expires_at, "now": now}
        if expected is None and self.dialect.chained_writes:
            self._store.write_one(_PURGE_AND_SET, row)
            return
        with self.transaction() as conn:
            self._purge_expired(conn, tenant_id, namespace, now)
            if expected is None:
                conn.execute(_SET_ENTRY + _REPLACE_ENTRY, row)
                return
            stored = self._locked(conn, tenant_id, namespace, key)
            check_version(f"KV entry {key!r}", expected, entry_version(stored), stored)
            if stored is None:
                if conn.execute(_SET_ENTRY + " ON CONFLICT DO NOTHING", row).rowcount:
                    return
                stored = self._locked(conn, tenant_id, namespace, key)  # another writer created it meanwhile
                check_version(f"KV entry {key!r}", expected, entry_version(stored), stored)
            conn.execute(_SET_ENTRY + _REPLACE_ENTRY, row)

    @staticmethod
    def _locked(conn, tenant_id, namespace, key):
        """The stored entry, its row locked until the transaction ends (PostgreSQL; SQLite's write
        transaction holds the whole file already), with its ``version`` and its ``value`` still JSON
        text; None when there is none."""
        row = conn.execute(
            "UPDATE kv_entries SET updated_at = updated_at WHERE tenant_id = ? AND namespace = ? AND key = ?"
            f" RETURNING {_COLUMNS}", (tenant_id, namespace, key)).fetchone()
        return _versioned(row) if row else None

    def get(self, tenant_id, namespace, key, *, now, versioned=True) -> dict | None:
        """The live entry, its value decoded; without its ``version`` unless ``versioned`` (computing
        it hashes the stored text, which a plain read of the value does not need)."""
        row = self._one(
            f"SELECT {_COLUMNS} FROM kv_entries WHERE tenant_id = :tenant AND namespace = :ns AND key = :key"
            f" AND {_LIVE}",
            {"tenant": tenant_id, "ns": namespace, "key": key, "now": now},
        )
        return _readable(row, tenant_id, namespace, versioned) if row else None

    def entries(self, tenant_id, namespace, pattern, *, now, limit=-1, offset=0) -> list[dict]:
        """Live entries whose key matches the ``*``/``?`` glob ``pattern``, by key (limit -1: all)."""
        rows = self._all(
            f"""SELECT {_COLUMNS} FROM kv_entries
            WHERE tenant_id = :tenant AND namespace = :ns AND {self.dialect.glob("key", ":glob")} AND {_LIVE}
            ORDER BY key LIMIT :limit OFFSET :offset""",
            {"tenant": tenant_id, "ns": namespace, "glob": self.dialect.glob_pattern(pattern), "now": now,
             "limit": self._no_limit(limit), "offset": offset},
        )
        return readable(rows, lambda row: _readable(row, tenant_id, namespace))

    def count(self, tenant_id, namespace, pattern, *, now) -> int:
        """How many live entries ``entries`` pages through for the same pattern."""
        return self._one(
            f"SELECT COUNT(*) AS n FROM kv_entries WHERE tenant_id = :tenant AND namespace = :ns"
            f" AND {self.dialect.glob('key', ':glob')} AND {_LIVE}",
            {"tenant": tenant_id, "ns": namespace, "glob": self.dialect.glob_pattern(pattern), "now": now},
        )["n"]

    def namespaces(self, tenant_id, *, now, limit=-1, offset=0) -> list[dict]:
        """``[{"namespace", "entries"}]``: the namespaces of a tenant that hold live entries, by name
        (limit -1: all)."""
        rows = self._all(
            f"SELECT namespace, COUNT(*) AS entries FROM kv_entries WHERE tenant_id = :tenant AND {_LIVE}"
            " GROUP BY namespace ORDER BY namespace LIMIT :limit OFFSET :offset",
            {"tenant": tenant_id, "now": now, "limit": self._no_limit(limit), "offset": offset},
        )
        return [dict(r) for r in rows]

    def delete(self, tenant_id, namespace, key, *, now) -> bool:
        """Remove one entry; True when a live one was removed."""
        with self.transaction() as conn:
            self._purge_expired(conn, tenant_id, namespace, now)
            return conn.execute(
                "DELETE FROM kv_entries WHERE tenant_id = ? AND namespace = ? AND key = ?",
                (tenant_id, namespace, key),
            ).rowcount > 0

    def clear(self, tenant_id, namespace, *, now) -> int:
        """Remove every entry of a namespace; returns how many live ones there were."""
        with self.transaction() as conn:
            self._purge_expired(conn, tenant_id, namespace, now)
            return conn.execute(
                "DELETE FROM kv_entries WHERE tenant_id = ? AND namespace = ?", (tenant_id, namespace)
            ).rowcount
