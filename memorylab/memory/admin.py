"""Cross-agent memory administration inside one tenant, the agents registry, and status tools.

``MemoryAdmin`` lets a curator (a person in the lab, or a curator agent) audit, inject into, clear
and summarize another agent's memories, naming the agent by id, slug or name. Everything is
scoped to the admin's tenant: another tenant's agent or memory is reported exactly as one that does
not exist, never as "forbidden", so an error cannot be used to probe what other tenants hold.
"""
from __future__ import annotations

import re

from ..context import Tool
from ..errors import AmbiguousAgentError, InvalidInputError, NotFoundError
from ..history.session import Session
from ..messages import utc_now_iso
from ..shapes import MemoryRows, Message, SearchHits
from ..validation import check_identifier, check_number, check_page
from .manager import MAX_LIST_LIMIT, Memory, incoming_message, missing_memory

MAX_NAME_LENGTH = 100
MAX_SLUG_LENGTH = 64
_SLUG = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
QUALIFY_THRESHOLD = 7
CLOSE_REASONS = ("not_interested", "wrong_contact", "completed", "other")
ACTIONS = ("list", "get", "search", "append", "summarize")
"""What ``MemoryAdmin.perform`` does by name, as a curator's form or command offers it."""


def register_agent(store, agent_id, *, tenant_id="default", name=None, slug=None) -> dict:
    """Create an agent, or give an existing one a display name and a slug (None keeps the current one).

    Agents are registered on their first session anyway; this adds the names people use. A slug is
    unique in the tenant and may not be another agent's id. Returns ``{"agent_id", "name", "slug", "created_at"}``.
    """
    check_identifier(agent_id, "agent id")
    check_identifier(tenant_id, "tenant id")
    if name is not None:
        name = check_identifier(name, "agent name").strip()
        if len(name) > MAX_NAME_LENGTH:
            raise InvalidInputError(f"an agent name is at most {MAX_NAME_LENGTH} characters; this one has {len(name)}")
    if slug is not None and (not isinstance(slug, str) or len(slug) > MAX_SLUG_LENGTH or not _SLUG.fullmatch(slug)):
        raise InvalidInputError(
            f"a slug is lowercase letters and digits in words joined by '-' (e.g. 'customer-support'), "
            f"at most {MAX_SLUG_LENGTH} characters; got {slug!r}"
        )
    return store.agents.register(tenant_id, agent_id, created_at=utc_now_iso(), name=name,
                                name_key=name.casefold() if name else None, slug=slug)


