"""Codex CLI session rollouts: ``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<session id>.jsonl``.

Each line is ``{"timestamp", "type", "payload"}`` (codex-rs ``RolloutLine``): ``session_meta`` (the
session's id, cwd, CLI version, git facts), ``turn_context`` (the model and effort of the turns that
follow), ``response_item`` (an OpenAI Responses item: a message, reasoning, a function, custom tool or
local shell call, or a call's output), ``event_msg`` (what Codex showed; only ``token_count``,
``thread_rolled_back`` and the ends of turns are read) and ``compacted`` (a compaction's summary).

- One file is one session, named by its first ``session_meta`` id. ``codex resume`` appends to the
  same file, so a resumed session is a grown file: messages are named by their line, and an import
  adds only the lines it has not seen. A fork (``codex fork``) is a new file, a session of its own,
  holding a copy of the history it forked from; its metadata names that session (``forked_from_id``).
- Items carry no ids of their own on disk. The items of one model response (reasoning, assistant
  text, calls) become one assistant message, named by its first line, and its calls' outputs follow
  it as a chain of ``tool`` messages, so a request can be rebuilt from them. The token usage Codex
  counted for the response (``token_count``) lands in its metadata, the turn's model too.
- The file's last response, while it has calls without outputs, is still being written: it is left
  for the next import. A call its turn ended without (or moved past) is closed as an error.
- A ``compacted`` line becomes an overlay from the first message of the path to the newest one: Codex
  replaces the whole history it had, and the newer lines hang on that message. The overlay's summary
  is what the model read instead: the text of the ``replacement_history`` (the context and prompts
  Codex kept, then ``payload.message``, its summary), or without one, as Codex rebuilds it, the
  path's prompts and the summary. A compaction before any message is kept as a message instead.
- ``thread_rolled_back`` drops the last user turns from the context: the next lines hang where those
  turns began, and the dropped turns stay behind as a branch.
Every other line (UI events, ghost snapshots, kinds later releases add) is counted in the session's
``skipped_entries``.
"""
from __future__ import annotations

import json
import uuid
from collections import Counter
from pathlib import Path

from .formats import SourceFormat, SourceProbe
from .openai_items import content_parts
from .source import (
    OpenResponse,
    SourceMessage,
    SourceOverlay,
    SourceSession,
    chat_usage,
    json_lines,
    malformed_at,
    source_error,
)

LINE_TYPES = ("session_meta", "turn_context", "response_item", "event_msg", "compacted")
CALLS = ("function_call", "custom_tool_call", "local_shell_call")
OUTPUTS = ("function_call_output", "custom_tool_call_output")
RESPONSE_KINDS = ("reasoning", "web_search_call", *CALLS)
"""Items a model response holds besides assistant text."""
ROLES = {"user": "user", "developer": "system", "system": "system"}
CONTEXT_PREFIXES = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions")
"""How the context Codex injects as user messages opens; such a message is no user turn."""
META = {"cwd": "cwd", "originator": "originator", "cli_version": "codex_version", "source": "codex_source",
        "model_provider": "model_provider", "forked_from_id": "forked_from_id"}
"""``session_meta`` fields kept in the session's metadata, by the name they get there."""
GIT = {"branch": "git_branch", "commit_hash": "git_commit", "repository_url": "git_repository"}
TURN = {"model": "model", "effort": "effort", "turn_id": "turn_id"}
"""``turn_context`` fields each assistant message of the turn keeps."""
TURN_ENDS = ("task_complete", "turn_complete", "turn_aborted")
PROMPT_TOKENS = 20_000
"""How many tokens of the latest prompts Codex keeps in a compacted history it rebuilds (codex-rs
``COMPACT_USER_MESSAGE_MAX_TOKENS``, counted as it counts them: four bytes a token)."""
UNANSWERED = "Codex recorded no output for this call"
NO_SUMMARY = "(Codex kept no readable summary of this compaction: it is encrypted)"


def _detect(probe: SourceProbe) -> bool:
    lines = probe.json_lines
    if not lines:  # a first line longer than the probe
        head = (probe.text or "").lstrip()
        return head.startswith("{") and '"type":"session_meta","payload":{' in head[:200]
    return all(isinstance(line, dict) and line.get("type") in LINE_TYPES and isinstance(line.get("payload"), dict)
               for line in lines)


