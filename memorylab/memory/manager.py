"""Memory: an agent's conversation memory per person or channel, built on the tree sessions.

A memory key is a session id (``"phone:+5511999999999"``), so whatever Memory writes shows in the
lab's tree, search and compaction views, and a session made in the lab is a memory here.

Stored messages are never dropped. ``max_turns`` and ``max_tokens`` only choose what is sent to a
model (``context``, ``messages_for_model``, ``get_formatted``); ``summarize_after`` only decides when
a summary is made. A **turn** is one user message and everything after it up to the next user
message (replies, tool calls and results, system notes); messages before the first user message
form a turn of their own.

The summary is a compaction overlay from the first message to the last one folded into it (just
before the turns kept verbatim for an automatic summary, the newest message for ``summarize()``).
What is sent is then the summary plus the turns after it. An overlay, not a column, because it is
the engine's one way of standing a summary in for messages without deleting them: the lab draws it
over the range it covers, the chat loop reads it through ``Session.get_history``, and a newer
summary supersedes the older one by starting at the same message.
"""
from __future__ import annotations

import warnings

from ..errors import InvalidInputError, MemoryLabError, NotFoundError, NothingToSummarizeError
from ..history.compaction import (
    MIN_TARGET_SUMMARY_TOKENS,
    build_summary_prompt,
    check_summary_template,
    render_transcript,
)
from ..history.overlays import apply_overlays, is_summary_message
from ..history.session import Session
from ..messages import message_text, normalize_message, to_openai, to_utc_iso, utc_now_iso
from ..shapes import MemoryMessage, MemoryRows, Message, SearchHits
from ..store import ANY_STATUS
from ..store.sessions import UNCHECKED
from ..validation import check_identifier, check_integer, check_page
from .identity import current_identity, normalize_memory_key, parse_memory_key

IN_PROGRESS = "in_progress"
"""The status of a memory nobody has marked: stored as None, and accepted by ``set_status`` and ``list``."""
MAX_STATUS_LENGTH = 64
MAX_LIST_LIMIT = 100
DATE_FIELDS = ("updated_at", "created_at")
SUMMARY_STATUS_KEY = "memorylab.summary"
# A prompt without {transcript} is an instruction: the previous summary and the messages follow it.
INSTRUCTION_SUFFIX = "\n\n{previous_summary}<transcript>\n{transcript}\n</transcript>"


def split_turns(messages) -> list[list[Message]]:
    """The messages grouped into turns: a new turn starts at each user message."""
    turns = []
    for message in messages:
        if not turns or message["role"] == "user":
            turns.append([])
        turns[-1].append(message)
    return turns


def select_context(history, *, max_turns=None, max_tokens=None) -> list[Message]:
    """What is sent from an overlaid history: its leading summary, then the newest whole turns that
    fit ``max_turns`` and ``max_tokens``. The summary and the newest turn are sent even when they
    alone are over ``max_tokens``: without them the model could not answer at all."""
    summary = history[:1] if history and is_summary_message(history[0]) else []
    turns = split_turns(history[len(summary):])
    if max_turns is not None:
        turns = turns[-max_turns:]
    if max_tokens is not None:
        budget, kept = max_tokens - sum(m["tokens"] for m in summary), 0
        for turn in reversed(turns):
            budget -= sum(m["tokens"] for m in turn)
            if kept and budget < 0:
                break
            kept += 1
        turns = turns[len(turns) - kept:]
    return summary + [message for turn in turns for message in turn]


def missing_memory(agent_id, key, advice="") -> NotFoundError:
    """The error for a memory that is not there. Its text depends only on what the caller asked for,
    so a key that exists in another tenant reads exactly like one that never existed."""
    return NotFoundError(f"agent {agent_id!r} has no memory {key!r}{advice}")


def incoming_message(message) -> dict:
    """A caller's message dict (OpenAI chat or stored shape) as the store takes it; ``timestamp``
    (datetime or ISO string, local time without an offset) may stand for ``created_at``."""
    if isinstance(message, dict) and "timestamp" in message:
        timestamp = message["timestamp"]
        message = {name: value for name, value in message.items() if name != "timestamp"}
        message["created_at"] = to_utc_iso(timestamp)
    return normalize_message(message)


def as_appended(message) -> MemoryMessage:
    """A stored message with the fields the document's messages have beside its parts: ``content``
    (its text, as ``list()``'s ``last_message`` reads it) and ``timestamp``."""
    return {**message, "content": message_text(message), "timestamp": message["created_at"]}


