"""Session: one conversation stored as a tree of messages.

Every message has a parent; appending under a message that already has children starts a branch
(a regeneration or an edit). Reading walks one root-to-leaf path with compaction overlays applied.
All storage goes through ``Store``; this module holds the tree semantics.
"""
from __future__ import annotations

import logging
import uuid
import warnings
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext

from ..collector import collector_paused
from ..context import ContextBlocks, Tool, build_tools
from ..context.blocks import FrozenPromptStore
from ..errors import InvalidInputError, InvalidMessageError, NotFoundError
from ..messages import is_tool_part, normalize_message, normalized_and_measured, utc_now_iso
from ..shapes import Message, Messages, Overlay, SearchHits
from ..store import LATEST_LEAF, capabilities
from ..store.protocols import SessionStorage
from ..tokens import estimate_message_tokens
from ..validation import check_identifier, check_integer
from .compaction import CompactionContext, CompactionPlan, PlanSettings, plan_compaction
from .overlays import apply_overlays, is_summary_message, visible_overlays
from .paged import iter_history, plan_stored
from .pins import check_pin_note
from .removed_summaries import removed_summaries, with_removed, without_removed
from .truncation import ROW_SIZE_LIMIT_BYTES, enforce_row_size_limit

COMPACTION_STATUS_KEY = "memorylab.compaction"
# After an automatic compaction found nothing to do, wait until the history has grown this much
# (as a fraction of its size then) before trying again, instead of asking the model every turn.
AUTO_COMPACT_RETRY_GROWTH = 0.25

logger = logging.getLogger(__name__)