def _read(path: Path):
    meta = _first_meta(path)
    session_id = meta.get("id") if isinstance(meta.get("id"), str) and meta["id"] else None
    rollout = _Rollout(path, session_id or _id_from_name(path))
    session = SourceSession(source_id=rollout.session_id, messages=(), overlays=rollout.overlays,
                            metadata=rollout.metadata, opening_span=0 if session_id else 1)
    session.messages = rollout.messages(session)
    yield session


def _first_meta(path) -> dict:
    """The payload of the file's first ``session_meta`` line (its first line, unless the file was cut)."""
    with open(path, "rb") as file:
        for line in file:
            if b'"session_meta"' in line:
                try:
                    entry = json.loads(line)
                except ValueError:
                    return {}  # refused by its line number when the file is read
                if isinstance(entry, dict) and entry.get("type") == "session_meta":
                    return entry.get("payload") if isinstance(entry.get("payload"), dict) else {}
    return {}


def _id_from_name(path) -> str:
    """The session id Codex puts at the end of a rollout's name, else the name itself."""
    try:
        return str(uuid.UUID(path.stem[-36:]))
    except ValueError:
        return path.stem


def _lines(path):
    """(line number, line) for each non-empty line; one that is not a rollout line is refused."""
    for number, line in json_lines(path):
        if not isinstance(line, dict) or not isinstance(line.get("type"), str) or not isinstance(
                line.get("payload"), dict):
            raise source_error(path, f"line {number}", "expected a rollout line (a JSON object with a 'type' and a "
                                                       "'payload' object)")
        yield number, line


