"""Session: one conversation stored as a tree of messages.

Every message has a parent; appending under a message that already has children starts a branch
(a regeneration or an edit). Reading walks one root-to-leaf path with compaction overlays applied.
All storage goes through ``Store``; this module holds the tree semantics.
"""
import uuid

from .context import ContextBlocks, build_tools
from .context.blocks import StoredPromptProvider
from .errors import NotFoundError
from .messages import check_identifier, is_tool_part, normalize_message
from .overlays import apply_overlays
from .store.sqlite import LATEST_LEAF
from .tokens import estimate_message_tokens


class Session:
    """A handle on one session of one agent of one tenant; cheap to create, holds no messages."""

    def __init__(self, store, session_id, *, tenant_id="default", agent_id="default"):
        self.store = store
        self.session_id = check_identifier(session_id, "session id")
        self.tenant_id = check_identifier(tenant_id, "tenant id")
        self.agent_id = check_identifier(agent_id, "agent id")
        self._pk = None
        self.context = ContextBlocks(self)

    @classmethod
    def create(cls, store, session_id=None, *, tenant_id="default", agent_id="default", metadata=None):
        """Open the session, creating it when it does not exist (``session_id=None`` makes a new id)."""
        session_id = f"session-{uuid.uuid4().hex[:12]}" if session_id is None else session_id
        session = cls(store, session_id, tenant_id=tenant_id, agent_id=agent_id)
        session._pk = store.ensure_session(session.tenant_id, session.agent_id, session.session_id, metadata)
        return session

    @classmethod
    def open(cls, store, session_id, *, tenant_id="default", agent_id="default"):
        """Open an existing session; NotFoundError when there is none with that id."""
        session = cls(store, session_id, tenant_id=tenant_id, agent_id=agent_id)
        session._pk = store.find_session(session.tenant_id, session.agent_id, session.session_id)
        if session._pk is None:
            raise NotFoundError(
                f"no session {session_id!r} for agent {agent_id!r} (tenant {tenant_id!r})"
            )
        return session

    def __repr__(self):
        return f"<Session {self.session_id!r} agent={self.agent_id!r} tenant={self.tenant_id!r}>"

    @property
    def pk(self):
        """The store's key for this session (created on first use)."""
        if self._pk is None:
            self._pk = self.store.ensure_session(self.tenant_id, self.agent_id, self.session_id)
        return self._pk

    @property
    def info(self):
        """Session id, namespace, timestamps and metadata as a plain dict."""
        return self.store.session_info(self.pk)

    def set_metadata(self, metadata):
        self.store.set_session_metadata(self.pk, dict(metadata))

    # -- builder -----------------------------------------------------------------------------

    def with_context(self, label, *, description=None, max_tokens=None, provider=None):
        """Add (or reconfigure) a context block; without a provider it is writable text stored in SQLite."""
        self.context.configure(label, description=description, max_tokens=max_tokens, provider=provider)
        return self

    def with_cached_prompt(self, provider=None):
        """Persist the frozen system prompt (in this session's row unless ``provider`` has get/set)."""
        self.context.prompt_cache = provider or StoredPromptProvider(self)
        return self

    # -- context blocks and the system prompt --------------------------------------------------

    def get_context_block(self, label):
        """``{"label", "description", "content", "tokens", "max_tokens", "writable", "is_searchable", "is_skill"}``"""
        return self.context.block(label)

    def get_context_blocks(self):
        return self.context.blocks()

    def replace_context_block(self, label, content):
        """Overwrite a writable block; over ``max_tokens`` or readonly is refused and nothing changes."""
        return self.context.replace(label, content)

    def append_context_block(self, label, content):
        """Add ``content`` as a new line at the end of a writable block, within its budget."""
        return self.context.append(label, content)

    def add_context(self, label, *, description=None, max_tokens=None, provider=None):
        """Add a block at run time (an existing label is a ConflictError). Returns the block."""
        return self.context.configure(label, description=description, max_tokens=max_tokens,
                                      provider=provider, replace=False)

    def remove_context(self, label):
        """Stop injecting a block; SQLite-stored content stays and returns if the label is added again."""
        self.context.remove(label)

    def render_system_prompt(self):
        """The system prompt rendered from the blocks as they are now (not the frozen one)."""
        return self.context.render()

    def freeze_system_prompt(self):
        """The system prompt, rendered on the first call and identical on every later call.

        Block writes are stored at once but do not change it, so a provider's prefix cache stays warm
        through a multi-step tool turn. ``refresh_system_prompt`` re-renders between turns.
        """
        return self.context.freeze()

    def refresh_system_prompt(self):
        return self.context.refresh()

    def tools(self):
        """``{name: Tool}`` for the blocks configured now; each Tool has ``execute(args) -> str``."""
        return build_tools(self.context)

    def openai_tools(self):
        """The tools as the ``tools=`` list of litellm / OpenAI chat completions."""
        return [tool.openai_schema() for tool in self.tools().values()]

    # -- writing -----------------------------------------------------------------------------

    def append_message(self, message, parent_id=LATEST_LEAF):
        """Store a message and return the stored dict.

        ``parent_id`` omitted: the message continues the latest leaf. ``None``: it starts a new
        root. An id: it becomes a child of that message (a branch if it already has children).
        A repeated message id is a no-op that returns the stored original. OpenAI chat dicts are
        converted to the parts shape.
        """
        message = normalize_message(message)
        self._name_tool_results(message, parent_id)
        message["tokens"] = estimate_message_tokens([message])
        return self.store.append_message(self.pk, message, parent_id)

    def _name_tool_results(self, message, parent_id):
        """OpenAI tool results carry no tool name: take it from the call in the parent message."""
        unnamed = [p for p in message["parts"] if is_tool_part(p) and not p.get("toolName")]
        if not unnamed:
            return
        parent = self.get_latest_leaf() if parent_id is LATEST_LEAF else (
            self.get_message(parent_id) if parent_id is not None else None)
        names = {
            p["toolCallId"]: p.get("toolName") for p in (parent or {}).get("parts", ()) if is_tool_part(p)
        }
        for part in unnamed:
            name = names.get(part["toolCallId"])
            if name:
                part.update(type=f"tool-{name}", toolName=name)

    def update_message(self, message):
        """Replace the content (role, parts, metadata) of a stored message, keeping its place in the tree."""
        original = self.get_message(message.get("id")) if isinstance(message, dict) else None
        if original is None:
            raise NotFoundError(f"cannot update: no message {message.get('id') if isinstance(message, dict) else message!r}")
        message = normalize_message({"created_at": original["created_at"], **message})
        message["tokens"] = estimate_message_tokens([message])
        return self.store.update_message(self.pk, message)

    def delete_messages(self, message_ids):
        """Remove messages; their children move up to the removed message's parent. Returns the count."""
        if isinstance(message_ids, str):
            message_ids = [message_ids]
        return self.store.delete_messages(self.pk, list(message_ids))

    def clear_messages(self):
        """Remove every message and overlay of this session (its blocks and metadata stay)."""
        return self.store.clear_messages(self.pk)

    # -- reading -----------------------------------------------------------------------------

    def get_message(self, message_id):
        return self.store.get_message(self.pk, message_id)

    def get_latest_leaf(self):
        """The newest message without children, or None for an empty session."""
        leaf_id = self.store.latest_leaf_id(self.pk)
        return self.get_message(leaf_id) if leaf_id is not None else None

    def get_leaves(self):
        """Every leaf (one per branch), newest first."""
        return self.store.leaves(self.pk)

    def get_branches(self, message_id):
        """The children of a message, oldest first: more than one means the conversation forked here."""
        return self.store.children(self.pk, message_id)

    def get_history(self, leaf_id=None, *, apply_compactions=True):
        """Root-to-leaf path of ``leaf_id`` (default: the latest leaf) with overlays applied.

        An unknown leaf gives ``[]``. ``apply_compactions=False`` returns the stored originals.
        """
        if leaf_id is None:
            leaf_id = self.store.latest_leaf_id(self.pk)
            if leaf_id is None:
                return []
        with self.store.snapshot():
            path = self.store.get_path(self.pk, leaf_id)
            if not apply_compactions or not path:
                return path
            return apply_overlays(path, self.store.compactions(self.pk))

    def get_path_length(self, leaf_id=None):
        """Number of stored messages from the root to ``leaf_id`` (overlays not applied)."""
        leaf_id = leaf_id or self.store.latest_leaf_id(self.pk)
        return self.store.path_stats(self.pk, leaf_id)[0] if leaf_id else 0

    def get_history_tokens(self, leaf_id=None):
        """Estimated tokens of what ``get_history`` returns: a sum of stored per-message estimates."""
        return sum(m["tokens"] for m in self.get_history(leaf_id))

    def get_all_messages(self):
        """Every message of every branch, parents before children (for trees and exports)."""
        return self.store.all_messages(self.pk)

    def search(self, query, limit=20):
        """Full-text search over this session's text parts, best match first; never raises on syntax."""
        return self.store.search(query, limit=limit, session_pk=self.pk)

    # -- overlays ----------------------------------------------------------------------------

    def add_compaction(self, summary, from_id, to_id, *, metadata=None):
        """Record a summary covering ``from_id .. to_id`` (inclusive) on one branch. Returns the overlay."""
        return self.store.add_compaction(self.pk, summary, from_id, to_id, metadata)

    def get_compactions(self):
        """Every overlay of the session, oldest first, including superseded ones."""
        return self.store.compactions(self.pk)

    def remove_compaction(self, overlay_id):
        """Undo an overlay; the messages it covered show again on read."""
        self.store.delete_compaction(self.pk, overlay_id)

    def stats(self):
        """Counts for a quick overview: messages, branches, overlays, latest path length and tokens."""
        leaves = self.get_leaves()
        latest = leaves[0]["id"] if leaves else None
        length, tokens = self.store.path_stats(self.pk, latest) if latest else (0, 0)
        return {
            "session_id": self.session_id,
            "messages": self.store.message_count(self.pk),
            "branches": len(leaves),
            "compactions": len(self.get_compactions()),
            "latest_path_length": length,
            "latest_path_tokens": tokens,
            "history_tokens": self.get_history_tokens(latest) if latest else 0,
        }
