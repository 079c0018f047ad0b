"""Claude Code session transcripts: ``~/.claude/projects/<project>/<session id>.jsonl``.

Each line is an entry. ``user`` and ``assistant`` entries hold an Anthropic message and link into a
tree by ``uuid`` / ``parentUuid``; the message ids are those uuids. The last ``summary`` entry (or
``custom-title``, the name a user gave) titles the session; a ``system`` entry of subtype
``compact_boundary`` marks a compaction. Every other entry (system notes, file snapshots, queue
operations, kinds later releases add) is skipped, counted in the session's ``skipped_entries``, and
its children hang on its parent.

- One file is one session, named by the file's first ``sessionId``: a resumed conversation whose
  file starts with the entries it continues stays one history, and a subagent's file, which carries
  its parent's ``sessionId``, joins that session as a tree of its own (uuids are unique everywhere,
  so any file with that ``sessionId`` is the same session). Each message keeps its entry's
  ``sessionId`` in its metadata.
- Claude Code writes one model response as one entry per content block, sharing ``message.id``.
  They become one assistant message (the first entry's uuid), so parallel tool calls sit on one
  message as a request needs them, and their results, which Claude Code hangs on the entries of
  their calls, follow it as a chain of ``tool`` messages.
- The file's last response, while it has calls without results, is still being written: it is left
  for the next import. A call the conversation moved past unanswered is closed as an error.
- A compaction (the boundary, then a user entry with ``isCompactSummary``) becomes an overlay from
  the first message of the path to the boundary's ``logicalParentUuid`` (the newest entry before the
  boundary when no entry has that uuid), and the newer entries hang on that message: the history
  reads the summary, then what followed. When the file holds nothing before the boundary (a
  compaction that began a new file), the summary is kept as a message instead.
- An entry whose parent is not in the file hangs on that message when the session already holds it
  (a subagent's or the compaction agent's file, going on from the main transcript imported before)
  and otherwise starts a new root (a file cut at its start); a tool result whose call is not in the
  file becomes a user message holding the result's text.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from ..messages import is_tool_part
from .formats import SourceFormat, SourceProbe
from .source import (
    OpenResponse,
    SourceMessage,
    SourceOverlay,
    SourceSession,
    StoredParent,
    chat_usage,
    json_lines,
    malformed_at,
    source_error,
)

TITLES = {"custom-title": "customTitle", "summary": "summary"}
"""Entry kinds that name the session, by the field holding the name; a name the user gave wins."""
CONTEXT = {"cwd": "cwd", "gitBranch": "git_branch", "version": "claude_code_version"}
"""Entry fields kept, as first seen, in the session's metadata."""
UNANSWERED = "Claude Code recorded no result for this call"


def _detect(probe: SourceProbe) -> bool:
    entries = probe.json_lines
    if not entries:  # a first line longer than the probe
        head = (probe.text or "").lstrip()
        return head.startswith("{") and '"parentUuid"' in head and '"sessionId"' in head
    return all(isinstance(e, dict) and isinstance(e.get("type"), str) for e in entries) and any(
        {"sessionId", "parentUuid", "leafUuid"} & e.keys() for e in entries)


def _read(path: Path):
    transcript = _Transcript(path)
    session = SourceSession(source_id=_first_session_id(path) or path.stem, messages=(),
                            overlays=transcript.overlays, metadata=transcript.context, opening_span=0)
    session.messages = transcript.messages(session)
    yield session


def _first_session_id(path):
    """The ``sessionId`` of the file's first entry that has one (usually the first line)."""
    return next((entry["sessionId"] for _, entry in _entries(path) if isinstance(entry.get("sessionId"), str)), None)


def _entries(path):
    """(line number, entry) for each non-empty line; a line that is not a JSON object is refused."""
    for number, entry in json_lines(path):
        if not isinstance(entry, dict):
            raise source_error(path, f"line {number}", "expected a transcript entry (a JSON object), "
                                                       f"got {type(entry).__name__}")
        yield number, entry


