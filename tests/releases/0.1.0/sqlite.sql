-- The schema of a SQLite file written by memorylab 0.1.0 (schema version 6), exactly as the
-- file's sqlite_master holds it; FTS5's shadow tables are left out, the virtual tables create them.
CREATE TABLE sessions (
            pk INTEGER PRIMARY KEY,
            tenant_id TEXT NOT NULL,
            agent_id TEXT NOT NULL,
            session_id TEXT NOT NULL,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}', cached_prompt TEXT, latest_message_id TEXT, status TEXT,
            UNIQUE (tenant_id, agent_id, session_id)
        );
CREATE TABLE messages (
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
        );
CREATE INDEX messages_parent ON messages (session_pk, parent_id);
CREATE TABLE compactions (
            session_pk INTEGER NOT NULL REFERENCES sessions(pk) ON DELETE CASCADE,
            id INTEGER NOT NULL,
            from_id TEXT NOT NULL,
            to_id TEXT NOT NULL,
            summary TEXT NOT NULL,
            created_at TEXT NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}',
            PRIMARY KEY (session_pk, id)
        );
CREATE TABLE context_blocks (
            session_pk INTEGER NOT NULL REFERENCES sessions(pk) ON DELETE CASCADE,
            label TEXT NOT NULL,
            content TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (session_pk, label)
        );
CREATE VIRTUAL TABLE messages_fts USING fts5(text, content='messages', content_rowid='seq', tokenize='unicode61 remove_diacritics 2');
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
            INSERT INTO messages_fts (rowid, text) VALUES (new.seq, new.text);
        END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
            INSERT INTO messages_fts (messages_fts, rowid, text) VALUES ('delete', old.seq, old.text);
        END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF text ON messages BEGIN
            INSERT INTO messages_fts (messages_fts, rowid, text) VALUES ('delete', old.seq, old.text);
            INSERT INTO messages_fts (rowid, text) VALUES (new.seq, new.text);
        END;
CREATE TABLE search_entries (
            pk INTEGER PRIMARY KEY,
            tenant_id TEXT NOT NULL,
            namespace TEXT NOT NULL,
            key TEXT NOT NULL,
            content TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            UNIQUE (tenant_id, namespace, key)
        );
CREATE VIRTUAL TABLE search_entries_fts USING fts5(key, content, content='search_entries', content_rowid='pk', tokenize='unicode61 remove_diacritics 2');
CREATE TRIGGER search_entries_fts_insert AFTER INSERT ON search_entries BEGIN
            INSERT INTO search_entries_fts (rowid, key, content) VALUES (new.pk, new.key, new.content);
        END;
CREATE TRIGGER search_entries_fts_delete AFTER DELETE ON search_entries BEGIN
            INSERT INTO search_entries_fts (search_entries_fts, rowid, key, content)
                VALUES ('delete', old.pk, old.key, old.content);
        END;
CREATE TRIGGER search_entries_fts_update AFTER UPDATE ON search_entries BEGIN
            INSERT INTO search_entries_fts (search_entries_fts, rowid, key, content)
                VALUES ('delete', old.pk, old.key, old.content);
            INSERT INTO search_entries_fts (rowid, key, content) VALUES (new.pk, new.key, new.content);
        END;
CREATE TABLE skill_activations (
            session_pk INTEGER NOT NULL REFERENCES sessions(pk) ON DELETE CASCADE,
            label TEXT NOT NULL,
            key TEXT NOT NULL,
            activated_at TEXT NOT NULL,
            PRIMARY KEY (session_pk, label, key)
        );
CREATE TABLE agents (
            tenant_id TEXT NOT NULL,
            agent_id TEXT NOT NULL,
            name TEXT,
            name_key TEXT,
            slug TEXT,
            created_at TEXT NOT NULL,
            PRIMARY KEY (tenant_id, agent_id)
        );
CREATE UNIQUE INDEX agents_slug ON agents (tenant_id, slug) WHERE slug IS NOT NULL;
CREATE INDEX agents_name ON agents (tenant_id, name_key) WHERE name_key IS NOT NULL;
CREATE TABLE kv_entries (
            pk INTEGER PRIMARY KEY,
            tenant_id TEXT NOT NULL,
            namespace TEXT NOT NULL,
            key TEXT NOT NULL,
            value TEXT NOT NULL,
            expires_at TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            UNIQUE (tenant_id, namespace, key)
        );
CREATE INDEX kv_entries_expiry ON kv_entries (tenant_id, namespace, expires_at) WHERE expires_at IS NOT NULL;
CREATE TABLE memory_records (
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
        );
CREATE INDEX memory_records_scope ON memory_records (workspace, scope, session_id);
CREATE VIRTUAL TABLE memory_records_fts USING fts5(summary, body, tags, content='', tokenize='unicode61 remove_diacritics 2');
CREATE TRIGGER memory_records_fts_insert AFTER INSERT ON memory_records BEGIN INSERT INTO memory_records_fts (rowid, summary, body, tags) VALUES (new.pk, new.summary, COALESCE((SELECT group_concat(atom, ' ') FROM json_tree(new.body) WHERE atom IS NOT NULL), ''), COALESCE((SELECT group_concat(value, ' ') FROM json_each(new.tags)), '')); END;
CREATE TRIGGER memory_records_fts_delete AFTER DELETE ON memory_records BEGIN INSERT INTO memory_records_fts (memory_records_fts, rowid, summary, body, tags) VALUES ('delete', old.pk, old.summary, COALESCE((SELECT group_concat(atom, ' ') FROM json_tree(old.body) WHERE atom IS NOT NULL), ''), COALESCE((SELECT group_concat(value, ' ') FROM json_each(old.tags)), '')); END;
CREATE TRIGGER memory_records_fts_update AFTER UPDATE OF summary, body, tags ON memory_records BEGIN INSERT INTO memory_records_fts (memory_records_fts, rowid, summary, body, tags) VALUES ('delete', old.pk, old.summary, COALESCE((SELECT group_concat(atom, ' ') FROM json_tree(old.body) WHERE atom IS NOT NULL), ''), COALESCE((SELECT group_concat(value, ' ') FROM json_each(old.tags)), '')); INSERT INTO memory_records_fts (rowid, summary, body, tags) VALUES (new.pk, new.summary, COALESCE((SELECT group_concat(atom, ' ') FROM json_tree(new.body) WHERE atom IS NOT NULL), ''), COALESCE((SELECT group_concat(value, ' ') FROM json_each(new.tags)), '')); END;
PRAGMA user_version = 6;