class Session:
    """A handle on one session of one agent of one tenant; cheap to create, holds no messages."""

    def __init__(self, store, session_id, *, tenant_id="default", agent_id="default"):
        self.store = store
        self.session_id = check_identifier(session_id, "session id")
        self.tenant_id = check_identifier(tenant_id, "tenant id")
        self.agent_id = check_identifier(agent_id, "agent id")
        self._pk: int | None = None
        self._storage: SessionStorage | None = None
        self.context = ContextBlocks(self)
        self.row_size_limit = ROW_SIZE_LIMIT_BYTES
        self._compact_function: Callable[[CompactionContext], dict | None] | None = None
        self._compact_threshold: int | None = None
        self._compact_token_counter: Callable[[CompactionContext], int | float] | None = None
        self._compaction_error_handler: Callable[[Exception], object] | None = None
        self._auto_compact_skip_below: int | None = None

    @classmethod
    def create(cls, store, session_id=None, *, tenant_id="default", agent_id="default", metadata=None) -> Session:
        """Open the session, creating it when it does not exist (``session_id=None`` makes a new id)."""
        session_id = f"session-{uuid.uuid4().hex[:12]}" if session_id is None else session_id
        session = cls(store, session_id, tenant_id=tenant_id, agent_id=agent_id)
        session._pk = store.sessions.ensure(session.tenant_id, session.agent_id, session.session_id, metadata)
        return session

    @classmethod
    def open(cls, store, session_id, *, tenant_id="default", agent_id="default") -> Session:
        """Open an existing session; NotFoundError when there is none with that id."""
        session = cls(store, session_id, tenant_id=tenant_id, agent_id=agent_id)
        session._pk = store.sessions.find(session.tenant_id, session.agent_id, session.session_id)
        if session._pk is None:
            raise NotFoundError(
                f"no session {session_id!r} for agent {agent_id!r} (tenant {tenant_id!r})"
            )
        return session

    @classmethod
    def over(cls, storage: SessionStorage) -> Session:
        """A Session on a ``SessionStorage`` of one's own (``InMemorySessionStorage``, say), named by its
        ``info()``. No Store stands behind it: it has no ``pk``, and its reads take no snapshot."""
        info = storage.info()
        session = cls(None, info["session_id"], tenant_id=info["tenant_id"], agent_id=info["agent_id"])
        session._storage = storage
        return session

    def __repr__(self):
        return f"<Session {self.session_id!r} agent={self.agent_id!r} tenant={self.tenant_id!r}>"

    def _repr_html_(self):
        """Jupyter's view of the session: counts, tokens and context blocks, all escaped."""
        from ..display.notebook import session_html

        return session_html(self)

    @property
    def pk(self) -> int:
        """The store's key for this session (created on first use)."""
        if self.store is None:
            raise InvalidInputError(f"session {self.session_id!r} lives in a {type(self._storage).__name__}, not "
                                    "a Store: it has no store key")
        if self._pk is None:
            self._pk = self.store.sessions.ensure(self.tenant_id, self.agent_id, self.session_id)
        return self._pk

    @property
    def storage(self) -> SessionStorage:
        """This session's ``SessionStorage``: every read and write of its rows goes through it."""
        if self._storage is None:
            self._storage = self.store.sessions.storage(self.pk)
        return self._storage

    def snapshot(self) -> AbstractContextManager:
        """Reads inside ``with session.snapshot():`` see one state of the store (a session over a
        storage of its own reads it as it is)."""
        return self.store.snapshot() if self.store is not None else nullcontext()

    @property
    def info(self) -> dict:
        """Session id, namespace, timestamps and metadata as a plain dict."""
        return self.storage.info()

    def set_metadata(self, metadata) -> None:
        self.storage.set_metadata(dict(metadata))

    # -- builder -----------------------------------------------------------------------------

    def with_context(self, label, *, description=None, max_tokens=None, provider=None) -> Session:
        """Add (or reconfigure) a context block; without a provider it is writable text stored in the database."""
        self.context.configure(label, description=description, max_tokens=max_tokens, provider=provider)
        return self

    def with_frozen_prompt_store(self, provider=None) -> Session:
        """Persist the frozen system prompt (in this session's row unless ``provider`` has get/set), so a
        new process sends the identical string. Not the model provider's prompt cache (``prompt_cache_report``)."""
        self.context.frozen_prompt_store = provider or FrozenPromptStore(self)
        return self

    with_cached_prompt = with_frozen_prompt_store
    """``with_frozen_prompt_store`` under its first name, kept for code written against it."""

    def with_row_size_limit(self, max_bytes) -> Session:
        """Shrink messages over ``max_bytes`` (compact JSON, UTF-8) before they are stored."""
        self.row_size_limit = check_integer(max_bytes, "row size limit in bytes", minimum=1024)
        return self

    def on_compaction(self, compact_function) -> Session:
        """Register ``fn(history) -> {"summary", "from_id", "to_id"} | None`` (see ``create_compact_function``)."""
        if not callable(compact_function):
            raise InvalidInputError("on_compaction needs a callable taking the history")
        self._compact_function = compact_function
        return self

    def compact_after(self, threshold, *, token_counter=None) -> Session:
        """Compact after an append when history plus system prompt is estimated strictly over ``threshold``."""
        self._compact_threshold = check_integer(threshold, "compact_after threshold", minimum=1)
        self._compact_token_counter = token_counter
        return self

    def on_compaction_error(self, handler) -> Session:
        """Register ``handler(error)``, called when a compaction fails (the append itself never fails)."""
        self._compaction_error_handler = handler
        return self

    # -- context blocks and the system prompt --------------------------------------------------

    def get_context_block(self, label) -> dict:
        """``{"label", "description", "content", "tokens", "max_tokens", "writable", "is_searchable", "is_skill"}``"""
        return self.context.block(label)

    def get_context_blocks(self) -> list[dict]:
        return self.context.blocks()

    def replace_context_block(self, label, content, expected=None) -> dict:
        """Overwrite a writable block; over ``max_tokens`` or readonly is refused and nothing changes.
        ``expected``: the block's ``version`` as read; a block changed since is a ``StaleWriteError``."""
        return self.context.replace(label, content, expected)

    def append_context_block(self, label, content) -> dict:
        """Add ``content`` as a new line at the end of a writable block, within its budget."""
        return self.context.append(label, content)

    def add_context(self, label, *, description=None, max_tokens=None, provider=None) -> dict:
        """Add a block at run time (an existing label is a ConflictError). Returns the block."""
        self.context.configure(label, description=description, max_tokens=max_tokens, provider=provider,
                               replace=False)
        return self.context.block(label)

    def remove_context(self, label) -> None:
        """Stop injecting a block; stored content stays and returns if the label is added again."""
        self.context.remove(label)

    def search_context(self, label, query) -> str:
        """What the ``search_context`` tool would return for ``query`` on a searchable block."""
        return self.context.search(label, query)

    def set_context_entry(self, label, key, content) -> dict:
        """Index one keyed entry in a searchable block whose provider has ``set(key, content)``."""
        return self.context.set_entry(label, key, content)

    def get_context_entries(self, label) -> list[dict]:
        """Every entry of a searchable block, when its provider can list them (else ``[]``)."""
        entries = getattr(self.context.config(label).provider, "entries", None)
        return entries() if callable(entries) else []

    def get_skill_catalog(self, label) -> list[dict]:
        """``[{"key", "description", "active"}]`` of a skills block whose provider lists its keys."""
        provider = self.context.config(label).provider
        active = set(self.get_context_block(label).get("active_skills", ()))
        list_keys = getattr(provider, "keys", None)
        keys = list_keys() if callable(list_keys) else []
        describe = getattr(provider, "describe", lambda key: "")
        return [{"key": k, "description": describe(k), "active": k in active} for k in keys]

    def activate_skill(self, label, key) -> str:
        """Load a skill's body (what ``activate_skill`` returns to the model) and mark it active."""
        return self.context.activate_skill(label, key)

    def deactivate_skill(self, label, key) -> None:
        self.context.deactivate_skill(label, key)

    def render_system_prompt(self) -> str:
        """The system prompt rendered from the blocks as they are now (not the frozen one)."""
        return self.context.render()

    def freeze_system_prompt(self) -> str:
        """The system prompt, rendered on the first call and identical on every later call.

        Block writes are stored at once but do not change it, so a provider's prefix cache stays warm
        through a multi-step tool turn. ``refresh_system_prompt`` re-renders between turns.
        """
        return self.context.freeze()

    def refresh_system_prompt(self) -> str:
        return self.context.refresh()

    def tools(self) -> dict[str, Tool]:
        """``{name: Tool}`` for the blocks configured now; each Tool has ``execute(args) -> str``."""
        return build_tools(self.context)

    def openai_tools(self) -> list[dict]:
        """The tools as the ``tools=`` list of litellm / OpenAI chat completions."""
        return [tool.openai_schema() for tool in self.tools().values()]

    # -- writing -----------------------------------------------------------------------------

    def append_message(self, message, parent_id=LATEST_LEAF) -> Message:
        """Store a message and return the stored dict.

        ``parent_id`` omitted: the message continues the latest leaf. ``None``: it starts a new
        root. An id: it becomes a child of that message (a branch if it already has children).
        A repeated message id is a no-op that returns the stored original. OpenAI chat dicts are
        converted to the parts shape.
        """
        size_bound: int | None
        message, size_bound = normalized_and_measured(message)
        if self._name_tool_results(message, parent_id):
            size_bound = None
        message = enforce_row_size_limit(message, self.row_size_limit, size_bound=size_bound)
        message["tokens"] = estimate_message_tokens([message])
        stored = self.storage.append(message, parent_id)
        if self._compact_threshold is not None:
            self._maybe_auto_compact(stored["id"], self._compact_threshold)
        return stored

    def _name_tool_results(self, message, parent_id) -> bool:
        """OpenAI tool results carry no tool name: take it from the call in the parent message.
        True when a part was renamed."""
        unnamed = [p for p in message["parts"] if is_tool_part(p) and not p.get("toolName")]
        if not unnamed:
            return False
        parent = self.get_latest_leaf() if parent_id is LATEST_LEAF else (
            self.get_message(parent_id) if parent_id is not None else None)
        names = {
            p["toolCallId"]: p.get("toolName") for p in (parent.get("parts", ()) if parent else ()) if is_tool_part(p)
        }
        renamed = False
        for part in unnamed:
            name = names.get(part["toolCallId"])
            if name:
                part.update(type=f"tool-{name}", toolName=name)
                renamed = True
        return renamed

    def update_message(self, message) -> Message:
        """Replace the content (role, parts, metadata) of a stored message, keeping its place in the tree.

        A different ``parent_id`` is refused: a message never moves, so no update can make the tree loop.
        """
        original = self.get_message(message.get("id")) if isinstance(message, dict) else None
        if original is None:
            named = message.get("id") if isinstance(message, dict) else message
            raise NotFoundError(f"cannot update: no message {named!r}")
        if message.get("parent_id", original["parent_id"]) != original["parent_id"]:
            raise InvalidMessageError(
                f"update_message cannot move {original['id']!r} from under {original['parent_id']!r} to under "
                f"{message['parent_id']!r}; append a new message there instead (a branch)"
            )
        message = normalize_message({"created_at": original["created_at"], **message})
        message = enforce_row_size_limit(message, self.row_size_limit)
        message["tokens"] = estimate_message_tokens([message])
        return self.storage.update(message)

    def delete_messages(self, message_ids) -> int:
        """Remove messages; their children move up to the removed message's parent. Returns the count."""
        if isinstance(message_ids, str):
            message_ids = [message_ids]
        return self.storage.delete_messages(list(message_ids))

    def clear_messages(self) -> int:
        """Remove every message, overlay and pin of this session and deactivate its skills (the skills a
        conversation loaded belong to it); its blocks and metadata stay."""
        return self.storage.clear()

    # -- reading -----------------------------------------------------------------------------

    def get_message(self, message_id) -> Message | None:
        return self.storage.get(message_id)

    def get_latest_leaf(self) -> Message | None:
        """The newest message without children, or None for an empty session."""
        leaf_id = self.get_latest_leaf_id()
        return self.get_message(leaf_id) if leaf_id is not None else None

    def get_latest_leaf_id(self) -> str | None:
        """The id of ``get_latest_leaf()``, read without loading the message (where appends go)."""
        return self.storage.latest_leaf_id()

    def get_child_counts(self) -> dict[str, int]:
        """{message id: children} for every message with children (one query, for tables and trees)."""
        return capabilities.child_counts(self.storage)

    def get_leaf_for(self, message_id) -> str | None:
        """The newest leaf whose path goes through ``message_id``: the branch to open to show it."""
        return capabilities.newest_leaf_under(self.storage, message_id)

    def get_leaves(self) -> Messages:
        """Every leaf (one per branch), newest first."""
        return capabilities.leaves(self.storage)

    def get_branches(self, message_id) -> Messages:
        """The children of a message, oldest first: more than one means the conversation forked here."""
        return self.storage.children(message_id)

    def get_history(self, leaf_id=None, *, apply_compactions=True) -> Messages:
        """Root-to-leaf path of ``leaf_id`` (default: the latest leaf) with overlays applied, each
        pinned message in an overlay's range read whole right after its summary.

        An unknown leaf gives ``[]``. ``apply_compactions=False`` returns the stored originals.
        Either way the list carries the session's pins as ``pinned_ids``, which ``plan_compaction``
        respects.
        """
        if leaf_id is None:
            leaf_id = self.storage.latest_leaf_id()
            if leaf_id is None:
                return Messages()
        with self.snapshot(), collector_paused():  # a long branch is thousands of new objects
            path = self.storage.path(leaf_id)
            if not isinstance(path, Messages):  # a storage of one's own may answer a plain list
                path = Messages(path)
            path.pinned_ids = capabilities.pinned_ids(self.storage) if path else frozenset()
            if not apply_compactions or not path:
                return path
            return apply_overlays(path, self.storage.overlays())

    def iter_history(self, leaf_id=None, *, page_size=1000) -> Iterator[Message]:
        """What ``get_history(leaf_id)`` returns, message by message, read ``page_size`` messages at a
        time: a 200,000-message branch is read holding one page, not the list. Each page is read on
        its own; a loop inside ``with session.snapshot():`` sees one state of the store."""
        check_integer(page_size, "page_size", minimum=1)
        if leaf_id is None:
            leaf_id = self.storage.latest_leaf_id()
            if leaf_id is None:
                return iter(())
        return iter_history(self.storage, self.snapshot, leaf_id, page_size)

    def get_path_length(self, leaf_id=None) -> int:
        """Number of stored messages from the root to ``leaf_id`` (overlays not applied)."""
        leaf_id = leaf_id or self.storage.latest_leaf_id()
        return capabilities.path_stats(self.storage, leaf_id)[0] if leaf_id else 0

    def get_history_tokens(self, leaf_id=None) -> int:
        """Estimated tokens of what ``get_history`` returns: a sum of stored per-message estimates."""
        return sum(m["tokens"] for m in self.get_history(leaf_id))

    def get_all_messages(self) -> Messages:
        """Every message of every branch, parents before children (for trees and exports)."""
        return self.storage.all()

    def search(self, query, limit=20) -> SearchHits:
        """Full-text search over this session's text parts, best match first; never raises on syntax."""
        return self.storage.search(query, tenant_id=self.tenant_id, limit=limit)

    # -- overlays ----------------------------------------------------------------------------

    def add_compaction(self, summary, from_id, to_id, *, metadata=None) -> Overlay:
        """Record a summary covering ``from_id .. to_id`` (inclusive) on one branch. Returns the overlay."""
        return self.storage.add_overlay(summary, from_id, to_id, metadata)

    def get_compactions(self) -> list[Overlay]:
        """Every overlay of the session, oldest first, including superseded ones."""
        return self.storage.overlays()

    def remove_compaction(self, overlay_id) -> None:
        """Undo an overlay; the messages it covered show again on read. The overlay is kept among the
        session's ``removed_compactions`` (the newest 20), so ``restore_compaction`` can bring it back."""
        overlay = next((o for o in self.storage.overlays() if o["id"] == overlay_id), None)
        self.storage.delete_overlay(overlay_id)
        self.set_metadata(with_removed(self.info["metadata"], overlay, utc_now_iso()))

    def removed_compactions(self) -> list[dict]:
        """The overlays ``remove_compaction`` removed, newest first, each with its ``removed_at``."""
        return removed_summaries(self.info["metadata"])

    def restore_compaction(self, overlay_id) -> Overlay:
        """Add the newest removed overlay of that id back over its span (under a new id; its metadata
        names the old one in ``restored_from``) and drop it from ``removed_compactions``."""
        record = next((removed for removed in self.removed_compactions() if removed.get("id") == overlay_id), None)
        if record is None:
            raise NotFoundError(f"no removed summary {overlay_id!r} in session {self.session_id!r}; "
                                "removed_compactions() lists the ones that can be restored")
        overlay = self.add_compaction(record["summary"], record["from_id"], record["to_id"],
                                      metadata={**(record.get("metadata") or {}), "restored_from": overlay_id})
        self.set_metadata(without_removed(self.info["metadata"], overlay_id))
        return overlay

    # -- pins ------------------------------------------------------------------------------------

    def pin(self, message_id, *, note="") -> dict:
        """Keep a message out of every compaction's summary: ``{"message_id", "note", "pinned_at"}``.

        A pinned message inside a compaction's range is read back whole right after the summary, and
        the planner leaves it out of the transcript it summarizes; its tool call or result stays with
        it. An overlay written before the pin shows it too, from the next read on.
        """
        if not isinstance(message_id, str) or is_summary_message({"id": message_id}):
            raise InvalidInputError(
                f"cannot pin {message_id!r}: pin a stored message, not a summary (its originals can be pinned)")
        return self.storage.pin(message_id, check_pin_note(note))

    def unpin(self, message_id) -> bool:
        """Let compactions summarize the message again; False when it was not pinned."""
        return self.storage.unpin(message_id)

    def get_pins(self) -> list[dict]:
        """Every pin of the session, oldest first: ``[{"message_id", "note", "pinned_at"}]``."""
        return self.storage.pins()

    # -- compaction ----------------------------------------------------------------------------

    def plan_compaction(self, leaf_id=None, *, protect_head=3, tail_token_budget=20000, min_tail_messages=2,
                        token_counter=None, prompt_template=None, pinned_ids=None,
                        page_size=1000) -> CompactionPlan | None:
        """``plan_compaction(self.get_history(leaf_id), ...)`` made from the store without holding the
        history: two reads of ``iter_history``, the first keeping each message's id, role and stored
        tokens. Head, kept and tail are lists; ``middle`` is a read-only sequence that reads the store
        when iterated. A ``token_counter`` is asked about whole messages, so with one the history is
        read whole, as ``plan_compaction`` would."""
        if token_counter is not None:
            return plan_compaction(self.get_history(leaf_id), protect_head=protect_head,
                                   tail_token_budget=tail_token_budget, min_tail_messages=min_tail_messages,
                                   token_counter=token_counter, prompt_template=prompt_template, pinned_ids=pinned_ids)
        settings = PlanSettings(protect_head, tail_token_budget, min_tail_messages, prompt_template)
        leaf_id = leaf_id or self.storage.latest_leaf_id()
        pinned = frozenset(capabilities.pinned_ids(self.storage) if pinned_ids is None else pinned_ids)
        return plan_stored(lambda: self.iter_history(leaf_id, page_size=page_size), pinned, settings)

    def compaction_context(self, leaf_id=None, *, token_counter=None, history=None) -> CompactionContext:
        """The ``CompactionContext`` of the branch ending at ``leaf_id`` (default: the latest leaf):
        what a request would send, as token counters and compact functions receive it.
        ``history`` is that branch's overlaid history when the caller has already read it."""
        leaf_id = leaf_id or self.storage.latest_leaf_id()
        if history is None:
            history = self.get_history(leaf_id) if leaf_id else []
        return CompactionContext(
            history, system_prompt=self.context.current_prompt(),
            blocks=self.get_context_blocks, leaf_id=leaf_id,
            token_counter=token_counter or self._compact_token_counter,
        )

    def estimate_context_tokens(self, leaf_id=None, *, token_counter=None, history=None) -> int | float:
        """What a request would hold, in tokens: ``token_counter(context)`` when one is given (here or
        to ``compact_after``), else the stored estimates of the overlaid history plus the system prompt.
        ``history`` is that branch's overlaid history when the caller has already read it."""
        return self.compaction_context(leaf_id, token_counter=token_counter, history=history).tokens()

    def compact(self, leaf_id=None) -> Overlay | None:
        """Run the registered compaction on the branch ending at ``leaf_id`` (default: latest leaf).

        The new overlay starts no later than the oldest overlay already visible on the branch, so
        each branch keeps one growing summary. Returns the new overlay, or None when there was
        nothing to compact. The frozen system prompt is re-rendered afterwards.
        """
        if self._compact_function is None:
            raise InvalidInputError("no compaction function: register one with on_compaction(...)")
        leaf_id = leaf_id or self.storage.latest_leaf_id()
        if leaf_id is None or self.get_message(leaf_id) is None:
            raise NotFoundError(f"no message {leaf_id!r} to compact up to")
        return self._compact(self._compact_function, self.compaction_context(leaf_id))

    def _compact(self, compact_function, context):
        """Hand ``context`` to the compact function and store the overlay it asks for."""
        result = compact_function(context)
        if not result or not (result.get("summary") or "").strip():
            self._record_compaction_status("nothing_to_compact", "the compaction function returned no summary")
            return None
        metadata = {key: result[key] for key in ("tokens_before", "tokens_after") if key in result}
        if "plan" in result:
            metadata.update(tokens_before=result["plan"].tokens_before, tokens_after=result["plan"].tokens_after)
        return self._write_overlay(result["summary"], result.get("from_id"), result.get("to_id"), context.leaf_id,
                                   metadata)

    def accept_compaction(self, plan, summary, leaf_id=None, *, metadata=None) -> Overlay:
        """Store a reviewed summary for a ``plan_compaction`` result (the lab's accept button)."""
        if not (summary or "").strip():
            raise InvalidInputError("an empty summary cannot replace messages")
        details = {"tokens_before": plan.tokens_before, "tokens_after": plan.tokens_after, **(metadata or {})}
        return self._write_overlay(summary, plan.from_id, plan.to_id, leaf_id or plan.to_id, details)

    def _write_overlay(self, summary, from_id, to_id, leaf_id, metadata):
        """Add the overlay (extended back to the oldest visible one), re-render the prompt, record it."""
        path = self.storage.path(leaf_id)
        position = {m["id"]: i for i, m in enumerate(path)}
        start, end = position.get(from_id), position.get(to_id)
        if start is None or end is None or start > end:
            raise InvalidMessageError(
                f"compaction range {from_id!r}..{to_id!r} is not on the branch ending at {leaf_id!r}"
            )
        start = min([start, *visible_overlays(path, self.storage.overlays())])
        overlay = self.add_compaction(summary.strip(), path[start]["id"], to_id, metadata=metadata)
        self.refresh_system_prompt()
        self._record_compaction_status("compacted", f"overlay {overlay['id']} covers {path[start]['id']}..{to_id}",
                                       overlay_id=overlay["id"])
        return overlay

    def _maybe_auto_compact(self, leaf_id, threshold):
        try:
            context = self.compaction_context(leaf_id)
            estimate = context.tokens()
            if estimate <= threshold:
                return
            if self._auto_compact_skip_below is not None and estimate < self._auto_compact_skip_below:
                return
            if self._compact_function is None:
                raise InvalidInputError(
                    f"context is {estimate} tokens, over the compact_after threshold of "
                    f"{threshold}, but no compaction function is registered"
                )
            if self._compact(self._compact_function, context) is None:
                self._auto_compact_skip_below = int(estimate * (1 + AUTO_COMPACT_RETRY_GROWTH))
                warnings.warn(
                    f"session {self.session_id!r}: context is {estimate} tokens, over the threshold of "
                    f"{threshold}, but there is nothing to compact; retrying once it "
                    f"reaches {self._auto_compact_skip_below}",
                    RuntimeWarning, stacklevel=3,
                )
            else:
                self._auto_compact_skip_below = None
        except Exception as error:  # the message is stored; a failed compaction must not undo the append
            self._record_compaction_status("error", f"{type(error).__name__}: {error}")
            self._report_compaction_error(error)

    def _report_compaction_error(self, error):
        """Hand the failure to the registered handler; a handler that fails itself is logged, never raised."""
        if self._compaction_error_handler is None:
            return
        try:
            self._compaction_error_handler(error)
        except Exception:  # noqa: BLE001 - the append has succeeded whatever the handler does
            logger.exception("session %r: the on_compaction_error handler failed", self.session_id)

    def _record_compaction_status(self, state, detail, **extra):
        """Keep the last compaction outcome in the session metadata, where the lab shows it."""
        metadata = self.info["metadata"]
        metadata[COMPACTION_STATUS_KEY] = {"state": state, "detail": detail, "at": utc_now_iso(), **extra}
        self.set_metadata(metadata)

    @property
    def compaction_status(self) -> dict | None:
        """The last compaction outcome: ``{"state": "compacted"|"nothing_to_compact"|"error", "detail", "at"}``."""
        return self.info["metadata"].get(COMPACTION_STATUS_KEY)

    def stats(self) -> dict:
        """Counts for a quick overview: messages, branches, overlays, latest path length and tokens."""
        leaves = self.get_leaves()
        latest = leaves[0]["id"] if leaves else None
        length, tokens = capabilities.path_stats(self.storage, latest) if latest else (0, 0)
        return {
            "session_id": self.session_id,
            "messages": self.storage.count(),
            "branches": len(leaves),
            "compactions": len(self.get_compactions()),
            "latest_path_length": length,
            "latest_path_tokens": tokens,
            "history_tokens": self.get_history_tokens(latest) if latest else 0,
        }