class _Rollout:
    """Reads one file's lines into messages in one pass; fills ``overlays`` and ``metadata`` as it goes."""

    def __init__(self, path, session_id):
        self.path, self.session_id = path, session_id
        self.overlays: list[SourceOverlay] = []
        self.metadata: dict = {}
        self.tail: str | None = None  # the message the next line hangs on
        self.parent_of: dict[str, str | None] = {}
        self.roots: dict[str, str] = {}  # message id -> the first message of its path
        self.user_turns: list[str] = []  # the user prompts on the current path, oldest first
        self.prompts: dict[str, str] = {}  # user prompt id -> its text
        self.turn: OpenResponse | None = None
        self.context: dict = {}  # the TURN fields of the newest turn_context
        self.tool_names: dict[str, str] = {}  # call id -> tool name
        self.title: str | None = None
        self.metas = 0
        self.skipped = Counter()

    def messages(self, session):
        """The messages, in an order the writer can take; at the end, ``session`` gets its title and
        ``metadata`` its skipped lines."""
        handlers = {"session_meta": self._session_meta, "turn_context": self._turn_context,
                    "response_item": self._item, "event_msg": self._event, "compacted": self._compacted}
        for number, line in _lines(self.path):
            where = f"line {number}"
            with malformed_at(self.path, where, f"a Codex {line['type']} line"):
                handler = handlers.get(line["type"])
                if handler is None:
                    self.skipped[line["type"]] += 1
                    continue
                yield from handler(line["payload"], number, line.get("timestamp"))
        if self.turn is not None and self.turn.calls <= self.turn.answered:
            yield from self._close()
        session.title = self.title
        if self.skipped:
            self.metadata["skipped_entries"] = dict(self.skipped)

    def _id(self, number):
        return f"{self.session_id}:{number}"

    def _new(self, number, role, parts, timestamp, **facts):
        return {"id": self._id(number), "role": role, "parts": parts, "created_at": timestamp,
                "metadata": {"source_lines": [number], **{k: v for k, v in facts.items() if v is not None}}}

    def _place(self, message_id, parent):
        self.parent_of[message_id] = parent
        self.roots[message_id] = self.roots.get(parent, message_id)
        self.tail = message_id

    def _emit(self, message, where):
        """A message of its own on the current path, after the open response."""
        yield from self._close()
        self._place(message["id"], self.tail)
        yield SourceMessage(message, self.parent_of[message["id"]], where)

    def _close(self):
        """Write the open response and its outputs; a call still unanswered is closed as an error."""
        turn, self.turn = self.turn, None
        if turn is None:
            return
        for part in turn.message["parts"]:
            if part.get("toolCallId") in turn.calls - turn.answered:
                part.update(state="output-error", errorText=UNANSWERED)
        self._place(turn.message["id"], turn.parent)
        yield SourceMessage(turn.message, turn.parent, turn.where)
        for result in turn.results:
            self._place(result.message["id"], result.parent_id)
            yield result

    # --- line kinds

    def _session_meta(self, meta, number, timestamp):
        self.metas += 1
        if self.metas > 1:  # a fork's copy of the session it forked from
            self.skipped["session_meta"] += 1
            return ()
        self.metadata.update({name: meta[key] for key, name in META.items() if meta.get(key) is not None})
        git = meta.get("git") if isinstance(meta.get("git"), dict) else {}
        self.metadata.update({name: git[key] for key, name in GIT.items() if git.get(key) is not None})
        return ()

    def _turn_context(self, context, number, timestamp):
        self.context = {name: context[key] for key, name in TURN.items() if context.get(key) is not None}
        if isinstance(context.get("model"), str) and context["model"] not in self.metadata.setdefault("models", []):
            self.metadata["models"].append(context["model"])
        if context.get("cwd") is not None:
            self.metadata.setdefault("cwd", context["cwd"])
        return ()

    def _item(self, item, number, timestamp):
        kind, where = item.get("type"), f"line {number}"
        if kind == "message" and item.get("role") == "assistant" or kind in RESPONSE_KINDS:
            return self._response_item(item, number, timestamp, where)
        if kind == "message" and item.get("role") in ROLES:
            return self._input(item, number, timestamp, where)
        if kind in OUTPUTS:
            return self._output(item, number, timestamp, where)
        self.skipped[f"response_item/{kind}"] += 1
        return ()

    def _event(self, event, number, timestamp):
        kind = event.get("type")
        if kind == "token_count":
            self._token_count(event.get("info"))
            return ()
        if kind == "thread_rolled_back":
            return self._rollback(event.get("num_turns"))
        if kind in TURN_ENDS:
            return self._close()
        self.skipped[f"event_msg/{kind}"] += 1
        return ()

    def _compacted(self, compaction, number, timestamp):
        """The summary as an overlay over the whole path it replaced."""
        yield from self._close()
        summary, history = self._summary(compaction), compaction.get("replacement_history")
        if self.tail is None:
            yield from self._emit(self._new(number, "assistant", [{"type": "text", "text": summary}], timestamp,
                                            compact_summary=True), f"line {number}")
            return
        facts = {"source_line": number, "created_at": timestamp,
                 "message": compaction.get("message") if compaction.get("message") != summary else None,
                 "replacement_items": len(history) if isinstance(history, list) else None,
                 "encrypted": True if any(_is_compaction(i) for i in _listed(history)) else None}
        self.overlays.append(SourceOverlay(self.roots[self.tail], self.tail, summary,
                                           {k: v for k, v in facts.items() if v is not None}, f"line {number}"))

    def _summary(self, compaction) -> str:
        """What the model read in place of the history: the readable text of the ``replacement_history``
        (the context and prompts Codex kept, then its summary), else, as Codex rebuilds it, the prompts
        of the path and the summary (``message``). A remote compaction keeps its summary encrypted."""
        message, history = compaction.get("message"), compaction.get("replacement_history")
        message = message if isinstance(message, str) else ""
        if isinstance(history, list):
            texts = [p["text"] for item in history if isinstance(item, dict) and item.get("type") == "message"
                     for p in content_parts(item.get("content")) if p["type"] == "text"]
        else:
            texts = [*_latest_within(PROMPT_TOKENS, [self.prompts[i] for i in self.user_turns]), message]
        return "\n\n".join(text for text in texts if text.strip()) or message or NO_SUMMARY

    # --- response items

    def _response_item(self, item, number, timestamp, where):
        """Reasoning, text or a call of the open response; after its outputs, a new response begins."""
        if self.turn is not None and self.turn.results:
            yield from self._close()
        if self.turn is None:
            message = self._new(number, "assistant", [], timestamp, **self.context)
            self.turn = OpenResponse(message, self.tail, where)
        else:
            self.turn.message["metadata"]["source_lines"].append(number)
        self.turn.message["parts"].extend(self._response_parts(item, number))

    def _response_parts(self, item, number):
        kind = item["type"]
        if kind == "message":
            return content_parts(item.get("content"))
        if kind == "reasoning":
            return [_reasoning(item)]
        if kind == "web_search_call":
            return [_tool_part(f"web_search_{number}", "web_search", input=item.get("action"),
                               output=item.get("status"), state="output-available")]
        call_id, name = item.get("call_id"), item.get("name") or kind.removesuffix("_call")
        if not isinstance(call_id, str):
            return []
        self.tool_names[call_id] = name
        self.turn.calls.add(call_id)
        return [_tool_part(call_id, name, input=_call_input(item), state="input-available")]

    def _output(self, item, number, timestamp, where):
        """A call's output: the next of its response's chain of tool messages; an output whose call is
        not in the open response becomes a user message holding its text."""
        call_id, turn = item.get("call_id"), self.turn
        output, failed = _output(item.get("output"))
        if turn is None or call_id not in turn.calls:
            text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
            yield from self._emit(self._new(number, "user", [{"type": "text", "text": text}], timestamp,
                                            call_id=call_id), where)
            return
        part = _tool_part(call_id, self.tool_names[call_id], output=output,
                          state="output-error" if failed else "output-available")
        turn.results.append(SourceMessage(self._new(number, "tool", [part], timestamp), turn.tail, where))
        turn.answered.add(call_id)

    def _input(self, item, number, timestamp, where):
        parts = content_parts(item.get("content"))
        text = "\n".join(p["text"] for p in parts if p["type"] == "text")
        role, injected = ROLES[item["role"]], text.lstrip().startswith(CONTEXT_PREFIXES)
        message = self._new(number, role, parts, timestamp, codex_context=True if injected else None)
        yield from self._emit(message, where)
        if role == "user" and not injected:
            self.user_turns.append(message["id"])
            self.prompts[message["id"]] = text
            if self.title is None and text.strip():
                self.title = text.strip().splitlines()[0][:80]

    # --- events

    def _token_count(self, info):
        """The usage Codex counted for the response just made, and the session's total so far."""
        if not isinstance(info, dict):
            return  # a count of rate limits only
        for key, name in (("total_token_usage", "token_usage"), ("model_context_window", "model_context_window")):
            if info.get(key) is not None:
                self.metadata[name] = info[key]
        last = info.get("last_token_usage")
        if self.turn is not None and isinstance(last, dict):
            metadata = self.turn.message["metadata"]
            metadata["codex_usage"] = last
            usage = chat_usage(last.get("input_tokens"), last.get("output_tokens"))
            if usage:
                metadata["usage"] = usage

    def _rollback(self, turns):
        """Codex dropped the last ``turns`` user turns: the next line hangs where the first of them began."""
        yield from self._close()
        if not isinstance(turns, int) or turns <= 0 or not self.user_turns:
            return
        dropped = self.user_turns[-turns:]
        del self.user_turns[-turns:]
        self.tail = self.parent_of[dropped[0]]