def _is_boundary(entry):
    return entry.get("type") == "system" and entry.get("subtype") == "compact_boundary"


class _Transcript:
    """Reads one file's entries into messages in one pass; fills ``overlays`` as it goes."""

    def __init__(self, path):
        self.path = path
        self.overlays: list[SourceOverlay] = []
        self.tails: dict[str, str | None] = {}  # entry uuid -> the message its children hang on
        self.roots: dict[str, str] = {}  # message id -> the first message of its path
        self.turn_of: dict[str, str] = {}  # response or result id -> the response's id
        self.last: dict[str, str] = {}  # response id -> its last result (or itself)
        self.tool_names: dict[str, str] = {}  # call id -> tool name
        self.open: dict[str, OpenResponse] = {}  # responses not written yet, by id
        self.boundaries: dict[str, tuple] = {}  # compact boundary uuid -> (message it follows, entry)
        self.newest: str | None = None  # uuid of the newest entry read that has one
        self.context: dict = {}  # the session's metadata: CONTEXT fields, skipped entry counts
        self.titles: dict[str, str] = {}
        self.skipped = Counter()

    def messages(self, session):
        """The messages, in an order the writer can take; at the end, ``session`` gets its title and
        ``context`` its skipped entries."""
        for number, entry in _entries(self.path):
            where = f"line {number}"
            with malformed_at(self.path, where, "a Claude Code transcript entry"):
                yield from self._entry(entry, where)
        for turn in list(self.open.values()):
            if turn.calls <= turn.answered:
                yield from self._close(turn)
        session.title = self.titles.get("custom-title") or self.titles.get("summary")
        if self.skipped:
            self.context["skipped_entries"] = dict(self.skipped)

    def _entry(self, entry, where):
        kind = entry.get("type")
        self._note(entry, kind)
        if kind == "assistant":
            yield from self._assistant(entry, where)
        elif kind == "user":
            yield from self._user(entry, where)
        elif _is_boundary(entry):
            yield from self._boundary(entry)
        elif isinstance(entry.get("uuid"), str):
            self.tails[entry["uuid"]] = self._parent(entry.get("parentUuid"))
        if isinstance(entry.get("uuid"), str):
            self.newest = entry["uuid"]

    def _note(self, entry, kind):
        """What the session's metadata keeps of an entry: a title, its context, or that it was skipped."""
        if kind in TITLES and isinstance(entry.get(TITLES[kind]), str):
            self.titles[kind] = entry[TITLES[kind]]
        elif kind not in ("user", "assistant") and not _is_boundary(entry):
            self.skipped[f"{kind}/{entry['subtype']}" if entry.get("subtype") else str(kind)] += 1
        for key, name in CONTEXT.items():
            if entry.get(key):
                self.context.setdefault(name, entry[key])

    def _parent(self, uuid):
        """The message an entry hangs on: the parent's own, or the end of its response's results; a
        parent in no entry of the file is looked up in the store."""
        if not isinstance(uuid, str):
            return None
        if uuid not in self.tails:
            return StoredParent(uuid)
        found = self.tails[uuid]
        turn_id = self.turn_of.get(found)
        return self.last[turn_id] if turn_id else found

    def _open_turn(self, message_id):
        return self.open.get(self.turn_of.get(message_id))

    def _content(self, entry, where):
        """The content blocks of a user or assistant entry, once it is known to be one."""
        if not isinstance(entry.get("uuid"), str) or not isinstance(entry.get("message"), dict):
            raise source_error(self.path, where, f"expected a 'uuid' and a 'message' object in this "
                                                 f"{entry['type']} entry")
        content = entry["message"].get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}] if content else []
        if not isinstance(content, list) or not all(isinstance(b, dict) for b in content):
            raise source_error(self.path, where, "expected message.content to be a string or a list of "
                                                 "content blocks")
        return content

    def _place(self, message_id, parent):
        self.tails[message_id] = message_id
        self.roots[message_id] = self.roots.get(parent, message_id)

    def _emit(self, message, parent, where):
        turn = self._open_turn(parent)
        if turn:
            yield from self._close(turn)
        self._place(message["id"], parent)
        yield SourceMessage(message, parent, where)

    def _close(self, turn):
        del self.open[turn.id]
        for part in turn.message["parts"]:
            if is_tool_part(part) and part["toolCallId"] in turn.calls - turn.answered:
                part.update(state="output-error", output=UNANSWERED)
        yield SourceMessage(turn.message, turn.parent, turn.where)
        yield from turn.results

    def _assistant(self, entry, where):
        content = self._content(entry, where)
        uuid = entry["uuid"]
        parent = self._parent(entry.get("parentUuid"))
        turn = self._open_turn(parent)
        response_id = entry["message"].get("id")
        if turn and response_id and turn.message["metadata"].get("response_id") == response_id:
            self._add_blocks(turn, content)
            metadata = turn.message["metadata"]
            metadata.update({k: v for k, v in _metadata(entry).items()
                             if k in ("usage", "anthropic_usage", "stop_reason")})
            metadata.setdefault("source_ids", [turn.id]).append(uuid)
            self.tails[uuid] = turn.id
            return
        if turn:
            yield from self._close(turn)
        turn = OpenResponse(_message(entry, "assistant", []), parent, where)
        self._add_blocks(turn, content)
        self.open[uuid] = turn
        self.turn_of[uuid] = self.last[uuid] = uuid
        self._place(uuid, parent)

    def _add_blocks(self, turn, blocks):
        parts = turn.message["parts"]
        for block in blocks:
            kind = block.get("type")
            if kind in ("tool_use", "server_tool_use"):
                self.tool_names[block.get("id")] = name = block.get("name") or ""
                parts.append({"type": f"tool-{name}" if name else "dynamic-tool", "toolCallId": block.get("id"),
                              "toolName": name, "input": block.get("input"), "state": "input-available"})
                if kind == "tool_use":  # a server tool's result comes in the same response
                    turn.calls.add(block.get("id"))
            elif (call := _call(parts, block.get("tool_use_id"))) is not None:
                call.update(output=block.get("content"), state="output-available")
            else:
                parts.append(_part(block))

    def _user(self, entry, where):
        content = self._content(entry, where)
        if entry.get("isCompactSummary") and self._summarize(entry, content, where):
            return
        parent = self._parent(entry.get("parentUuid"))
        results = [b for b in content if b.get("type") == "tool_result"]
        if any(b.get("tool_use_id") in self.tool_names for b in results):
            yield from self._results(entry, content, parent, where)
        else:
            yield from self._emit(_message(entry, "user", [_part(b) for b in content]), parent, where)

    def _results(self, entry, content, parent, where):
        message = _message(entry, "tool", [self._result(b) if b.get("type") == "tool_result" else _part(b)
                                           for b in content])
        calls = {b.get("tool_use_id") for b in content if b.get("type") == "tool_result"}
        turn = self._open_turn(parent)
        if turn and calls <= turn.calls:  # wait with the response, which may gain blocks yet
            self._place(message["id"], parent)
            turn.results.append(SourceMessage(message, parent, where))
            turn.answered |= calls
        else:
            yield from self._emit(message, parent, where)
        if self.turn_of.get(parent):
            self.turn_of[message["id"]] = turn_id = self.turn_of[parent]
            self.last[turn_id] = message["id"]

    def _result(self, block):
        call = block.get("tool_use_id")
        name = self.tool_names[call]
        return {"type": f"tool-{name}" if name else "dynamic-tool", "toolCallId": call, "toolName": name,
                "output": _output(block.get("content")),
                "state": "output-error" if block.get("is_error") else "output-available"}

    def _boundary(self, entry):
        """Claude Code names the message a compaction follows in ``logicalParentUuid``, at times a uuid
        written nowhere: the compaction then follows the newest entry before it."""
        named = entry.get("logicalParentUuid")
        logical = self._parent(named if isinstance(named, str) and named in self.tails else self.newest)
        turn = self._open_turn(logical)
        if turn:
            yield from self._close(turn)
        if isinstance(entry.get("uuid"), str):
            self.tails[entry["uuid"]] = logical
            self.boundaries[entry["uuid"]] = (logical, entry)

    def _summarize(self, entry, content, where) -> bool:
        """The summary after a compact boundary as an overlay over the path it replaced, when the
        path is in the file."""
        to_id, boundary = self.boundaries.get(entry.get("parentUuid"), (None, None))
        if to_id not in self.roots:
            return False
        facts = boundary.get("compactMetadata") or {}
        metadata = {"source_id": entry["uuid"], "boundary_id": boundary["uuid"],
                    "created_at": boundary.get("timestamp"), "trigger": facts.get("trigger"),
                    "pre_tokens": facts.get("preTokens")}
        summary = "\n".join(b.get("text") or "" for b in content if b.get("type") == "text")
        self.overlays.append(SourceOverlay(self.roots[to_id], to_id, summary,
                                           {k: v for k, v in metadata.items() if v is not None}, where))
        self.tails[entry["uuid"]] = to_id
        return True


