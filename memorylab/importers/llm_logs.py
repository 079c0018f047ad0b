"""Simon Willison's ``llm`` logs database (``logs.db``), in both the layouts llm has written.

Up to 0.31, llm logs each model call as a ``responses`` row (prompt, system, response, model, usage,
``datetime_utc``) of a ``conversations`` row, with the tool calls it asked for in ``tool_calls`` and
the results it was sent in ``tool_results``. From 0.32 (0.36 here) it writes a content-addressed
message store instead: ``messages`` keyed by a hash over their content and their parent's hash,
their ``parts`` (text, reasoning, tool_call, tool_result, attachment), ``turns`` (one model call:
the message it was given, the tip it added, model, usage, timing) and ``threads`` (a named pointer
at a tip; a fork is a thread ``forked_from`` another). It keeps the old tables but no longer writes
them, so a database that outlived the upgrade holds both.

Each conversation or thread becomes a session with its id and name; another database's thread of
the same id (llm takes one from its caller) is told apart by its first message's time. A legacy
response gives, in order: a tool message with the tool results it sent, a system message when its system prompt
differs from the one in effect (llm sent it with every prompt; the history holds it once), a user
message (its fragments, prompt and attachments) and an assistant message (reasoning, text, tool
calls); ids are ``<response id>#results|#system|#prompt|#response``. A stored message keeps its
hash as its id, so the messages a fork shares with its thread are the same messages and the fork's
own ones become a branch of that thread's session. Attachments become ``file`` parts naming llm's
attachment (its bytes stay in llm's database). A conversation in both
layouts (continued after the upgrade) is imported once: its responses, then its thread from the
first turn on, hung under the last legacy message; the thread's rebuilt copy of the older history
is skipped, so the ids a pre-upgrade import gave stay valid.

Assistant messages carry ``model``, ``usage`` (``prompt_tokens``, ``completion_tokens``,
``total_tokens``, as memorylab's own chat records it), ``token_details``, ``latency_ms`` (llm's
``duration_ms``) and the call's id; every message carries ``source_id`` and ``created_at`` from
``datetime_utc`` (naive values, as early releases wrote them, are UTC). Rows are read through cursors.
"""
from __future__ import annotations

import sqlite3
from contextlib import closing
from datetime import datetime, timezone
from itertools import chain, groupby
from operator import itemgetter

from ..messages import to_utc_iso
from .formats import SourceFormat, SourceProbe, open_readonly
from .source import SourceMessage, SourceSession, chat_usage, loads, malformed_at, source_error

LEGACY_ID = "coalesce(r.conversation_id, r.id)"
"""The conversation a legacy response belongs to: a response logged outside any is one of its own."""

RESPONSE_COLUMNS = ("id", "model", "resolved_model", "prompt", "system", "options_json", "response", "reasoning",
                    "conversation_id", "duration_ms", "datetime_utc", "input_tokens", "output_tokens", "token_details")
"""The columns of ``responses`` read, where the release that wrote it had them (not its JSON payloads)."""

ATTACHMENTS = """(SELECT json_group_array(attachment_id) FROM (
    SELECT attachment_id FROM prompt_attachments WHERE response_id = r.id ORDER BY "order"))"""

LINEAGE = """WITH RECURSIVE lineage(id) AS (
    SELECT :root UNION SELECT t.id FROM threads t JOIN lineage l ON t.forked_from = l.id)"""
"""A thread and every thread forked from it, at any depth (UNION stops a damaged loop)."""


def _detect(probe: SourceProbe) -> bool:
    tables = probe.tables
    return "_llm_migrations" in tables and ("responses" in tables or "turns" in tables)


def _read(path):
    try:
        with closing(open_readonly(path)) as conn:
            conn.row_factory = sqlite3.Row
            yield from _LogsDatabase(path, conn).sessions()
    except sqlite3.Error as error:
        raise source_error(path, "", f"cannot read it as an llm logs database ({error})") from None


