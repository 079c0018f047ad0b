"""The SQLite schema as numbered forward migrations.

``PRAGMA user_version`` holds the number of the last migration applied. Migrations run inside one
``BEGIN IMMEDIATE`` transaction, so two processes opening a new file at once cannot both apply them
and a crash mid-migration leaves the previous version intact. The DDL is written out here rather
than through sqlite-utils' helpers because those commit between statements.
"""
from ..errors import MemoryLabError


def _create_core_tables(conn):
    conn.execute(
        """CREATE TABLE sessions (
            pk INTEGER PRIMARY KEY,
            tenant_id TEXT NOT NULL,
            agent_id TEXT NOT NULL,
            session_id TEXT NOT NULL,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}',
            UNIQUE (tenant_id, agent_id, session_id)
        )"""
    )
    # seq is the insertion order: the newest message of a session is always a leaf, because a
    # child can only be written after its parent. That makes "latest leaf" a MAX(seq) lookup.
    conn.execute(
        """CREATE TABLE messages (
            seq INTEGER PRIMARY KEY,
            session_pk INTEGER NOT NULL REFERENCES sessions(pk) ON DELETE CASCADE,
            id TEXT NOT NULL,
            parent_id TEXT,
            role TEXT NOT NULL,
            parts TEXT NOT NULL,
            text TEXT NOT NULL,
            created_at TEXT NOT NULL,
            metadata TEXT NOT NULL,
            tokens INTEGER NOT NULL,
            UNIQUE (session_pk, id)
        )"""
    )
    # (session_pk) also orders by seq, the implicit last column: latest leaf is one index probe.
    conn.execute("CREATE INDEX messages_session ON messages (session_pk)")
    conn.execute("CREATE INDEX messages_parent ON messages (session_pk, parent_id)")
    conn.execute(
        """CREATE TABLE compactions (
            session_pk INTEGER NOT NULL REFERENCES sessions(pk) ON DELETE CASCADE,
            id INTEGER NOT NULL,
            from_id TEXT NOT NULL,
            to_id TEXT NOT NULL,
            summary TEXT NOT NULL,
            created_at TEXT NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}',
            PRIMARY KEY (session_pk, id)
        )"""
    )
    conn.execute(
        """CREATE TABLE context_blocks (
            session_pk INTEGER NOT NULL REFERENCES sessions(pk) ON DELETE CASCADE,
            label TEXT NOT NULL,
            content TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (session_pk, label)
        )"""
    )


def _create_message_search(conn):
    # External-content FTS5 over messages.text: the index stores no second copy of the text.
    conn.execute(
        "CREATE VIRTUAL TABLE messages_fts USING fts5(text, content='messages', content_rowid='seq',"
        " tokenize='unicode61 remove_diacritics 2')"
    )
    conn.execute(
        """CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
            INSERT INTO messages_fts (rowid, text) VALUES (new.seq, new.text);
        END"""
    )
    conn.execute(
        """CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
            INSERT INTO messages_fts (messages_fts, rowid, text) VALUES ('delete', old.seq, old.text);
        END"""
    )
    conn.execute(
        """CREATE TRIGGER messages_fts_update AFTER UPDATE OF text ON messages BEGIN
            INSERT INTO messages_fts (messages_fts, rowid, text) VALUES ('delete', old.seq, old.text);
            INSERT INTO messages_fts (rowid, text) VALUES (new.seq, new.text);
        END"""
    )


def _create_context_storage(conn):
    """Frozen prompts that survive restarts, keyed search entries with FTS5, and active skills."""
    conn.execute("ALTER TABLE sessions ADD COLUMN cached_prompt TEXT")
    conn.execute(
        """CREATE TABLE search_entries (
            pk INTEGER PRIMARY KEY,
            tenant_id TEXT NOT NULL,
            namespace TEXT NOT NULL,
            key TEXT NOT NULL,
            content TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            UNIQUE (tenant_id, namespace, key)
        )"""
    )
    conn.execute(
        "CREATE VIRTUAL TABLE search_entries_fts USING fts5(key, content, content='search_entries',"
        " content_rowid='pk', tokenize='unicode61 remove_diacritics 2')"
    )
    conn.execute(
        """CREATE TRIGGER search_entries_fts_insert AFTER INSERT ON search_entries BEGIN
            INSERT INTO search_entries_fts (rowid, key, content) VALUES (new.pk, new.key, new.content);
        END"""
    )
    conn.execute(
        """CREATE TRIGGER search_entries_fts_delete AFTER DELETE ON search_entries BEGIN
            INSERT INTO search_entries_fts (search_entries_fts, rowid, key, content)
                VALUES ('delete', old.pk, old.key, old.content);
        END"""
    )
    conn.execute(
        """CREATE TRIGGER search_entries_fts_update AFTER UPDATE ON search_entries BEGIN
            INSERT INTO search_entries_fts (search_entries_fts, rowid, key, content)
                VALUES ('delete', old.pk, old.key, old.content);
            INSERT INTO search_entries_fts (rowid, key, content) VALUES (new.pk, new.key, new.content);
        END"""
    )
    conn.execute(
        """CREATE TABLE skill_activations (
            session_pk INTEGER NOT NULL REFERENCES sessions(pk) ON DELETE CASCADE,
            label TEXT NOT NULL,
            key TEXT NOT NULL,
            activated_at TEXT NOT NULL,
            PRIMARY KEY (session_pk, label, key)
        )"""
    )