def check_status(status) -> str | None:
    """None for a memory in progress (``None`` or ``"in_progress"``), else the status label itself."""
    if status is None or status == IN_PROGRESS:
        return None
    if (not isinstance(status, str) or not status.strip() or status != status.strip()
            or len(status) > MAX_STATUS_LENGTH or not status.isprintable()):
        raise InvalidInputError(
            f"status must be a short label such as 'qualified' or 'closed' (1 to {MAX_STATUS_LENGTH} characters, "
            f"no surrounding spaces), or None for in progress; got {status!r}"
        )
    return status


def summary_template(prompt) -> str | None:
    """The compaction template for a summary prompt: None for the default four-section one, the prompt
    itself when it places ``{transcript}``, else the prompt as an instruction followed by the messages."""
    if prompt is None:
        return None
    if not isinstance(prompt, str):
        raise InvalidInputError(f"a summary prompt must be a string, got {type(prompt).__name__}")
    if "{transcript}" in prompt:
        return prompt
    return prompt.replace("{", "{{").replace("}", "}}") + INSTRUCTION_SUFFIX


class Memory:
    """Conversation memory of one agent: ``Memory(store, agent_id="sdr", max_turns=20)``.

    Every method takes an optional ``key``; without it the memory key is ``memory_key``, else the
    identity bound by ``identify(...)`` around the call. ``summarize_after=N``: once N turns older
    than those kept verbatim (the newest ``max_turns``, or the newest turn) are outside the summary,
    an append folds them into it. ``summarizer(prompt) -> str`` makes the summaries; without one
    they come from litellm with ``summarize_model`` (or the local model).
    """

    def __init__(self, store, *, agent_id="default", tenant_id="default", memory_key=None, max_turns=None,
                 max_tokens=None, summarize_after=None, summarize_prompt=None, summarize_model=None,
                 summarizer=None):
        self.store = store
        self.agent_id = check_identifier(agent_id, "agent id")
        self.tenant_id = check_identifier(tenant_id, "tenant id")
        self.memory_key = None if memory_key is None else normalize_memory_key(memory_key)
        self.max_turns = check_integer(max_turns, "max_turns", minimum=1, optional=True)
        self.max_tokens = check_integer(max_tokens, "max_tokens", minimum=1, optional=True)
        self.summarize_after = check_integer(summarize_after, "summarize_after", minimum=1, optional=True)
        check_summary_template(summary_template(summarize_prompt))
        self.summarize_prompt = summarize_prompt
        if summarize_model is not None and not isinstance(summarize_model, str):
            raise InvalidInputError(f"summarize_model must be a litellm model string, got {summarize_model!r}")
        self.summarize_model = summarize_model
        if summarizer is not None and not callable(summarizer):
            raise InvalidInputError(f"summarizer must be a callable taking the prompt, got {summarizer!r}")
        self.summarizer = summarizer

    def __repr__(self):
        return f"<Memory agent={self.agent_id!r} tenant={self.tenant_id!r} key={self.memory_key!r}>"

    # -- which memory ---------------------------------------------------------------------------

    def resolve_key(self, key=None) -> str:
        """The memory key a call works on: ``key``, else ``memory_key``, else the ``identify`` context."""
        if key is not None:
            return normalize_memory_key(key)
        if self.memory_key is not None:
            return self.memory_key
        identity = current_identity()
        if identity is None:
            raise InvalidInputError(
                "no memory key: pass key=..., create the Memory with memory_key=..., or call it inside "
                "`with identify(...)`"
            )
        return identity.key

    def _existing(self, key):
        """The session of the memory, or None: reading never creates a memory."""
        try:
            return Session.open(self.store, self.resolve_key(key), tenant_id=self.tenant_id, agent_id=self.agent_id)
        except NotFoundError:
            return None

    def _required(self, key, advice=""):
        session = self._existing(key)
        if session is None:
            raise missing_memory(self.agent_id, self.resolve_key(key), advice)
        return session

    def _created(self, key):
        return Session.create(self.store, self.resolve_key(key), tenant_id=self.tenant_id, agent_id=self.agent_id)

    def _histories(self, session):
        """(stored path, the same path with its overlays applied) of the latest branch."""
        with self.store.snapshot():
            path = session.get_history(apply_compactions=False)
            return path, apply_overlays(path, session.get_compactions())

    # -- writing --------------------------------------------------------------------------------

    def append(self, message, content=None, *, timestamp=None, metadata=None, key=None) -> Message:
        """Store one message and return it: ``append({"role": "user", "content": "Hi", "timestamp": now})``
        as the document writes it (any OpenAI chat dict, tool calls and results included), or
        ``append("user", "Hi", timestamp=now)``. ``timestamp`` (datetime or ISO string; local time when
        it has no UTC offset) is when it was said.

        With ``summarize_after`` a summary may be made right after; a failing summarizer is recorded
        in the memory's metadata and warned about, and never fails the append.
        """
        if isinstance(message, dict):
            if any(value is not None for value in (content, timestamp, metadata)):
                raise InvalidInputError(
                    "pass either a message dict or role and content, not both: the dict holds its own "
                    "content, timestamp and metadata"
                )
        elif content is None:
            raise InvalidInputError(f"no content for the {message!r} message: pass append(role, content), "
                                    "or the whole message as one dict")
        else:
            message = {"role": message, "content": content, "metadata": metadata or {}}
            if timestamp is not None:
                message["timestamp"] = timestamp
        message = incoming_message(message)
        session = self._created(key)
        stored = session.append_message(message)
        if self.summarize_after is not None:
            self._summarize_when_due(session)
        return stored

    def set_status(self, status, key=None, *, expected=UNCHECKED) -> str | None:
        """Mark the memory (``"qualified"``, ``"closed"``...); None or ``"in_progress"`` clears the mark.

        NotFoundError for a memory with no messages: a status marks a conversation, and an empty one
        would show in ``list`` with nobody having spoken. ``expected`` is the status the caller read
        (None: in progress): when another was stored since, nothing is written (``StaleWriteError``)."""
        status = check_status(status)
        session = self._required(key, ": append a message first")
        expected = expected if expected is UNCHECKED else check_status(expected)
        session.storage.set_status(status, utc_now_iso(), expected=expected)
        return status

    def clear(self, key=None) -> int:
        """Forget the memory: its messages, summary and status. Returns how many messages it held."""
        session = self._existing(key)
        if session is None:
            return 0
        count = session.storage.count()
        session.storage.delete()
        return count

    # -- reading --------------------------------------------------------------------------------

    def exists(self, key=None) -> bool:
        return self._existing(key) is not None

    def context(self, key=None) -> list[Message]:
        """The messages sent to a model: the summary, then the newest turns within the limits."""
        session = self._existing(key)
        if session is None:
            return []
        return select_context(session.get_history(), max_turns=self.max_turns, max_tokens=self.max_tokens)

    def messages_for_model(self, key=None) -> list[dict]:
        """``context`` as OpenAI chat dicts for litellm."""
        return to_openai(self.context(key))

    def get_formatted(self, key=None) -> str:
        """``context`` as readable text: the summary first, then one ``role: text`` line per message."""
        context = self.context(key)
        blocks = []
        if context and is_summary_message(context[0]):
            blocks.append("Summary of the earlier conversation:\n" + message_text(context[0]))
            context = context[1:]
        if context:
            blocks.append(render_transcript(context))
        return "\n\n".join(blocks)

    def get_recent(self, n, key=None) -> list[MemoryMessage]:
        """The stored messages of the last ``n`` turns (summaries do not hide them), each with its
        ``content`` and ``timestamp``."""
        check_integer(n, "n", minimum=1)
        session = self._existing(key)
        if session is None:
            return []
        turns = split_turns(session.get_history(apply_compactions=False))
        return [as_appended(message) for turn in turns[-n:] for message in turn]

    def search(self, query, key=None, *, limit=20) -> SearchHits:
        """Full-text hits in this memory, best first; any query string is safe."""
        session = self._existing(key)
        return session.search(query, limit=limit) if session is not None else SearchHits()

    def get(self, key=None) -> dict:
        """Everything about one memory, its ``messages`` with their ``content`` and ``timestamp``;
        NotFoundError when it does not exist (see ``exists``)."""
        session = self._required(key)
        path, history = self._histories(session)
        info = session.info
        entity_type, entity_value = parse_memory_key(session.session_id)
        return {
            "key": session.session_id,
            "messages": [as_appended(message) for message in path],
            "entities": [{"type": entity_type, "value": entity_value}] if entity_type else [],
            "summary": message_text(history[0]) if history and is_summary_message(history[0]) else None,
            "metadata": dict(info["metadata"], created_at=info["created_at"], updated_at=info["updated_at"],
                             status=session.storage.status()),
            "total_turns": len(split_turns(path)),
            "total_tokens": sum(message["tokens"] for message in path),
        }

    def list(self, last_interaction_before=None, status=None, limit=20, offset=0, date_from=None,
             date_field="updated_at") -> MemoryRows:
        """This agent's memories, most recently updated first, one row each with its newest summary and
        newest message (so "who spoke last" needs no second read).

        ``last_interaction_before``: the newest message is older than this. ``status``: only memories
        with this status (``"in_progress"`` for unmarked ones). ``date_from``: ``date_field``
        (``"updated_at"`` or ``"created_at"``) at or after this. Dates are datetimes or ISO strings,
        local time when they have no UTC offset.
        """
        check_page(limit, offset, MAX_LIST_LIMIT)
        if date_field not in DATE_FIELDS:
            raise InvalidInputError(f"date_field must be one of {', '.join(DATE_FIELDS)}, got {date_field!r}")
        rows = self.store.agents.memories(
            self.tenant_id, self.agent_id,
            interaction_before=None if last_interaction_before is None else to_utc_iso(
                last_interaction_before, "last_interaction_before"),
            status=ANY_STATUS if status is None else check_status(status),
            date_from=None if date_from is None else to_utc_iso(date_from, "date_from"),
            date_field=date_field, limit=limit, offset=offset,
        )
        return MemoryRows(_list_row(row) for row in rows)

    # -- summaries ------------------------------------------------------------------------------

    def summarize(self, prompt=None, model=None, key=None) -> str:
        """Fold every message not in the summary yet into it, store it and return its text.

        ``prompt`` is an instruction ("Extract only the decisions") or a template with
        ``{transcript}``; ``model`` is a litellm model string, used when no summarizer was given.
        NothingToSummarizeError when the memory holds no message outside its current summary.
        """
        session = self._existing(key)
        summary = None if session is None else self._fold(session, prompt or self.summarize_prompt, model, 0, 1)
        if summary is None:
            since = " since its last summary" if session is not None and session.get_compactions() else ""
            raise NothingToSummarizeError(
                f"nothing to summarize: memory {self.resolve_key(key)!r} has no messages{since}"
            )
        return summary

    def _fold(self, session, prompt, model, keep_turns, due_turns):
        """Summarize everything before the newest ``keep_turns`` turns when at least ``due_turns`` of
        them are outside the current summary; returns the new summary or None."""
        path, history = self._histories(session)
        previous = history[0] if history and is_summary_message(history[0]) else None
        turns = split_turns(history[1:] if previous else history)
        folded = turns[:len(turns) - keep_turns]
        if len(folded) < due_turns:
            return None
        messages = [message for turn in folded for message in turn]
        target = max(MIN_TARGET_SUMMARY_TOKENS, -(-sum(m["tokens"] for m in messages) // 5))
        request = build_summary_prompt(messages, previous_summary=message_text(previous) if previous else None,
                                       target_tokens=target, template=summary_template(prompt))
        summary = self._summarizer(model)(request)
        if not isinstance(summary, str) or not summary.strip():
            raise MemoryLabError(f"the summarizer returned no text ({summary!r}); the memory is unchanged")
        # The turns kept verbatim start at a user message, which is always an original message.
        end = len(path) - 1
        if keep_turns:
            first_kept = turns[len(folded)][0]["id"]
            end = next(i for i, message in enumerate(path) if message["id"] == first_kept) - 1
        session.add_compaction(summary.strip(), path[0]["id"], path[end]["id"],
                               metadata={"made_by": "memory", "prompt": prompt})
        return summary.strip()

    def _summarizer(self, model):
        if self.summarizer is not None:
            return self.summarizer
        from ..llm import (
            models as llm,  # litellm takes seconds to import: only a summary without a summarizer pays for it
        )

        model = model or self.summarize_model
        return llm.make_summarizer(model) if model else llm.make_summarizer()

    def _summarize_when_due(self, session):
        """After an append: fold turns into the summary once ``summarize_after`` of them have left the
        turns kept verbatim (the newest ``max_turns``, or the newest turn)."""
        try:
            summary = self._fold(session, self.summarize_prompt, None, self.max_turns or 1, self.summarize_after)
        except Exception as error:  # the message is stored; a failed summary must not undo the append
            self._record_summary(session, "error", f"{type(error).__name__}: {error}")
            warnings.warn(f"memory {session.session_id!r}: the summary failed: {error}", RuntimeWarning,
                          stacklevel=3)
            return
        if summary is not None:
            self._record_summary(session, "summarized", f"{len(summary)} characters")

    def _record_summary(self, session, state, detail):
        """The last automatic summary's outcome, kept in the session metadata where the lab shows it."""
        metadata = session.info["metadata"]
        metadata[SUMMARY_STATUS_KEY] = {"state": state, "detail": detail, "at": utc_now_iso()}
        session.set_metadata(metadata)


def _list_row(row):
    entity_type, entity_value = parse_memory_key(row["session_id"])
    return {
        "id": row["session_id"], "entity_type": entity_type, "entity_value": entity_value,
        "status": row["status"], "updated_at": row["updated_at"], "message_count": row["message_count"],
        "summary": row["summary"], "last_message": row["last_message"],
    }
