"""The schema's history: forward migrations in the order both backends apply them.

Each migration is a function of ``db`` (a ``ddl`` object bound to one connection) that says what
changed in terms of the declarations in ``schema``: ``db.create(TABLE)``, ``db.add(TABLE)`` for the
columns declared ``since`` it, ``db.execute(sql)`` for rows to carry over. A database records how
many it has applied (SQLite's ``user_version``, PostgreSQL's ``memorylab_schema`` table); opening it
applies the rest in one transaction. A new migration goes at the end, and is never edited once released.
"""
from collections.abc import Callable

from ..errors import MemoryLabError
from .ddl import DDL
from .schema import (
    AGENTS,
    COMPACTIONS,
    CONTEXT_BLOCKS,
    EXPERIMENT_ARMS,
    EXPERIMENT_CASES,
    EXPERIMENT_GRADES,
    EXPERIMENT_LABELS,
    EXPERIMENT_PROBES,
    EXPERIMENT_RUNS,
    EXPERIMENTS,
    KV_ENTRIES,
    MEMORY_RECORDS,
    MESSAGE_PINS,
    MESSAGES,
    QUARANTINE,
    SEARCH_ENTRIES,
    SESSIONS,
    SKILL_ACTIVATIONS,
)

MIGRATIONS: list[Callable[[DDL], None]] = []


def migration(function):
    MIGRATIONS.append(function)
    return function


@migration
def m001_initial(db):
    db.create(SESSIONS, MESSAGES, COMPACTIONS, CONTEXT_BLOCKS)


@migration
def m002_message_search(db):
    db.add(MESSAGES)


@migration
def m003_context_storage(db):
    """Frozen prompts that survive restarts, keyed search entries, and active skills."""
    db.add(SESSIONS)
    db.create(SEARCH_ENTRIES, SKILL_ACTIVATIONS)


@migration
def m004_track_latest_message(db):
    db.add(SESSIONS)
    db.execute("UPDATE sessions SET latest_message_id ="
               " (SELECT id FROM messages WHERE session_pk = sessions.pk ORDER BY seq DESC LIMIT 1)")
    if db.dialect == "sqlite":  # files written before this migration have the index every insert maintained
        db.execute("DROP INDEX IF EXISTS messages_session")


@migration
def m005_memory_manager(db):
    """The agents registry (so an admin can address an agent by id, slug or name), a memory's status
    and the tenant-wide KV store. Agents that already own sessions are registered."""
    db.create(AGENTS)
    db.execute("INSERT INTO agents (tenant_id, agent_id, created_at)"
               " SELECT tenant_id, agent_id, MIN(created_at) FROM sessions GROUP BY tenant_id, agent_id")
    db.add(SESSIONS)
    db.create(KV_ENTRIES)


@migration
def m006_long_term_memory(db):
    db.create(MEMORY_RECORDS)


CONTINUING_MESSAGES = """SELECT seq FROM (
        SELECT seq, parent_id, LAG(id) OVER (PARTITION BY session_pk ORDER BY seq) AS previous FROM messages
    ) AS stored WHERE parent_id = previous"""
"""The messages whose parent is the message of their session stored just before them."""


@migration
def m007_branch_stretches(db):
    """Branches laid out in stretches (``schema.MESSAGES``), so reading one is a few range scans."""
    db.add(MESSAGES)
    db.execute(f"UPDATE messages SET continues = 1 WHERE seq IN ({CONTINUING_MESSAGES})")


@migration
def m008_experiments(db):
    db.create(EXPERIMENTS, EXPERIMENT_ARMS, EXPERIMENT_CASES, EXPERIMENT_PROBES, EXPERIMENT_RUNS)


@migration
def m009_message_pins(db):
    db.create(MESSAGE_PINS)


@migration
def m010_quarantine(db):
    """Where ``memorylab check --repair`` sets aside the rows it cannot read."""
    db.create(QUARANTINE)


@migration
def m011_experiment_labels(db):
    """People's labels on probe verdicts, and other judges' verdicts on a trial's stored answers."""
    db.create(EXPERIMENT_LABELS, EXPERIMENT_GRADES)


SCHEMA_VERSION = len(MIGRATIONS)


def apply_migrations(db, migrations):
    """Run ``migrations`` in order on ``db``, inside whatever transaction the caller holds."""
    for each in migrations:
        db.migration = each.__name__
        each(db)


def migrate(db):
    """Apply the migrations ``db`` has not seen yet; returns how many ran. An up-to-date database takes
    no lock, so opening it never waits behind another process's write."""
    if db.version() == SCHEMA_VERSION:
        return 0
    with db.exclusive():
        version = db.version()
        if version > SCHEMA_VERSION:
            raise MemoryLabError(
                f"this database has schema version {version}, newer than this memorylab "
                f"({SCHEMA_VERSION}); upgrade memorylab to open it"
            )
        apply_migrations(db, MIGRATIONS[version:])
        db.record(SCHEMA_VERSION)
    return SCHEMA_VERSION - version
