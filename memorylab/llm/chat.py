"""The chat loop: a user turn in, one stored assistant message out, through litellm.

A turn stores the user message, builds the request from the session (frozen system prompt, the
overlaid and micro-compacted history of the branch, the tools its context blocks generate), calls
the model and runs the tools it asks for until it answers or the tool rounds run out, and stores
one assistant message holding the text and every tool call with its result. The system prompt is
re-rendered after the turn and never inside it: the provider's prefix cache stays warm through the
tool rounds, and the model sees its own memory writes from the next turn on.
"""
import json
import time
import uuid
from collections.abc import Generator
from typing import TYPE_CHECKING

from ..errors import DamagedRowError, InvalidInputError, ModelError, NotFoundError
from ..history.tool_pairs import REJECTED_KINDS, lint_path, repair_path
from ..history.truncation import truncate_older_messages
from ..memory.longterm import render_memory_block
from ..messages import message_text, to_openai, utc_now_iso
from ..shapes import Message
from ..tokens import compact_json, estimate_message_tokens
from ..validation import check_integer
from .models import DEFAULT_LOCAL_MODEL, check_request, complete, redact_secrets, usage_and_cost
from .prompt_cache import PROMPT_CACHE_KEY, RequestRecorder, request_fingerprint

if TYPE_CHECKING:
    from .replay import ReplayResult

CHAT_ERRORS_KEY = "memorylab.chat_errors"
MAX_ERROR_RECORDS = 20
RESERVED_KWARGS = ("messages", "tools", "stream")
USAGE_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")


def chat_errors(session) -> list[dict]:
    """The session's latest chat errors, oldest first: ``{"at", "model", "kind", "message", ...}``."""
    return list(session.info["metadata"].get(CHAT_ERRORS_KEY) or [])


