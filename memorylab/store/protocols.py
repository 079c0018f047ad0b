"""The storage interfaces, written down: what each repository of a ``Store`` promises.

The SQL repositories in this package implement them for SQLite and PostgreSQL alike. The engine
above (``Session``, ``Memory``, ``KVStore``, ``LongTermMemory``, ``memorylab check`` and
``memorylab copy``) relies on these methods and nothing else, so another storage only has to
answer them; a session's storage only its core ``SessionStorage``, the capabilities beside it
(``TreeQueries``, ``Outlines``, ``PagedBranchReads``) being optional. Messages, overlays and rows are
plain dicts (typed in ``memorylab.shapes``); their keys are listed where they first appear. ``pk`` is
a session's internal key, which only the catalog hands out.
"""
from __future__ import annotations

import builtins
from collections.abc import Iterable, Iterator
from typing import Any, Protocol, runtime_checkable

from ..shapes import Message, Messages, Overlay, SearchHits, SessionRows


class SessionStorage(Protocol):
    """One session's tree of messages, its compaction overlays, pins, status and context rows: the core
    that a ``Session`` needs, and all another storage has to answer (``InMemorySessionStorage`` is one).

    A message is ``{"id", "role", "parts", "created_at", "metadata", "parent_id", "tokens"}``. The
    ``parent`` of ``append`` says where it goes: ``LATEST_LEAF`` (the default) under the session's
    newest message, ``None`` as a new root, or a message id, which must exist in this session.
    What a storage laid out in SQL answers faster (``TreeQueries``, ``Outlines``, ``PagedBranchReads``)
    its callers ask for where it is offered, and derive from these methods where not
    (``memorylab.store.capabilities``).
    """

    blocks: SessionBlockStorage

    def info(self) -> dict:
        """``{"session_id", "tenant_id", "agent_id", "created_at", "updated_at", "metadata"}``;
        ``NotFoundError`` once the session is deleted."""

    def set_metadata(self, metadata: dict) -> None: ...

    def status(self) -> str | None:
        """The memory manager's status; None while the memory is in progress."""

    def set_status(self, status: str | None, updated_at: str, *, expected: object = ...) -> None:
        """``expected``: the status as read (None: in progress); another one stored since is a ``StaleWriteError``."""

    def delete(self) -> None:
        """Remove the session with everything it holds."""

    def append(self, message: dict, parent: Any = ...) -> Message:
        """Store a normalized message and return it with its ``parent_id``. Idempotent: appending an
        id the session already holds changes nothing and returns the stored message."""

    def get(self, message_id: str) -> Message | None:
        """The message, None when there is none; ``DamagedRowError`` when its row cannot be read."""

    def latest_leaf_id(self) -> str | None:
        """The newest message's id (childless: children are written after their parents)."""

    def path(self, leaf_id: str) -> Messages:
        """Root-to-leaf messages, overlays not applied; ``[]`` for an unknown leaf. A damaged row is
        left out with a ``DamagedRowWarning`` (so are the readers of many messages below)."""

    def children(self, message_id: str | None) -> Messages:
        """The messages under ``message_id`` (None: the roots), oldest first."""

    def all(self) -> Messages:
        """Every message, in the order they were stored (parents before children)."""

    def count(self) -> int: ...

    def update(self, message: dict) -> Message:
        """Replace a message's content; its place in the tree stays. ``NotFoundError`` if absent."""

    def delete_messages(self, message_ids: Iterable[str]) -> int:
        """Remove messages, re-attaching their children to their parents and dropping the overlays
        that start or end at them and their pins; unknown ids are skipped. Returns how many went."""

    def clear(self) -> int:
        """Remove every message, overlay, pin and skill activation; returns the number of messages."""

    def search(self, query: str, *, tenant_id: str, limit: int = 20, roles: list[str] | None = None) -> SearchHits:
        """Ranked hits in this session (the shape of ``Store.search``); any query string is safe."""

    def add_overlay(self, summary: str, from_id: str, to_id: str, metadata: dict | None = None) -> Overlay:
        """Store an overlay ``{"id", "from_id", "to_id", "summary", "created_at", "metadata"}`` over
        ``from_id..to_id``, one root-to-leaf range; ids count up per session."""

    def overlays(self) -> list[Overlay]:
        """Every overlay, oldest first (whether each applies depends on the path read)."""

    def delete_overlay(self, overlay_id: int) -> None:
        """``NotFoundError`` when the session has no such overlay."""

    def pin(self, message_id: str, note: str = "") -> dict:
        """Pin a stored message: ``{"message_id", "note", "pinned_at"}``; ``NotFoundError`` for an id the
        session does not hold. Pinning again changes the note only."""

    def unpin(self, message_id: str) -> bool:
        """Remove a pin; False when there was none."""

    def pins(self) -> list[dict]:
        """Every pin, oldest first."""