def _track_latest_message(conn):
    """Keep the newest message id on the session row: the append path reads it instead of probing
    an index that every insert would have to maintain."""
    conn.execute("ALTER TABLE sessions ADD COLUMN latest_message_id TEXT")
    conn.execute(
        "UPDATE sessions SET latest_message_id ="
        " (SELECT id FROM messages WHERE session_pk = sessions.pk ORDER BY seq DESC LIMIT 1)"
    )
    conn.execute("DROP INDEX messages_session")


def _create_memory_manager(conn):
    """The agents registry (so an admin can address an agent by id, slug or name), a memory's
    status, and the tenant-wide KV store. Agents that already own sessions are registered here."""
    conn.execute(
        """CREATE TABLE agents (
            tenant_id TEXT NOT NULL,
            agent_id TEXT NOT NULL,
            name TEXT,
            name_key TEXT,
            slug TEXT,
            created_at TEXT NOT NULL,
            PRIMARY KEY (tenant_id, agent_id)
        )"""
    )
    # name_key is the casefolded name: names match case-insensitively beyond ASCII, which NOCASE cannot.
    conn.execute("CREATE UNIQUE INDEX agents_slug ON agents (tenant_id, slug) WHERE slug IS NOT NULL")
    conn.execute("CREATE INDEX agents_name ON agents (tenant_id, name_key) WHERE name_key IS NOT NULL")
    conn.execute(
        "INSERT INTO agents (tenant_id, agent_id, created_at)"
        " SELECT tenant_id, agent_id, MIN(created_at) FROM sessions GROUP BY tenant_id, agent_id"
    )
    conn.execute("ALTER TABLE sessions ADD COLUMN status TEXT")
    conn.execute(
        """CREATE TABLE kv_entries (
            pk INTEGER PRIMARY KEY,
            tenant_id TEXT NOT NULL,
            namespace TEXT NOT NULL,
            key TEXT NOT NULL,
            value TEXT NOT NULL,
            expires_at TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            UNIQUE (tenant_id, namespace, key)
        )"""
    )
    conn.execute(
        "CREATE INDEX kv_entries_expiry ON kv_entries (tenant_id, namespace, expires_at)"
        " WHERE expires_at IS NOT NULL"
    )


def _memory_search_values(row):
    """The FTS5 values of a memory record (``row`` is ``new`` or ``old`` in a trigger): the summary,
    the scalar values of the body (its keys are the same in every record, so they would match every
    query) and the tags, as plain text."""
    return (
        f"{row}.pk, {row}.summary,"
        f" COALESCE((SELECT group_concat(atom, ' ') FROM json_tree({row}.body) WHERE atom IS NOT NULL), ''),"
        f" COALESCE((SELECT group_concat(value, ' ') FROM json_each({row}.tags)), '')"
    )


def _create_long_term_memory(conn):
    """Long-term memory records (seed 002's workspace collection "memory") and their keyword index.

    ``kind`` and ``scope`` name the same thing in the seed's two vocabularies; the CHECK keeps them
    and ``session_id`` in step, so a session memory can never lose the session that owns it. The
    index is contentless: it holds the words of the flattened body and tags, which exist in no
    column, so the triggers recompute them for the FTS5 'delete' command.
    """
    conn.execute(
        """CREATE TABLE memory_records (
            pk INTEGER PRIMARY KEY,
            workspace TEXT NOT NULL,
            collection TEXT NOT NULL DEFAULT 'memory',
            kind TEXT NOT NULL,
            scope TEXT NOT NULL,
            session_id TEXT,
            summary TEXT NOT NULL,
            body TEXT NOT NULL DEFAULT '{}',
            tags TEXT NOT NULL DEFAULT '[]',
            importance REAL NOT NULL,
            provenance TEXT NOT NULL DEFAULT '{}',
            vector_index TEXT NOT NULL DEFAULT '{}',
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            CHECK ((kind = 'global_memory' AND scope = 'GLOBAL_MEMORY' AND session_id IS NULL)
                OR (kind = 'session_memory' AND scope = 'SESSION_MEMORY' AND session_id IS NOT NULL))
        )"""
    )
    conn.execute("CREATE INDEX memory_records_scope ON memory_records (workspace, scope, session_id)")
    conn.execute(
        "CREATE VIRTUAL TABLE memory_records_fts USING fts5(summary, body, tags, content='',"
        " tokenize='unicode61 remove_diacritics 2')"
    )
    insert = f"INSERT INTO memory_records_fts (rowid, summary, body, tags) VALUES ({_memory_search_values('new')});"
    delete = (
        "INSERT INTO memory_records_fts (memory_records_fts, rowid, summary, body, tags)"
        f" VALUES ('delete', {_memory_search_values('old')});"
    )
    conn.execute(f"CREATE TRIGGER memory_records_fts_insert AFTER INSERT ON memory_records BEGIN {insert} END")
    conn.execute(f"CREATE TRIGGER memory_records_fts_delete AFTER DELETE ON memory_records BEGIN {delete} END")
    conn.execute(
        "CREATE TRIGGER memory_records_fts_update AFTER UPDATE OF summary, body, tags ON memory_records"
        f" BEGIN {delete} {insert} END"
    )


MIGRATIONS = (_create_core_tables, _create_message_search, _create_context_storage, _track_latest_message,
              _create_memory_manager, _create_long_term_memory)
SCHEMA_VERSION = len(MIGRATIONS)


def migrate(conn):
    """Apply the migrations this file has not seen yet; returns the number applied."""
    # An up-to-date file needs no write lock, so opening it never waits behind another process's write.
    if conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
        return 0
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise MemoryLabError(
                f"this database has schema version {version}, newer than this memorylab "
                f"({SCHEMA_VERSION}); upgrade memorylab to open it"
            )
        for migration in MIGRATIONS[version:]:
            migration(conn)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return SCHEMA_VERSION - version