class ChatRunner:
    """Runs chat turns of one session against one model (one runner per session and user: not thread-safe).

    ``completion_kwargs`` go to ``litellm.completion`` on every call (``temperature``, ``api_base``,
    ``max_tokens``, ``mock_response``...); keys come from the environment, never from here.
    ``long_term`` is optional: an object with ``prepare_request(session_id, prompt)`` returning
    ``{"memories": [...]}`` (injected as a second system message) and
    ``after_turn(session_id, user_content, assistant_content)``.
    A history holding an orphaned tool call or result (``lint_path``) is refused with an
    InvalidInputError naming the message to fix, since the provider would refuse it;
    ``repair_tool_pairs=True`` sends it repaired instead (``repair_path``), leaving the stored messages as they are.
    """

    def __init__(self, session, *, model=None, long_term=None, max_tool_rounds=5, history_window=None,
                 repair_tool_pairs=False, **completion_kwargs):
        model = model or DEFAULT_LOCAL_MODEL
        check_request(model, completion_kwargs)
        reserved = sorted(set(RESERVED_KWARGS) & set(completion_kwargs))
        if reserved:
            raise InvalidInputError(f"{', '.join(reserved)} cannot be completion arguments: the runner builds them")
        self.session = session
        self.model = model
        self.long_term = long_term
        self.max_tool_rounds = check_integer(max_tool_rounds, "max_tool_rounds")
        self.history_window = check_integer(history_window, "history_window", minimum=1, optional=True)
        self.repair_tool_pairs = bool(repair_tool_pairs)
        self.completion_kwargs = completion_kwargs
        self.last_request = None  # {"model", "messages", "tools", "memories"}: what the latest model call sent
        self.last_message = None  # the assistant message the latest turn stored
        self._requests = RequestRecorder()  # the latest request's fingerprint, for the prompt-cache record

    # -- turns -------------------------------------------------------------------------------

    def send(self, text, *, leaf_id=None) -> Message:
        """Store ``text`` as a user message under ``leaf_id`` (default: the newest leaf), answer it,
        and return the stored assistant message. A ModelError, or a history refused for an orphaned tool
        call or result, leaves the user message stored."""
        return _run_to_end(self._answer(self._add_user(text, **_under(leaf_id)), stream=False))

    def stream(self, text, *, leaf_id=None) -> Generator[str, None, Message]:
        """Like ``send``, but return an iterator of text chunks as they arrive (``st.write_stream``).

        The user message is stored at once; the answer is stored when the iterator ends and is then
        ``last_message``. An iterator dropped before its end stores no answer.
        """
        return self._answer(self._add_user(text, **_under(leaf_id)), stream=True)

    def regenerate(self, assistant_message_id, *, stream=False) -> Message | Generator[str, None, Message]:
        """Answer the message before ``assistant_message_id`` again, as a new sibling branch."""
        answer = self._stored(assistant_message_id, "assistant")
        if answer["parent_id"] is None:
            raise InvalidInputError(f"message {assistant_message_id!r} is a root: there is nothing it answers")
        return self._reply(self.session.get_message(answer["parent_id"]), stream)

    def edit(self, user_message_id, text, *, stream=False) -> Message | Generator[str, None, Message]:
        """Fork: store ``text`` as a sibling of user message ``user_message_id`` and answer it."""
        original = self._stored(user_message_id, "user")
        return self._reply(self._add_user(text, parent_id=original["parent_id"]), stream)

    def replay(self, leaf_id, *, model=None, on_progress=None, cancel=None, **completion_args) -> "ReplayResult":
        """Ask every user turn of the branch ending at ``leaf_id`` again under ``model`` (default: this
        runner's) with ``completion_args`` over this runner's, as a sibling branch from its first user
        message; returns a ReplayResult. Memories are recalled, none extracted (``replay_branch``)."""
        from .replay import replay_branch  # loaded when a replay runs, like the model layer itself

        return replay_branch(self, leaf_id, model=model, on_progress=on_progress, cancel=cancel, **completion_args)

    def _reply(self, user, stream):
        turn = self._answer(user, stream=stream)
        return turn if stream else _run_to_end(turn)

    def _stored(self, message_id, role):
        message = self.session.get_message(message_id)
        if message is None:
            raise NotFoundError(f"no message {message_id!r} in session {self.session.session_id!r}")
        if message["role"] != role:
            raise InvalidInputError(f"message {message_id!r} has role {message['role']!r}; expected {role!r}")
        return message

    def _add_user(self, text, **where):
        """``where`` is empty (continue the newest leaf) or ``parent_id=`` (an id; None starts a new root)."""
        if not isinstance(text, str) or not text.strip():
            raise InvalidInputError("the user message is empty: there is nothing to send")
        return self.session.append_message({"role": "user", "parts": [{"type": "text", "text": text}]}, **where)

    # -- the request ---------------------------------------------------------------------------

    def build_request(self, leaf_id=None, *, history=None) -> dict:
        """What a turn ending at ``leaf_id`` sends: ``{"model", "messages", "tools", "memories"}``.

        ``build_request`` of the session, with long-term memories recalled for the leaf's text
        when the leaf is a user message. Nothing is stored or sent.
        """
        return self._request(leaf_id, history)[0]

    def _request(self, leaf_id, history):
        """``(request, whole, sent)``: ``build_request``'s request, and the history it holds before and
        after micro-compaction."""
        memories = self.recall(leaf_id)
        request, whole, sent = _request_and_history(self.session, leaf_id, history, self.history_window, memories,
                                                    self.repair_tool_pairs)
        return {"model": self.model, **request, "memories": memories}, whole, sent

    def recall(self, leaf_id=None) -> list[dict]:
        """The long-term memories a turn ending at user message ``leaf_id`` would inject (``[]`` when
        the leaf is no user message); cheaper than ``build_request``, which converts the whole branch."""
        if self.long_term is None:
            return []
        try:
            leaf = self.session.get_message(leaf_id) if leaf_id else self.session.get_latest_leaf()
        except DamagedRowError:  # no text to recall for; reading the history reports the row
            return []
        if leaf is None or leaf["role"] != "user":
            return []
        try:
            found = self.long_term.prepare_request(self.session.session_id, message_text(leaf))
        except Exception as error:  # recall is an extra: the turn goes on without it, and the log says why
            self._record_error("long_term", f"prepare_request failed: {type(error).__name__}: {error}")
            return []
        return list((found or {}).get("memories") or [])

    # -- the loop ------------------------------------------------------------------------------

    def _answer(self, user, *, stream):
        """The turn as a generator: yields text chunks when streaming, returns the stored answer."""
        started = time.perf_counter()
        turn = _Turn(self.model, stream)
        history = self.session.get_history(user["id"])
        if not self.repair_tool_pairs:
            self._refuse_orphans(user, _windowed(history, self.history_window))
        try:
            tools = self.session.tools()
            request, whole, sent = self._request(user["id"], history)
            messages, turn.memories = request["messages"], len(request["memories"])
            fingerprint = _request_fingerprint(self.session, request, whole, sent)
            turn.prompt_cache = self._requests.record(self.session, user, history, fingerprint)
            tokens = fingerprint.tokens
            while True:
                self.last_request = {"model": self.model, "messages": list(messages), "tools": request["tools"],
                                     "memories": request["memories"]}
                turn.request_tokens.append(tokens)
                response = yield from self._call(messages, request["tools"], stream, turn, started)
                calls = turn.add_reply(response)
                if not calls:
                    break
                run = turn.tool_rounds < self.max_tool_rounds
                round_parts = [self._tool_part(tools, call, run) for call in calls]
                turn.tool_rounds += run
                turn.parts.extend(round_parts)
                round_message = {"role": "assistant", "parts": turn.round_text + round_parts}
                messages = messages + to_openai([round_message])
                tokens += estimate_message_tokens(round_message)
                if not run:
                    turn.limit_reached = True
                    break
        except ModelError as error:
            partial = self._store(user, turn, started, error=str(error)) if turn.parts else None
            self._record_error(error.kind, str(error), user_message_id=user["id"],
                               assistant_message_id=partial["id"] if partial else None)
            raise
        finally:
            self.session.refresh_system_prompt()  # between turns, never inside one
        answer = self._store(user, turn, started)
        self._requests.remember(answer["id"], fingerprint)
        self._after_turn(user, answer)
        return answer

    def _refuse_orphans(self, user, history):
        """Raise before the model is called when ``history`` holds a call or result a provider refuses."""
        orphans = [finding for finding in lint_path(history) if finding.kind in REJECTED_KINDS]
        if not orphans:
            return
        message = (f"not sent: the history has {len(orphans)} orphaned tool call(s) or result(s) a provider would "
                   f"refuse: {'; '.join(f.detail for f in orphans)} (or chat with repair_tool_pairs=True to send "
                   "it repaired)")
        self._record_error("tool_pairs", message, user_message_id=user["id"])
        raise InvalidInputError(message)

    def _call(self, messages, tools, stream, turn, started):
        if not stream:
            return complete(messages, model=self.model, tools=tools, **self.completion_kwargs)
        reply = complete(messages, model=self.model, tools=tools, stream=True, **self.completion_kwargs)
        for text in reply:
            if turn.first_token_ms is None:
                turn.first_token_ms = _ms_since(started)
            yield text
        return reply.response

    def _tool_part(self, tools, call, run):
        """Run one tool call (or refuse it past the round limit) and record it as a tool part."""
        name = call.function.name or ""
        try:
            arguments = json.loads(call.function.arguments or "{}")
        except ValueError:
            arguments = call.function.arguments
        if not run:
            output = f"Error: not run: this turn reached its limit of {self.max_tool_rounds} tool rounds"
        elif not isinstance(arguments, dict):
            output = f"Error: {name} takes a JSON object of arguments, got {compact_json(arguments)[:200]}"
        elif name not in tools:
            output = f"Error: there is no tool {name!r}; the tools are: {', '.join(tools) or 'none'}"
        else:
            output = tools[name].execute(arguments)
        return {"type": f"tool-{name}" if name else "dynamic-tool", "toolCallId": call.id or _call_id(),
                "toolName": name, "input": arguments, "output": output, "state": "output-available"}

    def _store(self, user, turn, started, *, error=None):
        metadata = turn.metadata(_ms_since(started))
        if error:
            metadata["error"] = error
        self.last_message = self.session.append_message(
            {"role": "assistant", "parts": turn.parts, "metadata": metadata}, parent_id=user["id"])
        return self.last_message

    def _after_turn(self, user, answer):
        if self.long_term is None:
            return
        try:
            self.long_term.after_turn(self.session.session_id, message_text(user), message_text(answer))
        except Exception as error:  # the answer is stored; a failed memory extraction must not undo the turn
            self._record_error("long_term", f"after_turn failed: {type(error).__name__}: {error}",
                               assistant_message_id=answer["id"])

    def _record_error(self, kind, message, **ids):
        """Keep the newest MAX_ERROR_RECORDS chat errors in the session metadata, where the lab shows them."""
        metadata = self.session.info["metadata"]
        log = list(metadata.get(CHAT_ERRORS_KEY) or [])
        log.append({"at": utc_now_iso(), "model": self.model, "kind": kind, "message": redact_secrets(message), **ids})
        metadata[CHAT_ERRORS_KEY] = log[-MAX_ERROR_RECORDS:]
        self.session.set_metadata(metadata)


