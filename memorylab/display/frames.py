"""``to_dataframe``: the engine's results as pandas DataFrames, with one column layout per kind.

Notebooks and the lab's pages show the same tables, so the columns are chosen once, here.
pandas is imported inside the function: ``import memorylab`` stays fast and does not need it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..history.compaction import CompactionPlan
from ..history.overlays import is_summary_message, summary_message
from ..memory.kv import MAX_PAGE_SIZE, KVStore
from ..memory.longterm import LongTermMemory
from ..messages import is_tool_part, message_text
from ..shapes import KVRows, MemoryRecords, MemoryRows, Messages, SessionRows
from ..store import Store

if TYPE_CHECKING:
    import pandas as pd

MESSAGE_COLUMNS = ["id", "parent_id", "role", "text", "tools", "tokens", "is_summary", "created_at"]
SESSION_COLUMNS = ["session_id", "title", "agent_id", "tenant_id", "message_count", "branch_count", "tokens",
                   "created_at", "updated_at"]
KV_COLUMNS = ["key", "value", "expires_at", "created_at", "updated_at"]
PLAN_COLUMNS = ["id", "role", "fate", "tokens", "text"]
RECORD_COLUMNS = ["id", "scope", "session_id", "summary", "body", "tags", "importance", "provenance", "created_at",
                  "updated_at"]
MEMORY_COLUMNS = ["id", "entity_type", "entity_value", "status", "updated_at", "message_count", "last_role",
                  "last_message", "summary"]
OVERLAY_COLUMNS = ["overlay", "from_id", "to_id", "state", "summary_tokens", "tokens_before", "tokens_after", "kept",
                   "lost", "created_at", "removed_at", "other metadata"]
AUDIT_COLUMNS = ["session_id", "overlay_id", "retained", "lost", "kept", "span_messages", "span_tokens",
                 "summary_tokens"]


def _message_row(message):
    tools = [p.get("toolName") or p["type"].removeprefix("tool-") for p in message["parts"] if is_tool_part(p)]
    return {
        "id": message["id"], "parent_id": message.get("parent_id"), "role": message["role"],
        "text": message_text(message), "tools": ", ".join(dict.fromkeys(tools)), "tokens": message.get("tokens"),
        "is_summary": is_summary_message(message), "created_at": message["created_at"],
    }


def _session_row(row):
    return {**{c: row.get(c) for c in SESSION_COLUMNS}, "title": (row.get("metadata") or {}).get("title", "")}


def _memory_row(row):
    last = row["last_message"] or {}
    return {**{c: row.get(c) for c in MEMORY_COLUMNS}, "last_role": last.get("role"),
            "last_message": last.get("content")}


def _kv_entries(kv):
    """Every live entry, page by page (``list_entries`` serves at most ``MAX_PAGE_SIZE`` at a time)."""
    entries, offset = [], 0
    while True:
        page = kv.list_entries(limit=MAX_PAGE_SIZE, offset=offset)
        entries += page
        if len(page) < MAX_PAGE_SIZE:
            return entries
        offset += MAX_PAGE_SIZE


def _plan_rows(plan):
    """Each message of the planned branch with its fate: kept in the head or tail, summarized, or pinned
    (kept whole after the summary), in the order the compacted history reads them."""
    return [
        {"id": m["id"], "role": m["role"], "fate": fate, "tokens": m.get("tokens"), "text": message_text(m)}
        for fate, messages in (("head", plan.head), ("summarized", plan.middle), ("pinned", plan.kept),
                               ("tail", plan.tail))
        for m in messages
    ]


def _session_rows(rows):
    return [_session_row(row) for row in rows]


_TABLES = (
    (Store, lambda store: _session_rows(store.sessions.list()), SESSION_COLUMNS),
    (LongTermMemory, lambda memory: memory.records(), RECORD_COLUMNS),
    (KVStore, _kv_entries, KV_COLUMNS),
    (CompactionPlan, _plan_rows, PLAN_COLUMNS),
    (Messages, lambda messages: [_message_row(message) for message in messages], MESSAGE_COLUMNS),
    (SessionRows, _session_rows, SESSION_COLUMNS),
    (MemoryRecords, list, RECORD_COLUMNS),
    (MemoryRows, lambda rows: [_memory_row(row) for row in rows], MEMORY_COLUMNS),
    (KVRows, list, KV_COLUMNS),
)
"""What ``to_dataframe`` tabulates, by type: how to read its rows, and their columns."""


def _rows_and_columns(obj):
    """The rows to tabulate and their columns (None: the rows' own keys), chosen by what ``obj`` is."""
    for kind, read_rows, columns in _TABLES:
        if isinstance(obj, kind):
            return read_rows(obj), columns
    if not isinstance(obj, (list, tuple)) or not all(isinstance(row, dict) for row in obj):
        raise TypeError(
            "to_dataframe takes a list of messages or dict rows, a Store, a KVStore, a CompactionPlan or a "
            f"LongTermMemory, not {type(obj).__name__}"
        )
    return list(obj), None


def to_dataframe(obj) -> pd.DataFrame:
    """A DataFrame of ``obj``, one row per item:

    - ``Messages`` (``get_history()``, ``get_all_messages()``, ``Messages(my_list)``): ``MESSAGE_COLUMNS``,
      text parts joined and tool names listed;
    - a ``Store`` or its ``sessions.list()`` rows: ``SESSION_COLUMNS``;
    - a ``KVStore`` or its ``list_entries()``: ``KV_COLUMNS``, every live entry with its value as stored;
    - ``Memory.list()`` rows: ``MEMORY_COLUMNS``, the newest message split into its role and text;
    - a ``CompactionPlan``: ``PLAN_COLUMNS``, each message with its fate (head, summarized, tail);
    - a ``LongTermMemory`` or its ``records()``: ``RECORD_COLUMNS``, provenance included;
    - any other list of dicts (search hits, fact survival, a request breakdown): their own keys.

    What a list holds is read from its type (``memorylab.shapes``), never guessed from its keys.

    Timestamp columns (``*_at``) become timezone-aware datetimes, so they sort and filter as times.
    """
    import pandas as pd

    rows, columns = _rows_and_columns(obj)
    frame = pd.DataFrame(rows, columns=columns)
    for column in frame.columns:
        if str(column).endswith("_at"):
            frame[column] = pd.to_datetime(frame[column], utc=True, format="ISO8601")
    return frame


def _retained(audit):
    kept, lost = len(audit.kept), len(audit.lost)
    return kept / (kept + lost) if kept + lost else None


def worst_first(audits) -> list:
    """``CompactionAudit``s ordered as a reviewer reads them: the smallest share of the span's
    artifacts kept first, then the most lost; a compaction whose span stated none comes last."""
    return sorted(audits, key=lambda audit: (_retained(audit) is None, _retained(audit) or 0, -len(audit.lost)))


def audit_table(audits) -> pd.DataFrame:
    """One row per ``CompactionAudit`` (``AUDIT_COLUMNS``), ``worst_first``; ``retained`` is the
    share kept, empty for a span that stated no artifact."""
    import pandas as pd

    rows = [{"session_id": audit.session_id, "overlay_id": audit.overlay_id, "retained": _retained(audit),
             "lost": len(audit.lost), "kept": len(audit.kept), "span_messages": audit.span_messages,
             "span_tokens": audit.span_tokens, "summary_tokens": audit.summary_tokens}
            for audit in worst_first(audits)]
    return pd.DataFrame(rows, columns=AUDIT_COLUMNS)


def overlay_table(overlays, *, shown=frozenset(), audits=None) -> pd.DataFrame:
    """One row per overlay (``OVERLAY_COLUMNS``), its metadata spread over columns: whether it shows on
    the branch (``shown``: ids), or was removed (a ``removed_compactions`` record), its summary's
    tokens as the request reads it, the plan's tokens before and after, and the kept and lost
    artifacts of its audit (``audits``: ``{overlay id: CompactionAudit}``). A column empty in every row
    is left out."""
    import pandas as pd

    def row(overlay):
        metadata = dict(overlay.get("metadata") or {})
        audit = (audits or {}).get(overlay["id"]) if "removed_at" not in overlay else None
        state = "removed" if "removed_at" in overlay else (
            "on this branch" if overlay["id"] in shown else "superseded or on another branch")
        return {"overlay": overlay["id"], "from_id": overlay["from_id"], "to_id": overlay["to_id"], "state": state,
                "summary_tokens": summary_message(overlay, [])["tokens"],
                "tokens_before": metadata.pop("tokens_before", None),
                "tokens_after": metadata.pop("tokens_after", None),
                "kept": len(audit.kept) if audit else None, "lost": len(audit.lost) if audit else None,
                "created_at": overlay.get("created_at"), "removed_at": overlay.get("removed_at"),
                "other metadata": "; ".join(f"{key}: {value}" for key, value in metadata.items()) or None}

    frame = pd.DataFrame([row(overlay) for overlay in overlays], columns=OVERLAY_COLUMNS)
    for column in ("created_at", "removed_at"):
        frame[column] = pd.to_datetime(frame[column], utc=True, format="ISO8601")
    return frame.dropna(axis="columns", how="all")