class MemoryAdmin:
    """Another agent's memories, within ``tenant_id``: ``MemoryAdmin(store, tenant_id="acme")``.

    ``agent`` is an agent's id, its slug, or its name (case-insensitive, when only one agent has it).
    """

    def __init__(self, store, *, tenant_id):
        self.store = store
        self.tenant_id = check_identifier(tenant_id, "tenant id")

    def __repr__(self):
        return f"<MemoryAdmin tenant={self.tenant_id!r}>"

    def agents(self, *, busiest_first=False, limit=None, offset=0) -> list[dict]:
        """The tenant's agents, ``{"agent_id", "name", "slug", "created_at", "session_count"}``, by id
        or with the most sessions first; all of them, or the page ``limit``/``offset`` (paged in SQL)."""
        if limit is not None:
            check_page(limit, offset, MAX_LIST_LIMIT)
        return self.store.agents.list(self.tenant_id, busiest_first=busiest_first, limit=limit, offset=offset)

    def agent_count(self) -> int:
        """How many agents ``agents`` pages through."""
        return self.store.agents.count(self.tenant_id)

    def resolve_agent(self, agent) -> dict:
        """The agent ``agent`` names: an exact id, else a slug, else a unique case-insensitive name."""
        if not isinstance(agent, str) or not agent.strip():
            raise InvalidInputError(f"agent must be an agent's id, slug or name, got {agent!r}")
        matches = self.store.agents.find(self.tenant_id, agent, agent.strip().casefold())
        if not matches:
            raise NotFoundError(f"no agent {agent!r}: pass the id, slug or name of an agent of this tenant")
        if matches[0]["matched_by"] == "name" and len(matches) > 1:
            raise AmbiguousAgentError(
                f"{len(matches)} agents are named {agent!r} ({', '.join(m['agent_id'] for m in matches)}); "
                "use the agent's id or slug instead"
            )
        return matches[0]

    def _memory(self, agent, key=None, summarizer=None):
        agent_id = self.resolve_agent(agent)["agent_id"]
        return Memory(self.store, agent_id=agent_id, tenant_id=self.tenant_id, memory_key=key, summarizer=summarizer)

    def _existing(self, agent, key, summarizer=None):
        memory = self._memory(agent, check_identifier(key, "memory key"), summarizer)
        if not memory.exists():
            raise missing_memory(memory.agent_id, key)
        return memory

    def list(self, agent, **filters) -> MemoryRows:
        """The agent's memories, with the filters of ``Memory.list``."""
        return self._memory(agent).list(**filters)

    def get(self, agent, key) -> dict:
        return self._existing(agent, key).get()

    def set(self, agent, key, messages) -> list[Message]:
        """Replace the memory's messages (and its summary) with ``messages``, creating it if needed.

        Every message is checked before anything changes, and the swap is one transaction.
        Messages are OpenAI chat dicts or stored-shape dicts; ``timestamp`` may stand for ``created_at``.
        """
        memory = self._memory(agent, check_identifier(key, "memory key"))
        if not isinstance(messages, (list, tuple)):
            raise InvalidInputError(f"messages must be a list of message dicts, got {type(messages).__name__}")
        checked = [incoming_message(message) for message in messages]
        with self.store.transaction():
            session = Session.create(self.store, memory.memory_key, tenant_id=self.tenant_id, agent_id=memory.agent_id)
            session.clear_messages()
            return [session.append_message(message) for message in checked]

    def append(self, agent, key, message) -> Message:
        """Add one message (e.g. a system note for the agent) to an existing memory."""
        memory = self._existing(agent, key)
        session = Session.open(self.store, memory.memory_key, tenant_id=self.tenant_id, agent_id=memory.agent_id)
        return session.append_message(incoming_message(message))

    def clear(self, agent, key) -> int:
        """Forget the memory; returns how many messages it held."""
        return self._existing(agent, key).clear()

    def search(self, agent, key, query, *, limit=20) -> SearchHits:
        return self._existing(agent, key).search(query, limit=limit)

    def summarize(self, agent, key, prompt=None, model=None, summarizer=None) -> str:
        """Summarize the memory as ``Memory.summarize`` does (the summary is stored); returns its text."""
        return self._existing(agent, key, summarizer).summarize(prompt, model)

    def perform(self, action, agent, key=None, text=None, *,
                summarizer=None) -> MemoryRows | dict | SearchHits | Message | str:
        """The admin action named ``action`` (one of ``ACTIONS``) on ``agent``'s memory ``key``: ``text``
        is the query of ``search`` and the user message ``append`` adds; ``summarizer`` makes the
        summary of ``summarize``. Returns what that method returns."""
        if action == "list":
            return self.list(agent)
        if action == "get":
            return self.get(agent, key)
        if action == "search":
            return self.search(agent, key, text)
        if action == "append":
            return self.append(agent, key, {"role": "user", "content": text})
        if action == "summarize":
            return self.summarize(agent, key, summarizer=summarizer)
        raise InvalidInputError(f"no admin action {action!r}: use one of {', '.join(ACTIONS)}")


def status_tools(memory, *, qualify_threshold=QUALIFY_THRESHOLD) -> dict[str, Tool]:
    """``{name: Tool}`` that let the model mark the conversation's status on ``memory``.

    ``qualify_lead`` marks ``"qualified"`` at ``qualify_threshold`` or more and ``"nurturing"``
    below; ``close_conversation`` marks ``"closed"``. The call and its reason stay in the history as
    tool messages, so the status needs no other record.
    """

    def qualify(args):
        score = check_number(args["score"], "score", 0, 10)
        status = memory.set_status("qualified" if score >= qualify_threshold else "nurturing")
        return f"Lead scored {score}/10: the conversation is now marked {status!r}."

    def close(args):
        if args["reason"] not in CLOSE_REASONS:
            raise InvalidInputError(f"reason must be one of {', '.join(CLOSE_REASONS)}, got {args['reason']!r}")
        memory.set_status("closed")
        return f"Conversation closed ({args['reason']})."

    tools = (
        Tool("qualify_lead",
             f"Score the lead from 0 to 10 against the qualification criteria. This marks the conversation "
             f"'qualified' (score {qualify_threshold} or more) or 'nurturing'.",
             _object_schema({"score": {"type": "number", "minimum": 0, "maximum": 10,
                                       "description": "How well the lead fits, 0 to 10."}}),
             qualify),
        Tool("close_conversation",
             "Close this conversation when the lead is not interested, the contact is wrong, or the "
             "conversation is finished. This marks it 'closed'.",
             _object_schema({"reason": {"type": "string", "enum": list(CLOSE_REASONS)}}),
             close),
    )
    return {tool.name: tool for tool in tools}


def _object_schema(properties):
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}