class _LogsDatabase:
    def __init__(self, path, conn):
        self.path = path
        self.conn = conn
        self.tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}

    def sessions(self):
        if "responses" in self.tables:
            yield from self._conversations()
        if "turns" in self.tables:
            yield from self._threads()

    # -- the legacy layout: conversations and responses ---------------------------------------

    def _conversations(self):
        rows = map(dict, self.conn.execute(self._responses_sql()))
        # The writer reads each session's messages before it asks for the next session, as groupby needs.
        for session_id, responses in groupby(rows, key=itemgetter("session_id")):
            first = next(responses)
            metadata = {"model": first["conversation_model"]} if first["conversation_model"] else {}
            yield SourceSession(source_id=session_id, title=first["conversation_name"], metadata=metadata,
                                messages=self._conversation_messages(session_id, chain([first], responses)),
                                opening_span=1)

    def _responses_sql(self):
        """Every response with what it was sent and asked for, a conversation's rows together, oldest
        first (by id, as llm reads them back); the large JSON columns are left out of the sort."""
        present = self._columns("responses")
        columns = ", ".join(f"r.{c}" for c in RESPONSE_COLUMNS if c in present)
        calls = self._grouped("tool_calls", "name", "arguments", "tool_call_id")
        results = self._grouped("tool_results", "name", "output", "tool_call_id", "exception")
        fragments = {"prompt_fragments", "system_fragments", "fragments"} <= self.tables
        attachments = {"prompt_attachments", "attachments"} <= self.tables
        return f"""
            SELECT {columns}, {LEGACY_ID} AS session_id, c.name AS conversation_name, c.model AS conversation_model,
                   {self._fragments("prompt_fragments") if fragments else "NULL"} AS prompt_fragment_list,
                   {self._fragments("system_fragments") if fragments else "NULL"} AS system_fragment_list,
                   {ATTACHMENTS if attachments else "NULL"} AS attachment_list,
                   {"calls.list" if calls else "NULL"} AS tool_call_list,
                   {"results.list" if results else "NULL"} AS tool_result_list
            FROM responses r
            LEFT JOIN conversations c ON c.id = r.conversation_id
            {f"LEFT JOIN ({calls}) calls ON calls.response_id = r.id" if calls else ""}
            {f"LEFT JOIN ({results}) results ON results.response_id = r.id" if results else ""}
            ORDER BY {LEGACY_ID}, r.id"""

    def _columns(self, table):
        return {r["name"] for r in self.conn.execute("SELECT name FROM pragma_table_info(?)", (table,))}

    def _grouped(self, table, *columns):
        """Each response's rows of a tool table as one JSON list: grouped once, then joined, since
        llm gives these tables no index on ``response_id``."""
        if table not in self.tables:
            return None
        present = self._columns(table)
        fields = ", ".join(f"'{c}', {c}" for c in ("id", *columns) if c in present)
        return (f"SELECT response_id, json_group_array(json_object({fields})) AS list"
                f" FROM (SELECT * FROM {table} ORDER BY response_id, id) GROUP BY response_id")

    @staticmethod
    def _fragments(table):
        return f"""(SELECT json_group_array(content) FROM (
            SELECT f.content FROM {table} x JOIN fragments f ON f.id = x.fragment_id
            WHERE x.response_id = r.id ORDER BY x."order"))"""

    def _conversation_messages(self, session_id, responses):
        call_ids, system, last = _CallIds(), None, None
        for row in responses:
            where = f"responses row {row['id']}"
            with malformed_at(self.path, where, "a response as llm logs it"):
                for message in self._response_messages(row, call_ids, system):
                    if message["role"] == "system":
                        system = message["parts"][0]["text"]
                    last = message["id"]
                    yield SourceMessage(message, where=where)
        if "threads" in self.tables and self.conn.execute("SELECT 1 FROM threads WHERE id = ?",
                                                          (session_id,)).fetchone():
            yield from self._thread_messages(session_id, after=last)

    def _response_messages(self, row, call_ids, system_in_effect):
        where = f"responses row {row['id']}"
        created_at = self._timestamp(row["datetime_utc"], where)

        def message(suffix, role, parts, **metadata):
            return {"id": f"{row['id']}#{suffix}", "role": role, "parts": parts, "created_at": created_at,
                    "metadata": {"source_id": row["id"], **metadata}}

        results = self._json(row["tool_result_list"], where, "its tool results") or []
        if results:
            yield message("results", "tool", [
                _tool_result(r["name"], call_ids.of_result(r.get("tool_call_id"), r["name"], f"result-{r['id']}"),
                             r.get("output"), r.get("exception"))
                for r in results
            ])
        system_fragments = self._json(row["system_fragment_list"], where, "its system fragments") or []
        system = "\n\n".join(bit.strip() for bit in [*system_fragments, row["system"] or ""] if bit.strip())
        if system and system != system_in_effect:
            yield message("system", "system", [{"type": "text", "text": system}])
        prompt_fragments = self._json(row["prompt_fragment_list"], where, "its prompt fragments") or []
        prompt = "\n".join([*prompt_fragments, *([row["prompt"]] if row["prompt"] else [])])
        attachments = self._json(row["attachment_list"], where, "its attachments") or []
        if prompt or attachments:
            yield message("prompt", "user", [*([{"type": "text", "text": prompt}] if prompt else []),
                                             *map(self._attachment, attachments)])
        parts = [{"type": "reasoning", "text": row["reasoning"]}] if row.get("reasoning") else []
        if row["response"]:
            parts.append({"type": "text", "text": row["response"]})
        for call in self._json(row["tool_call_list"], where, "its tool calls") or []:
            call_where = f"tool_calls row {call['id']}"
            call_id = call_ids.of_call(call.get("tool_call_id"), call["name"], f"call-{call['id']}")
            parts.append(_tool_call(call["name"], call_id, self._json(call.get("arguments"), call_where, "arguments")))
        yield message("response", "assistant", parts, response_id=row["id"], **self._call_facts(row, where))

    # -- the current layout: threads, turns, messages and parts -------------------------------

    def _threads(self):
        roots = self.conn.execute(f"""
            SELECT id, name FROM threads
            WHERE (forked_from IS NULL OR forked_from NOT IN (SELECT id FROM threads))
              {"AND id NOT IN (SELECT " + LEGACY_ID + " FROM responses r)" if "responses" in self.tables else ""}
            ORDER BY id""")
        for root in roots:
            yield SourceSession(source_id=root["id"], title=root["name"], messages=self._thread_messages(root["id"]),
                                opening_span=1)

    def _thread_messages(self, root, after=None):
        """The messages of a thread and its forks, each once and after its parent: every turn's chain
        in the order they were logged, then each thread's tip (messages appended without a turn).
        ``after`` is the id of the last legacy message of the same conversation: the thread's copy of
        that history, everything above its first turn's own input, stands for it."""
        ids = {}  # message hash -> memorylab id, for every message given so far
        call_ids = _CallIds()
        if after is not None:
            first = self.conn.execute("SELECT id, parent_message_hash FROM turns WHERE thread_id = ? "
                                      "ORDER BY id LIMIT 1", (root,)).fetchone()
            if first is not None:
                rebuilt = self._history_before_input(first["parent_message_hash"], f"turns row {first['id']}")
                if rebuilt is not None:
                    ids[rebuilt] = after
        for turn in map(dict, self.conn.execute(f"{LINEAGE} SELECT * FROM turns WHERE thread_id IN lineage ORDER BY id",
                                                {"root": root})):
            where = f"turns row {turn['id']}"
            segment = self._unseen_chain(turn["tip_message_hash"], ids, where)
            hashes = [row["hash"] for row in segment]
            start = hashes.index(turn["parent_message_hash"]) + 1 if turn["parent_message_hash"] in hashes else 0
            created_at = self._timestamp(turn["datetime_utc"], where)
            for index, row in enumerate(segment):
                facts = {}
                if index >= start:
                    facts = {"model": turn["model"], "turn_id": turn["id"], "thread_id": turn["thread_id"]}
                    if index == len(segment) - 1:  # the call's usage and timing, once, on what it ended with
                        facts.update(self._call_facts(turn, where))
                yield self._stored_message(row, ids, call_ids, created_at, facts)
        for thread in self.conn.execute(f"{LINEAGE} SELECT * FROM threads WHERE id IN lineage ORDER BY id",
                                        {"root": root}):
            where = f"threads row {thread['id']}"
            created_at = self._timestamp(thread["datetime_utc"], where)
            for row in self._unseen_chain(thread["tip_message_hash"], ids, where):
                yield self._stored_message(row, ids, call_ids, created_at, {"thread_id": thread["id"]})

    def _message_row(self, message_hash, where):
        row = self.conn.execute("SELECT hash, parent_hash, role FROM messages WHERE hash = ?",
                                (message_hash,)).fetchone()
        if row is None:
            raise source_error(self.path, where, f"expected message {message_hash!r} in the messages table")
        return row

    def _unseen_chain(self, tip, ids, where):
        """The messages from the newest already given (excluded) down to ``tip``, oldest first."""
        found, walked = [], set()
        while tip is not None and tip not in ids:
            if tip in walked:
                raise source_error(self.path, f"messages row {tip}", "expected a chain of parents, found a loop")
            walked.add(tip)
            row = self._message_row(tip, where)
            found.append(row)
            where, tip = f"messages row {tip}", row["parent_hash"]
        return found[::-1]

    def _history_before_input(self, parent, where):
        """The message above a turn's own input (the user and tool messages that end what it was given)."""
        while parent is not None:
            row = self._message_row(parent, where)
            if row["role"] not in ("user", "tool"):
                return parent
            where, parent = f"messages row {parent}", row["parent_hash"]
        return None

    def _stored_message(self, row, ids, call_ids, created_at, facts):
        where = f"messages row {row['hash']}"
        with malformed_at(self.path, where, "a message as llm stores it"):
            return self._message_with_parts(row, ids, call_ids, created_at, facts, where)

    def _message_with_parts(self, row, ids, call_ids, created_at, facts, where):
        if row["role"] not in ("system", "user", "assistant", "tool"):
            raise source_error(self.path, where, f"expected role system, user, assistant or tool, got {row['role']!r}")
        parts = []
        for part in self.conn.execute("SELECT id, type, text, payload FROM parts WHERE message_hash = ? "
                                      "ORDER BY position", (row["hash"],)):
            converted = self._stored_part(part, call_ids)
            if converted is None:
                continue
            paired = [p for p in parts if "output" in converted and p.get("toolCallId") == converted["toolCallId"]]
            if paired:  # a result the provider ran itself, in the message that made the call
                paired[0].update({k: converted[k] for k in ("output", "state", "errorText") if k in converted})
            else:
                parts.append(converted)
        ids[row["hash"]] = row["hash"]
        message = {"id": row["hash"], "role": row["role"], "parts": parts, "created_at": created_at,
                   "metadata": {"source_id": row["hash"], **facts}}
        return SourceMessage(message, parent_id=ids.get(row["parent_hash"]), where=where)

    def _stored_part(self, part, call_ids):
        where = f"parts row {part['id']}"
        with malformed_at(self.path, where, "a part as llm stores it"):
            return self._part(part, call_ids, where)

    def _part(self, part, call_ids, where):
        payload = self._json(part["payload"], where, "payload") or {}
        if not isinstance(payload, dict):
            raise source_error(self.path, where, "expected a JSON object as payload")
        text = part["text"] if part["text"] is not None else self._text_of(payload, where)
        kind = part["type"]
        if kind == "text":
            return {"type": "text", "text": text or ""}
        if kind == "reasoning":  # redacted reasoning (a provider that withholds it) leaves nothing to keep
            return {"type": "reasoning", "text": text} if text else None
        name = payload.get("name") or ""
        if kind == "tool_call":
            extra = {"providerExecuted": True} if payload.get("server_executed") else {}
            call_id = call_ids.of_call(payload.get("tool_call_id"), name, f"part-{part['id']}")
            return _tool_call(name, call_id, payload.get("arguments", {}), **extra)
        if kind == "tool_result":
            call_id = call_ids.of_result(payload.get("tool_call_id"), name, f"part-{part['id']}")
            return _tool_result(name, call_id, payload.get("output"), payload.get("exception"))
        if kind == "attachment":
            return self._attachment((payload.get("attachment") or {}).get("id"))
        raise source_error(self.path, where, f"expected a part of type text, reasoning, tool_call, tool_result or "
                                             f"attachment, got {kind!r}")

    def _text_of(self, payload, where):
        """Text stored as fragment references and literals, put back together."""
        pieces = payload.get("text_ref")
        if pieces is None:
            return payload.get("text")
        text = []
        for piece in pieces:
            if "literal" in piece:
                text.append(piece["literal"])
                continue
            found = self.conn.execute("SELECT content FROM fragments WHERE id = ?", (piece.get("fragment"),)).fetchone()
            if found is None:
                raise source_error(self.path, where,
                                   f"expected fragment {piece.get('fragment')!r} in the fragments table")
            text.append(found["content"])
        return "".join(text)

    def _attachment(self, attachment_id):
        """A file part naming the attachment; its bytes stay in llm's database."""
        row = self.conn.execute("SELECT type, url, path FROM attachments WHERE id = ?", (attachment_id,)).fetchone()
        part = {"type": "file", "attachmentId": attachment_id}
        if row is not None:
            part.update({k: v for k, v in (("mediaType", row["type"]), ("url", row["url"] or row["path"])) if v})
        return part

    # -- what both layouts record about a call -------------------------------------------------

    def _call_facts(self, row, where):
        """Model, usage and timing of a responses or turns row (older releases lack some columns)."""
        facts = {"model": row["model"]}
        if row.get("resolved_model"):
            facts["resolved_model"] = row["resolved_model"]
        usage = chat_usage(row.get("input_tokens"), row.get("output_tokens"))
        if usage:
            facts["usage"] = usage
        if row.get("token_details"):
            facts["token_details"] = self._json(row["token_details"], where, "token_details")
        if row.get("duration_ms") is not None:
            facts["latency_ms"] = row["duration_ms"]
        options = self._json(row.get("options_json"), where, "options_json")
        if options:
            facts["options"] = options
        return facts

    def _json(self, value, where, what):
        if value is None or value == "":
            return None
        try:
            return loads(value)
        except (TypeError, ValueError):
            raise source_error(self.path, where, f"expected JSON in {what}, got {str(value)[:80]!r}") from None

    def _timestamp(self, value, where):
        if value is None:
            return None
        try:
            moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            raise source_error(self.path, where, f"expected an ISO-8601 datetime_utc, got {value!r}") from None
        return to_utc_iso(moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc))