class _Turn:
    """What one turn has gathered so far: parts, usage and cost summed over its model calls, timings."""

    def __init__(self, model, stream):
        self.model = model
        self.stream = stream
        self.parts = []
        self.round_text = []
        self.usage = dict.fromkeys(USAGE_KEYS, 0)
        self.cost = 0.0
        self.tool_rounds = 0
        self.limit_reached = False
        self.first_token_ms = None
        self.finish_reason = None
        self.memories = 0
        self.prompt_cache = None  # the first request's fingerprint, as stored (``prompt_cache.RequestRecorder``)
        self.request_tokens = []  # estimated tokens of each request sent
        self.cached_tokens = None  # what the provider reported as read from its cache, when it did

    def add_reply(self, response):
        """Record one model reply; returns the tool calls it asks for."""
        spent = usage_and_cost(response, self.model)
        for key in USAGE_KEYS:
            self.usage[key] += spent["usage"][key]
        cached = _provider_cached_tokens(response)
        if cached is not None:
            self.cached_tokens = (self.cached_tokens or 0) + cached
        self.cost = None if self.cost is None or spent["cost"] is None else self.cost + spent["cost"]
        choice = response.choices[0]
        self.finish_reason = choice.finish_reason
        self.round_text = [{"type": "text", "text": choice.message.content}] if choice.message.content else []
        self.parts.extend(self.round_text)
        return choice.message.tool_calls or []

    def metadata(self, latency_ms):
        metadata = {"model": self.model, "usage": self.usage, "cost": self.cost, "latency_ms": latency_ms,
                    "tool_rounds": self.tool_rounds, "finish_reason": self.finish_reason}
        if self.stream:
            metadata["first_token_ms"] = self.first_token_ms
        if self.limit_reached:
            metadata["tool_round_limit_reached"] = True
        if self.memories:
            metadata["long_term_memories"] = self.memories
        if self.cached_tokens is not None:
            metadata["usage"] = {**self.usage, "cached_tokens": self.cached_tokens}
        if self.prompt_cache is not None:
            rounds = {"rounds": self.request_tokens[1:]} if len(self.request_tokens) > 1 else {}
            metadata[PROMPT_CACHE_KEY] = {**self.prompt_cache, **rounds}
        return metadata


