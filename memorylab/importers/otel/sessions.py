"""Spans into conversations: which session each call belongs to, its tree, and what else the spans said.

A session is the call's conversation id (``gen_ai.conversation.id``, OpenInference's ``session.id``),
else the first one a span of its trace names, else the trace id. A batch of spans (a file, or the
traces a collector saw settle) is placed call by call in start order, so the same spans give the
same tree however they arrived (``tree.ConversationTree``). A tool span attaches to the call that
asked for it (by the call id it answers, else the latest call of its trace before it that called
a tool of its name): it is listed in that answer's ``tool_runs``. Every other span (agent, chain,
retriever, HTTP; an LLM span that holds no messages because content capture was off; a tool span
no call asked for) is kept in its session's ``otel_spans`` metadata.
"""
from __future__ import annotations

import hashlib
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone

from ...errors import InvalidInputError
from ...validation import check_identifier
from ..source import SourceMessage, SourceSession, chat_usage
from .conventions import ContextReader, LlmCall, conversation_id, duration_ms, is_llm_span, llm_call, tool_run
from .otlp import Span
from .tree import ConversationTree, Placed

HELD_SESSIONS = 2000
"""Sessions a collector keeps in memory between batches (their trees: some 200 bytes a message)."""
ATTRIBUTE_CHARS = 2000
"""How much of one attribute's text a span kept in ``otel_spans`` holds (the rest is cut, saying how much)."""


@dataclass
class SessionState:
    """One session's tree and the metadata its spans gave, kept while a collector runs."""

    tree: ConversationTree = field(default_factory=ConversationTree)
    spans: list[dict] = field(default_factory=list)
    span_ids: set[str] = field(default_factory=set)
    facts: dict = field(default_factory=dict)
    titled: bool = False


class OtelSessions:
    """The sessions spans go into; ``seed(session_id)`` gives the state of a session the store holds
    (a collector's), None for a new one. With a seed, only the ``held`` sessions used last stay in
    memory: another is read back when its spans come. ``unplaced`` counts the spans of traces that held
    no LLM call of a session known here: they are in no session, so nothing keeps them."""

    def __init__(self, seed: Callable[[str], SessionState | None] | None = None, held=HELD_SESSIONS):
        self.seed, self.held = seed, held
        self.states: OrderedDict[str, SessionState] = OrderedDict()
        self.unplaced = 0
        self.last_batch_calls = 0

    def forget(self, session_ids: Iterable[str]):
        """Drop what is known of these sessions (a write of them failed); the next batch seeds them anew."""
        for session_id in session_ids:
            self.states.pop(session_id, None)

    def _state(self, session_id) -> SessionState:
        if session_id in self.states:
            self.states.move_to_end(session_id)
        else:
            self.states[session_id] = (self.seed(session_id) if self.seed else None) or SessionState()
        return self.states[session_id]

    def _let_go(self, keep):
        """Hold no more than ``held`` sessions (those of this batch stay, whatever their number)."""
        while self.seed and len(self.states) > self.held:
            oldest = next(iter(self.states))
            if oldest in keep:
                return
            del self.states[oldest]

    def batch(self, spans: Iterable[Span]) -> list[SourceSession]:
        """The sessions these spans add to, with what they add."""
        calls, others = _read_spans(spans)
        self.last_batch_calls = len(calls)
        placed: dict[str, Placed] = {}
        titles, readers = {}, defaultdict(ContextReader)
        for session_id, call in sorted(calls, key=lambda c: (c[1].span.start, c[1].span.span_id)):
            state = self._state(session_id)
            context, digests = readers[session_id].read(call)
            if not state.titled:
                titles[session_id] = _title(context)
                state.titled = titles[session_id] is not None
            state.tree.place(context, digests, call.outputs, call.span.start, _message_maker(call),
                             f"trace {call.span.trace_id}, span {call.span.span_id}",
                             placed.setdefault(session_id, Placed()))
            _note_call(state, call)
        for session_id, span in others:
            state = self.states.get(session_id) if session_id not in placed else self._state(session_id)
            if state is None:
                self.unplaced += 1
            elif span.span_id not in state.span_ids:
                state.span_ids.add(span.span_id)
                state.spans.append(_kept_span(span))
                placed.setdefault(session_id, Placed())  # its metadata changed
        sessions = [self._session(session_id, found, titles.get(session_id)) for session_id, found in placed.items()]
        self._let_go(placed)
        return sessions

    def _session(self, session_id, placed, title) -> SourceSession:
        state = self.states[session_id]
        metadata = {"otel": dict(state.facts), **({"otel_spans": list(state.spans)} if state.spans else {})}
        messages = placed.messages or [_stored_reference(state.tree)]
        return SourceSession(source_id=session_id, messages=messages, overlays=placed.overlays,
                             metadata=metadata, title=title, opening_span=0)