# -- capabilities: what a storage may answer beyond the core ---------------------------------------
# Each is checked with isinstance (``memorylab.store.capabilities`` does, and falls back to the core).


@runtime_checkable
class TreeQueries(Protocol):
    """Questions about the tree's shape answered without reading every message."""

    def message_ids(self) -> set[str]: ...

    def child_counts(self) -> dict[str, int]:
        """``{message id: number of children}`` of every message that has children."""

    def newest_leaf_under(self, message_id: str) -> str | None:
        """The newest message of the subtree rooted at ``message_id``; None for an unknown id."""

    def leaves(self) -> Messages:
        """Messages without children, newest first."""

    def pinned_ids(self) -> frozenset:
        """The pinned message ids, read without the notes (every history read asks)."""


@runtime_checkable
class Outlines(Protocol):
    """Reads of many messages that decode only what their reader looks at."""

    def path_stats(self, leaf_id: str) -> tuple[int, int]:
        """(number of messages, sum of stored token estimates) of ``path(leaf_id)``, without loading it."""

    def assistant_turns(self, leaf_id: str) -> list[dict]:
        """``{"id", "role", "metadata"}`` of each assistant message from the root down to ``leaf_id``."""

    def outline(self) -> list[dict]:
        """Every message as drawn: id, parent_id, role, tokens, created_at, empty metadata and parts (its
        text as one part unless it has no text or a tool part); parents first."""

    def has_tool_parts(self) -> bool:
        """Whether any message of the session holds a tool part."""

    def tool_outline(self) -> Iterator[tuple]:
        """(id, parent_id, role, parts) of every message, parents first, read a page at a time (the
        tool-pair lint): a message without a tool part has one text part with no text."""


@runtime_checkable
class PagedBranchReads(Protocol):
    """A long branch or session read a page at a time by where its rows lie (``memorylab.history.paged``,
    exports): positions are seqs, which grow in the order messages were stored."""

    def branch_ranges(self, leaf_id: str) -> list[tuple[int, int]] | None:
        """Seq ranges, oldest first, whose messages are exactly the branch ending at ``leaf_id`` (``[]`` for
        an unknown leaf); None when the stored layout does not give them (then ``branch_seqs``)."""

    def branch_seqs(self, leaf_id: str) -> list[int]:
        """The seqs of the branch ending at ``leaf_id``, root first, found through the parent links."""

    def seq_span(self) -> tuple[int, int] | None:
        """The seqs of the session's first and last messages; None when it has none."""

    def messages_between(self, low: int, high: int, *, page_size: int = 1000) -> Iterator[Messages]:
        """The messages with seq in ``low .. high``, oldest first, in pages of at most ``page_size``."""

    def messages_at(self, seqs: list[int]) -> Messages:
        """The messages at ``seqs``, in that order."""

    def located(self, message_ids: Iterable[str]) -> dict[str, tuple[int, Message]]:
        """``{id: (seq, message)}`` of the readable messages among ``message_ids`` (a few)."""


class CatalogedSessionStorage(SessionStorage, TreeQueries, Outlines, PagedBranchReads, Protocol):
    """What a store's catalog hands out: the core and every capability, and the session's key ``pk``."""

    pk: int