def build_request(session, leaf_id=None, *, history=None, history_window=None, memories=(),
                  repair_tool_pairs=False) -> dict:
    """The messages and tools a turn ending at ``leaf_id`` (default: the newest leaf) sends.

    ``{"messages", "tools"}``: the frozen system prompt (left out when empty), ``memories`` as a
    second system message (the first stays byte-identical, so the provider's prefix cache holds),
    then the overlaid history, cut to its last ``history_window`` messages and micro-compacted.
    ``history`` is that overlaid history when the caller has already read it. ``repair_tool_pairs``
    sends orphaned tool calls and results the way providers accept them (``repair_path``).
    """
    return _request_and_history(session, leaf_id, history, history_window, memories, repair_tool_pairs)[0]


def _request_and_history(session, leaf_id, history, history_window, memories, repair_tool_pairs):
    """``(request, whole, sent)``: ``build_request``'s request and the history it holds before and
    after micro-compaction (a message it leaves whole is the same object in both)."""
    if history is None:
        history = session.get_history(leaf_id)
    whole = _windowed(history, history_window)
    if repair_tool_pairs:
        whole = repair_path(whole)
    sent = truncate_older_messages(whole)
    messages = []
    system_prompt = session.freeze_system_prompt()
    if system_prompt:
        messages.append({"role": "system", "content": system_prompt})
    if memories:
        messages.append({"role": "system", "content": render_memory_block(memories)})
    messages.extend(to_openai(sent))
    return {"messages": messages, "tools": session.openai_tools()}, whole, sent


def _under(leaf_id):
    return {} if leaf_id is None else {"parent_id": leaf_id}


def _run_to_end(turn):
    while True:
        try:
            next(turn)
        except StopIteration as end:
            return end.value


def _windowed(history, count):
    """The last ``count`` messages (all of them when ``count`` is None), not starting with a tool result
    whose call was cut off."""
    if not count:
        return history
    recent = history[-count:]
    while recent and recent[0]["role"] == "tool":
        recent = recent[1:]
    return recent


def _ms_since(started):
    return round((time.perf_counter() - started) * 1000)


def _call_id():
    return "call_" + uuid.uuid4().hex[:12]


def _request_fingerprint(session, request, whole, sent):
    """The prompt-cache fingerprint of ``request``, which holds ``sent``, micro-compacted from ``whole``."""
    prompt = session.freeze_system_prompt()
    memories = request["messages"][1 if prompt else 0]["content"] if request["memories"] else None
    return request_fingerprint(prompt, request["tools"], memories, whole, sent)


def _provider_cached_tokens(response):
    """The prompt tokens the provider read from its cache (``prompt_tokens_details.cached_tokens``), or None."""
    details = getattr(getattr(response, "usage", None), "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None)
    return cached if isinstance(cached, int) else None