def _stored_reference(tree):
    """The newest answer, already stored: the writer records a session's metadata only with a message,
    and a batch of spans that add none to a known session still adds to its ``otel_spans``."""
    answer = tree.calls[-1][1] if tree.calls else next(iter(tree.parent))
    return SourceMessage({"id": answer}, tree.parent[answer])


def _read_spans(spans):
    """(session id, LlmCall) of every call and (session id, Span) of every other span, with each tool
    span's facts attached to its call where one asked for it."""
    by_trace: dict[str, list[Span]] = defaultdict(list)
    for span in spans:
        by_trace[span.trace_id].append(span)
    calls, others = [], []
    for trace_id, trace_spans in by_trace.items():
        trace_spans.sort(key=lambda s: (s.start, s.span_id))
        named = next((c for c in map(conversation_id, trace_spans) if c), None)
        trace_calls, rest = [], []
        for span in trace_spans:
            call = llm_call(span) if is_llm_span(span) else None
            (trace_calls if call else rest).append(call or span)
        calls += [(_session_id(call.conversation_id or named or trace_id), call) for call in trace_calls]
        others += [(_session_id(named or trace_id), span) for span in rest if not _attached(span, trace_calls)]
    return calls, others


def _session_id(conversation_id) -> str:
    """The conversation id, or where it is no id memorylab stores (too long, control characters) a
    digest of it."""
    try:
        return check_identifier(conversation_id, "session id")
    except InvalidInputError:
        return "conversation-" + hashlib.sha1(conversation_id.encode("utf-8", "replace")).hexdigest()[:20]


def _attached(span, calls: list[LlmCall]) -> bool:
    """Whether ``span`` is a tool run some call asked for; if so its facts join that call's."""
    run = tool_run(span)
    if run is None:
        return False
    for call in reversed(calls):
        asked = {p["toolCallId"]: p["toolName"] for m in call.outputs for p in m["parts"]
                 if p.get("state") == "input-available"}
        if run.call_id in asked or run.call_id is None and call.span.start <= span.start and run.name in asked.values():
            call.tool_runs.append(run.facts)
            return True
    return False


def _note_call(state, call: LlmCall):
    facts = state.facts
    for key, value in (("services", call.span.service), ("models", call.facts.get("model")),
                       ("user_ids", call.facts.get("user_id"))):
        if value and value not in facts.setdefault(key, []):
            facts[key].append(value)
    facts["llm_calls"] = facts.get("llm_calls", 0) + 1
    if call.convention not in facts.setdefault("conventions", []):
        facts["conventions"].append(call.convention)


def _title(context) -> str | None:
    for message in context:
        if message["role"] == "user":
            text = " ".join(p["text"] for p in message["parts"] if p.get("type") == "text").strip()
            if text:
                return text.splitlines()[0][:80]
    return None


def _message_maker(call: LlmCall):
    span, facts = call.span, call.facts

    def make(message, message_id, is_answer):
        metadata = {"otel": {"trace_id": span.trace_id, "span_id": span.span_id}}
        if is_answer:
            metadata["otel"].update(start_unix_nano=span.start, end_unix_nano=span.end, convention=call.convention)
            usage = chat_usage(facts.get("prompt_tokens"), facts.get("completion_tokens"))
            extra = {"model": facts.get("model"), "usage": usage, "provider": facts.get("provider"),
                     "finish_reason": facts.get("finish_reason"), "response_id": facts.get("response_id"),
                     "latency_ms": duration_ms(span),
                     "tool_runs": call.tool_runs or None}
            metadata.update((key, value) for key, value in extra.items() if value is not None)
        return {"id": message_id, "role": message["role"], "parts": message["parts"], "metadata": metadata,
                "created_at": _iso(span.end if is_answer else span.start)}

    return make


def _kept_span(span: Span) -> dict:
    attributes = span.attributes
    kind = attributes.get("openinference.span.kind") or attributes.get("gen_ai.operation.name") or span.kind
    kept = {"trace_id": span.trace_id, "span_id": span.span_id, "parent_span_id": span.parent_id or None,
            "name": span.name, "kind": kind, "start": _iso(span.start), "status": span.status,
            "duration_ms": duration_ms(span),
            "attributes": {key: _cut(value) for key, value in attributes.items()}}
    if is_llm_span(span):
        kept["note"] = "an LLM call that recorded no messages (its instrumentor's content capture is off)"
    return {key: value for key, value in kept.items() if value is not None}


def _cut(value):
    if isinstance(value, str) and len(value) > ATTRIBUTE_CHARS:
        return f"{value[:ATTRIBUTE_CHARS]}… ({len(value) - ATTRIBUTE_CHARS:,} more characters)"
    return value


def _iso(unix_nano) -> str | None:
    if not unix_nano:
        return None
    return datetime.fromtimestamp(unix_nano / 1e9, tz=timezone.utc).isoformat(timespec="milliseconds")