def _message(entry, role, parts):
    return {"id": entry["uuid"], "role": role, "parts": parts, "created_at": entry.get("timestamp"),
            "metadata": _metadata(entry)}


def _metadata(entry):
    message = entry["message"]
    facts = {
        "source_id": entry["uuid"], "session_id": entry.get("sessionId"), "sidechain": entry.get("isSidechain") or None,
        "agent_id": entry.get("agentId"), "is_meta": entry.get("isMeta") or None,
        "compact_summary": entry.get("isCompactSummary") or None, "model": message.get("model"),
        "response_id": message.get("id"), "request_id": entry.get("requestId"), "usage": _usage(message.get("usage")),
        "anthropic_usage": message.get("usage"),
        "stop_reason": message.get("stop_reason"),
    }
    return {key: value for key, value in facts.items() if value is not None}


def _usage(usage):
    """Anthropic counts cached input apart from the rest; the prompt's tokens are all three."""
    if not isinstance(usage, dict):
        return None
    prompt = [usage.get(k) for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")]
    prompt = [n for n in prompt if isinstance(n, int)]
    return chat_usage(sum(prompt) if prompt else None, usage.get("output_tokens"))


def _part(block):
    """A content block as a part: text and thinking in the parts shape, a result whose call is not in
    the file as its text, anything else as Claude Code wrote it."""
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "text": block.get("text")}
    if kind == "thinking":
        part = {"type": "reasoning", "text": block.get("thinking")}
        return {**part, "providerMetadata": {"anthropic": {"signature": block["signature"]}}} if block.get(
            "signature") else part
    if kind == "redacted_thinking":
        return {"type": "reasoning", "text": "", "providerMetadata": {"anthropic": {"redactedData": block.get("data")}}}
    if kind == "tool_result":
        output = _output(block.get("content"))
        return {"type": "text", "text": output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)}
    return dict(block)


def _call(parts, call_id):
    """The tool part of ``call_id`` among ``parts`` (a server tool's result names its call), or None."""
    return next((p for p in parts if call_id is not None and p.get("toolCallId") == call_id), None)


def _output(content):
    """A tool result's content: its text when it is only text, else the blocks as they are."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list) and all(isinstance(b, dict) and b.get("type") == "text" for b in content):
        return "\n".join(b.get("text") or "" for b in content)
    return content


FORMAT = SourceFormat(
    name="claude-code", label="Claude Code session transcript (JSONL)", agent_id="claude-code",
    detect=_detect, read=_read,
)
