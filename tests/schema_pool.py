"""Reuse of PostgreSQL test schemas: a schema goes back to the pool only when its shape is exactly what
the migrations make (every relation, column and type, and the recorded version), so a test that
damaged or changed it never hands that on; such a schema, or one never migrated, is dropped."""
import uuid

SHAPE = """
SELECT md5(coalesce(string_agg(c.relname::text || ':' || c.relkind::text || ':' || coalesce((
           SELECT string_agg(a.attname::text || ' ' || format_type(a.atttypid, a.atttypmod)
                                    || ' ' || a.attgenerated::text,
                             ',' ORDER BY a.attnum)
           FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped), ''),
         ';' ORDER BY c.relname), ''))
       || (SELECT count(*) FROM pg_proc p WHERE p.pronamespace = n.oid)::text
FROM pg_namespace n LEFT JOIN pg_class c ON c.relnamespace = n.oid
WHERE n.nspname = %s GROUP BY n.oid
"""
RECORD_TABLE = "memorylab_schema"


class SchemaPool:
    """Schemas on one server, handed out and taken back over one autocommit connection of its own.

    The shape every schema must have to go back into the pool is read from one that ``migrate`` (a
    function opening a store on a schema, so its migrations run) has just made: never from a schema
    a test has used, which may have damaged it."""

    def __init__(self, conn, migrate):
        self.conn, self.free = conn, []
        schema = self.take()
        migrate(schema)
        self.migrated_shape = self._fingerprint(conn, schema)
        self.free.append(schema)

    def take(self):
        if self.free:
            return self.free.pop()
        schema = f"test_{uuid.uuid4().hex[:12]}"
        self.conn.execute(f"CREATE SCHEMA {schema}")
        return schema

    def give_back(self, schema):
        conn = self.conn
        if self._fingerprint(conn, schema) == self.migrated_shape and self._empty(conn, schema):
            self.free.append(schema)
            return
        conn.execute(f"DROP SCHEMA {schema} CASCADE")

    @classmethod
    def _fingerprint(cls, conn, schema):
        """(shape, recorded version) of a schema; None when it was never migrated."""
        shape = conn.execute(SHAPE, (schema,)).fetchone()
        version = cls._version(conn, schema)
        return (shape[0], version) if shape and version is not None else None

    @staticmethod
    def _version(conn, schema):
        exists = conn.execute("SELECT 1 FROM pg_tables WHERE schemaname = %s AND tablename = %s",
                              (schema, RECORD_TABLE)).fetchone()
        if not exists:
            return None
        rows = conn.execute(f"SELECT version FROM {schema}.{RECORD_TABLE}").fetchall()
        return tuple(rows) if len(rows) == 1 else None

    @staticmethod
    def _empty(conn, schema):
        """Remove every row (ids restart); False when a lock another connection holds gets in the way."""
        tables = [row[0] for row in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s AND tablename <> %s", (schema, RECORD_TABLE))]
        try:
            conn.execute("SET lock_timeout = '2s'")
            conn.execute(f"TRUNCATE {', '.join(f'{schema}.{t}' for t in tables)} RESTART IDENTITY CASCADE")
            return True
        except Exception:  # noqa: BLE001 - any failure means the schema is not reused
            return False
