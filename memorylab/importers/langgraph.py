"""LangGraph checkpoints written by ``SqliteSaver``: each thread a session, each fork a branch.

Every checkpoint holds its thread's whole ``messages`` channel at that step, so each checkpoint is
one root-to-leaf path. The paths are merged into a tree: a message (its LangChain id and content)
under the same parent is one node however many checkpoints repeat it, the messages of a run resumed
from an earlier checkpoint (a fork, an ``update_state``) form a sibling branch, and a message edited
on a fork is a node of its own. Only the root namespace is read; subgraphs' checkpoints are inner steps.
Another database's thread of the same id is told apart by its first message (its checkpoint's id).

Blobs are decoded by LangGraph's own serializer, limited to its safe types: an imported file is not
trusted, and the permissive default would import and call whatever class a blob names.
"""
from __future__ import annotations

import hashlib
import json
import sqlite3

from ..errors import ImportFormatError
from .formats import SourceFormat, SourceProbe, open_readonly
from .source import SourceMessage, SourceSession, chat_usage, malformed_at, source_error

CHANNEL = "messages"
CHECKPOINT_COLUMNS = {"thread_id", "checkpoint_ns", "checkpoint_id", "type", "checkpoint"}
ROLES = {"human": "user", "user": "user", "ai": "assistant", "assistant": "assistant", "system": "system",
         "developer": "system", "tool": "tool", "function": "tool"}
TOOL_CALL_BLOCKS = {"tool_use", "tool_call", "function_call", "server_tool_call"}
"""Content blocks that repeat an AIMessage's ``tool_calls``, which are read instead."""



def _detect(probe: SourceProbe) -> bool:
    if not {"checkpoints", "writes"} <= probe.tables:
        return False
    try:
        conn = open_readonly(probe.path)
        try:
            columns = {row[1] for row in conn.execute("PRAGMA table_info(checkpoints)")}
        finally:
            conn.close()
    except sqlite3.Error:
        return False
    return CHECKPOINT_COLUMNS <= columns


def _langchain():
    """LangGraph's serializer (safe types only) and LangChain's message coercion, or a clear refusal."""
    try:
        from langchain_core.messages import BaseMessage, convert_to_messages
        from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
    except ImportError as error:
        raise ImportFormatError(
            f"reading LangGraph checkpoints needs LangGraph's serializer ({error}); "
            "install it with: pip install langgraph-checkpoint-sqlite"
        ) from None
    return JsonPlusSerializer(allowed_msgpack_modules=None), BaseMessage, convert_to_messages


def _read(path):
    library = _langchain()
    conn = open_readonly(path)
    try:
        threads = conn.execute("SELECT DISTINCT thread_id FROM checkpoints WHERE checkpoint_ns = '' ORDER BY thread_id")
        for (thread_id,) in threads:
            yield SourceSession(source_id=str(thread_id), messages=_Thread(path, thread_id, library).messages(conn),
                                opening_span=1)
    except sqlite3.Error as error:
        raise source_error(path, "checkpoints table", f"a readable SqliteSaver table ({error})") from None
    finally:
        conn.close()