class SessionCatalog(Protocol):
    """Every session, by tenant, agent and session id."""

    def find(self, tenant_id: str, agent_id: str, session_id: str) -> int | None: ...

    def hold_name(self, tenant_id: str, agent_id: str, session_id: str) -> None:
        """Until the caller's transaction ends, writers holding this name too wait, session or not yet."""

    def ensure(self, tenant_id: str, agent_id: str, session_id: str, metadata: dict | None = None) -> int:
        """The session's key, creating it (and registering its agent) when it does not exist."""

    def lay_out_branches(self) -> None:
        """Recompute every message's ``continues`` flag from the parent links (flags gone stale)."""

    def insert_messages(self, rows: list[tuple[int, dict]]) -> None:
        """Write ``(session key, message)`` pairs whose messages carry their ``parent_id`` (parents are
        not checked); each session's last becomes its newest. For importers, in their transaction."""

    def settle_search(self, written: int) -> None:
        """After an import of ``written`` messages: merge what the search index buffered for them."""

    def storage(self, pk: int) -> CatalogedSessionStorage: ...

    def list(self, *, tenant_id: str | None = None, agent_id: str | None = None, session_id: str | None = None,
             search: str | None = None, limit: int | None = None, offset: int = 0) -> SessionRows:
        """Sessions, most recently updated first, with ``message_count``, ``branch_count`` and ``tokens``;
        ``search`` matches ids and titles (any case), ``limit``/``offset`` page in the database."""

    def count(self, *, tenant_id: str | None = None, agent_id: str | None = None, search: str | None = None) -> int:
        """How many sessions ``list`` pages through with the same filters."""

    def write(self, tenant_id: str, agent_id: str, session_id: str, *, created_at: str, updated_at: str,
              metadata: dict, frozen_prompt: str | None, messages: builtins.list[dict],
              compactions: builtins.list[dict], context_blocks: builtins.list[dict], pins: Iterable[dict] = (),
              replace: bool = False) -> int:
        """Write a whole, validated session in one transaction; ``ConflictError`` when it exists
        unless ``replace``."""


class SessionBlockStorage(Protocol):
    """One session's stored block contents, frozen system prompt and active skills."""

    def all(self) -> list[dict]:
        """``[{"label", "content", "updated_at"}]`` by label."""

    def content(self, label: str) -> str | None: ...

    def set_content(self, label: str, content: str, *, expected: str | None = None) -> None:
        """``expected``: the version the writer read; a block stored since is a ``StaleWriteError``."""

    def frozen_prompt(self) -> str | None:
        """The system prompt as frozen (``Session.with_frozen_prompt_store``), or None."""

    def set_frozen_prompt(self, prompt: str | None) -> None: ...

    def active_skills(self, label: str) -> list[str]:
        """Keys of the active skills of a skills block, in the order they were activated."""

    def set_skill_active(self, label: str, key: str, active: bool) -> None: ...


class EntryStorage(Protocol):
    """Keyed text entries that searchable blocks index, per tenant and namespace."""

    def put(self, tenant_id: str, namespace: str, key: str, content: str) -> None: ...

    def delete(self, tenant_id: str, namespace: str, key: str) -> bool: ...

    def count(self, tenant_id: str, namespace: str) -> int: ...

    def list(self, tenant_id: str, namespace: str) -> list[dict]:
        """``[{"key", "content", "updated_at"}]`` by key."""

    def search(self, tenant_id: str, namespace: str, query: str, limit: int = 5) -> builtins.list[dict]:
        """Ranked entries; any query string is safe."""


class KVStorage(Protocol):
    """JSON texts by tenant, namespace and key; ``now`` and ``expires_at`` are ISO timestamps from
    the caller's clock, and an expired entry is never returned."""

    def set(self, tenant_id: str, namespace: str, key: str, value: str, *, expires_at: str | None,
            now: str, expected: object = None) -> None:
        """``expected``: the entry's version as read (``MISSING``: it must not exist); else a ``StaleWriteError``."""

    def get(self, tenant_id: str, namespace: str, key: str, *, now: str, versioned: bool = True) -> dict | None:
        """``{"key", "value", "expires_at", "created_at", "updated_at"}`` of a live entry, its value decoded,
        and its ``version`` when ``versioned``."""

    def entries(self, tenant_id: str, namespace: str, pattern: str, *, now: str, limit: int = -1,
                offset: int = 0) -> list[dict]:
        """Live entries whose key matches the ``*``/``?`` glob, by key (``limit=-1``: all), values decoded."""

    def count(self, tenant_id: str, namespace: str, pattern: str, *, now: str) -> int:
        """How many live entries ``entries`` pages through."""

    def namespaces(self, tenant_id: str, *, now: str, limit: int = -1, offset: int = 0) -> list[dict]:
        """``[{"namespace", "entries"}]`` holding live entries, by name (``limit=-1``: all)."""

    def delete(self, tenant_id: str, namespace: str, key: str, *, now: str) -> bool: ...

    def clear(self, tenant_id: str, namespace: str, *, now: str) -> int: ...