class _CallIds:
    """Ids for tool calls logged without one (plugins that got none from their provider): made from the
    call's row, and handed to the next id-less result of the same tool, so the two still pair."""

    def __init__(self):
        self.waiting = []

    def of_call(self, call_id, name, place):
        if call_id:
            return call_id
        self.waiting.append((name, f"llm-{place}"))
        return f"llm-{place}"

    def of_result(self, call_id, name, place):
        if call_id:
            return call_id
        for index, (waiting_name, made) in enumerate(self.waiting):
            if waiting_name == name:
                del self.waiting[index]
                return made
        return f"llm-{place}"


def _tool_call(name, call_id, arguments, **extra):
    return {"type": f"tool-{name}" if name else "dynamic-tool", "toolCallId": call_id, "toolName": name,
            "input": arguments, "state": "input-available", **extra}


def _tool_result(name, call_id, output, exception):
    part = {"type": f"tool-{name}" if name else "dynamic-tool", "toolCallId": call_id, "toolName": name,
            "output": output, "state": "output-error" if exception else "output-available"}
    if exception:
        part["errorText"] = exception
    return part


FORMAT = SourceFormat(
    name="llm", label="llm logs databases (logs.db, both the responses and the threads layout)",
    agent_id="llm", detect=_detect, read=_read,
)