def _listed(value) -> list:
    return value if isinstance(value, list) else []


def _is_compaction(item):
    return isinstance(item, dict) and item.get("type") in ("compaction", "compaction_summary")


def _latest_within(tokens, texts) -> list[str]:
    """The latest of ``texts`` that fit in ``tokens``, in their order."""
    kept = []
    for text in reversed(texts):
        tokens -= (len(text.encode("utf-8")) + 3) // 4
        if tokens < 0:
            break
        kept.append(text)
    return kept[::-1]


def _reasoning(item):
    """Reasoning as a part: its summary and raw text, and the encrypted content a request sends back."""
    texts = [p["text"] for key in ("summary", "content") for p in _listed(item.get(key))
             if isinstance(p, dict) and isinstance(p.get("text"), str)]
    part = {"type": "reasoning", "text": "\n".join(texts)}
    encrypted = item.get("encrypted_content")
    return {**part, "providerMetadata": {"openai": {"reasoningEncryptedContent": encrypted}}} if encrypted else part


def _tool_part(call_id, name, **fields):
    return {"type": f"tool-{name}", "toolCallId": call_id, "toolName": name, **fields}


def _call_input(item):
    """A function call's arguments (JSON in a string), a custom tool's input text, a shell call's action."""
    if item["type"] == "local_shell_call":
        return item.get("action")
    if item["type"] == "custom_tool_call":
        return item.get("input")
    try:
        return json.loads(item.get("arguments"))
    except (TypeError, ValueError):
        return item.get("arguments")


def _output(output):
    """(output, failed): a text, the text of a list of content items when it is only text, or the items
    as they are; an object ``{content, success}`` (older Codex releases) by its content."""
    if isinstance(output, dict):
        return output.get("content"), output.get("success") is False
    if isinstance(output, list) and all(isinstance(i, dict) and isinstance(i.get("text"), str) for i in output):
        return "\n".join(i["text"] for i in output), False
    return ("" if output is None else output), False


FORMAT = SourceFormat(
    name="codex", label="Codex CLI session rollout (JSONL)", agent_id="codex", detect=_detect, read=_read,
)