class AgentStorage(Protocol):
    """A tenant's agents, and the memory manager's view of an agent's sessions."""

    def register(self, tenant_id: str, agent_id: str, *, created_at: str, name: str | None = None,
                 name_key: str | None = None, slug: str | None = None) -> dict:
        """Create the agent or update what is given; ``ConflictError`` for a slug another agent has."""

    def find(self, tenant_id: str, reference: str, name_key: str) -> list[dict]:
        """Agents whose id, slug or folded name match, best first, each with ``matched_by``."""

    def list(self, tenant_id: str, *, busiest_first: bool = False, limit: int | None = None,
             offset: int = 0) -> list[dict]:
        """Agents with ``session_count``, by id or most sessions first, paged (``limit=None``: all)."""

    def count(self, tenant_id: str) -> int: ...

    def tenants(self) -> builtins.list[str]:
        """Every tenant with an agent, sorted."""

    def memories(self, tenant_id: str, agent_id: str, *, interaction_before: str | None = None,
                 status: Any = ..., date_from: str | None = None, date_field: str = "updated_at",
                 limit: int = 20, offset: int = 0) -> builtins.list[dict]:
        """An agent's sessions with status, message count, newest summary and newest message."""


class LongTermStorage(Protocol):
    """Long-term memory records of every workspace; ``scope`` is ``GLOBAL_MEMORY`` or
    ``SESSION_MEMORY`` (then confined to ``session_id``)."""

    def insert(self, workspace: str, records: list[dict]) -> list[dict]: ...

    def get(self, workspace: str, record_id: int) -> dict | None: ...

    def list(self, workspace: str, *, scope: str | None = None, session_id: str | None = None) -> list[dict]: ...

    def update(self, workspace: str, record_id: int, record: dict, *, expected: str | None = None) -> dict | None:
        """``expected``: the record's version as read; a record changed since is a ``StaleWriteError``."""

    def delete(self, workspace: str, record_id: int) -> bool: ...

    def find_duplicate(self, workspace: str, scope: str, session_id: str | None, summary: str) -> int | None: ...

    def candidates(self, workspace: str, scope: str, session_id: str | None, *, query: str | None = None,
                   match: str = "words", tags: tuple = (), limit: int = 8) -> builtins.list[dict]:
        """Records of one scope found by ``query`` (``match``: words, prefixes or substring) carrying every tag."""

    def tags(self, workspace: str, session_id: str | None, *, limit: int = 50) -> builtins.list[str]: ...

    def locate_turn(self, session_id: str, user_text: str, assistant_text: str) -> dict | None:
        """The stored ids of a user message and the answer after it, for provenance."""


class ExperimentStorage(Protocol):
    """Experiment definitions (arms, cases, probes) per tenant and name, and their runs by trial."""

    def save(self, tenant_id: str, definition: dict, *, now: str, expected: object = None) -> int:
        """``expected``: the experiment's version as read (``MISSING``: new); else a ``StaleWriteError``."""

    def definition(self, tenant_id: str, name: str) -> dict | None: ...

    def listing(self, tenant_id: str) -> list[dict]: ...

    def delete(self, tenant_id: str, name: str) -> bool: ...

    def next_trial(self, experiment_pk: int) -> int: ...

    def trials(self, experiment_pk: int) -> list[dict]: ...

    def add_run(self, experiment_pk: int, run: dict) -> int: ...

    def open_trial(self, experiment_pk: int, run: dict) -> tuple[int, int]:
        """The trial's first run, numbered in its own transaction: ``(run key, trial)``."""

    def runs(self, experiment_pk: int, *, trial: int | None = None, with_context: bool = False) -> list[dict]: ...

    def run_context(self, run_pk: int) -> list | None: ...


class IntegrityChecks(Protocol):
    """Questions for ``memorylab check``, each empty on a healthy database; nothing is repaired."""

    def database_size(self) -> dict: ...

    def integrity_errors(self, limit: int = 100) -> list[str]: ...

    def fts_indexes(self) -> list[dict]: ...

    def rows_of_missing_parents(self) -> dict: ...

    def messages_with_missing_parent(self) -> list[dict]: ...

    def messages_off_every_root(self) -> list[dict]: ...

    def damaged_rows(self, batch: int = 5000) -> list[dict]:
        """Every row of every table whose JSON cannot be read or holds a shape the engine never writes."""

    def overlays_off_path(self) -> list[dict]: ...

    def stale_latest_pointers(self) -> list[dict]: ...


class BulkStorage(Protocol):
    """Whole tables row by row, for ``memorylab copy``."""

    def counts(self) -> dict[str, int]: ...

    def rows(self, table: str, batch: int = 1000) -> Iterator[list[tuple]]:
        """Rows in primary-key order, in lists of up to ``batch``."""

    def insert(self, table: str, rows: list[tuple]) -> list[tuple]:
        """Insert rows with their keys; returns them as written."""

    def advance_identity(self, table: str, column: str) -> None:
        """Make generated keys follow the largest inserted one."""