class _Thread:
    """One thread's message tree, grown one checkpoint's path at a time.

    ``nodes`` maps (parent node id, LangChain id) to the variants seen there, each a LangChain message
    and its node id: a repeated message is recognised by comparison, and converted only once.
    """

    def __init__(self, path, thread_id, library):
        self.path, self.thread_id = path, thread_id
        self.serializer, self.base_message, self.convert_to_messages = library
        self.nodes: dict[tuple, list] = {}
        self.ids: set[str] = set()
        self.tool_names: dict[str, str] = {}

    def messages(self, conn):
        rows = conn.execute(
            "SELECT checkpoint_id, type, checkpoint FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = '' "
            "ORDER BY checkpoint_id", (self.thread_id,))
        try:
            for checkpoint_id, kind, blob in rows:
                where = f"thread {str(self.thread_id)!r}, checkpoint {checkpoint_id!r}"
                with malformed_at(self.path, where, "a checkpoint of LangChain messages"):
                    checkpoint = self._decode(kind, blob, where)
                    path = self._path(checkpoint, where)
                    if path is not None:
                        yield from self._walk(path, {"checkpoint_id": checkpoint_id, "ts": checkpoint.get("ts")},
                                              where)
        except sqlite3.Error as error:
            raise source_error(self.path, f"checkpoints of thread {str(self.thread_id)!r}",
                               f"a readable SqliteSaver table ({error})") from None

    def _decode(self, kind, blob, where):
        try:
            checkpoint = self.serializer.loads_typed((kind, blob))
        except Exception as error:  # noqa: BLE001 - a damaged blob raises whatever the decoder trips over
            raise source_error(self.path, where, f"a checkpoint LangGraph's serializer can read ({kind!r}: "
                                                 f"{type(error).__name__}: {error})") from None
        if not isinstance(checkpoint, dict) or not isinstance(checkpoint.get("channel_values"), dict):
            raise source_error(self.path, where, "a checkpoint holding channel_values")
        return checkpoint

    def _path(self, checkpoint, where):
        """The checkpoint's messages as LangChain messages; None when it has no messages channel yet."""
        values = checkpoint["channel_values"]
        if CHANNEL not in values:
            if CHANNEL in (checkpoint.get("channel_versions") or {}):
                raise source_error(self.path, where, "the messages channel inside the checkpoint (it is "
                                                     "kept as deltas, a DeltaChannel, which is not imported)")
            return None
        messages = values[CHANNEL]
        if not isinstance(messages, list):
            raise source_error(self.path, where, f"a list in the messages channel, got {type(messages).__name__}")
        if all(isinstance(m, self.base_message) for m in messages):
            return messages
        try:  # a custom state may hold dicts or tuples, and a type outside the safe list reads back as a dict
            return self.convert_to_messages(messages)
        except (TypeError, ValueError, NotImplementedError) as error:
            raise source_error(self.path, where, f"LangChain messages in the messages channel ({error})") from None

    def _walk(self, path, checkpoint, where):
        parent = None
        for index, message in enumerate(path):
            variants = self.nodes.setdefault((parent, message.id), [])
            node = next((node for known, node in variants if known == message), None)
            if node is None:
                place = f"{where}, messages[{index}]"
                converted = self._convert(message, checkpoint, place)
                node = converted["id"] = self._node_id(message.id, parent, converted)
                variants.append((message, node))
                if node not in self.ids:
                    self.ids.add(node)
                    yield SourceMessage(converted, parent_id=parent, where=place)
            parent = node

    def _node_id(self, message_id, parent, converted):
        """The LangChain id the first time it is seen; a later message with that id (edited on a fork,
        or under another parent) adds a digest of its parent and content, the same on every import."""
        if message_id and message_id not in self.ids:
            return message_id
        content = json.dumps([parent, converted["role"], converted["parts"]], sort_keys=True, default=str)
        return f"{message_id or 'message'}~{hashlib.sha256(content.encode()).hexdigest()[:12]}"

    def _convert(self, message, checkpoint, where):
        role = ROLES.get(getattr(message, "role", None) if message.type == "chat" else message.type)
        if role is None:
            raise source_error(self.path, where, f"a human, ai, system or tool message, got a {message.type!r} one")
        metadata = {"source_id": message.id, "checkpoint_id": checkpoint["checkpoint_id"]}
        if message.name:
            metadata["name"] = message.name
        if role == "tool":
            parts = [self._tool_result(message)]
        else:
            parts = _content_parts(message.content, skip=TOOL_CALL_BLOCKS if role == "assistant" else ())
            parts += [self._tool_call(call) for call in getattr(message, "tool_calls", None) or ()]
            metadata.update(_model_facts(message))
        converted = {"role": role, "parts": parts, "metadata": metadata}
        if checkpoint["ts"]:
            converted["created_at"] = checkpoint["ts"]
        return converted

    def _tool_call(self, call):
        name = call.get("name") or ""
        self.tool_names[call.get("id")] = name
        return {"type": f"tool-{name}" if name else "dynamic-tool", "toolCallId": call.get("id"), "toolName": name,
                "input": call.get("args"), "state": "input-available"}

    def _tool_result(self, message):
        call_id = getattr(message, "tool_call_id", None) or message.name
        name = self.tool_names.get(call_id) or message.name or ""
        failed = getattr(message, "status", "success") == "error"
        return {"type": f"tool-{name}" if name else "dynamic-tool", "toolCallId": call_id, "toolName": name,
                "output": message.content, "state": "output-error" if failed else "output-available"}


def _content_parts(content, skip=()):
    """A LangChain ``content`` (a string, or a list of strings and content blocks) as memorylab parts."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    parts = []
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if isinstance(block, str):
            parts.append({"type": "text", "text": block})
        elif kind == "text":
            parts.append({"type": "text", "text": block.get("text") or ""})
        elif kind in ("reasoning", "thinking"):
            parts.append({"type": "reasoning", "text": block.get(kind) or block.get("text") or ""})
        elif kind not in skip:
            parts.append(block)
    return parts


def _model_facts(message) -> dict:
    facts = {}
    response = getattr(message, "response_metadata", None) or {}
    if response.get("model_name") or response.get("model"):
        facts["model"] = response.get("model_name") or response.get("model")
    counts = getattr(message, "usage_metadata", None) or {}
    if usage := chat_usage(counts.get("input_tokens"), counts.get("output_tokens")):
        facts["usage"] = usage
    return facts


FORMAT = SourceFormat(
    name="langgraph", label="LangGraph checkpoints (a SqliteSaver database)", agent_id="langgraph",
    detect=_detect, read=_read,
)
