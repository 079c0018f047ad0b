"""What fills the next request, part by part, in estimated tokens (no model, no tokenizer).

The parts are the ones a user tunes: each context block of the frozen system prompt, each tool
schema, compaction summaries, messages by role and tool outputs. Rows are plain dicts, ready for
pandas or a chart.
"""
import json

from ..context.render import RULE
from ..messages import is_tool_part
from .overlays import is_summary_message
from ..tokens import MESSAGE_OVERHEAD_TOKENS, compact_json, estimate_part_tokens, estimate_string_tokens
from .truncation import truncate_older_messages


def split_rendered_prompt(prompt) -> list[tuple[str, str]]:
    """``[(label, section_text)]`` of a rendered system prompt, one entry per block."""
    if not prompt:
        return []
    sections = prompt.split(f"\n\n{RULE}\n")
    sections[0] = sections[0].removeprefix(f"{RULE}\n")
    result = []
    for section in sections:
        header = section.split("\n", 1)[0]
        label = header.split(" ", 1)[0].lower()
        text = section if section.startswith(RULE) else f"{RULE}\n{section}"
        result.append((label, text))
    return result


def _row(part, item, tokens):
    return {"part": part, "item": item, "tokens": tokens}


def request_breakdown(session, leaf_id=None, *, micro_compaction=None) -> list[dict]:
    """Rows ``{"part", "item", "tokens"}`` for the request ``ChatRunner`` would send on this branch.

    ``micro_compaction`` is a dict of ``truncate_older_messages`` settings (None: its defaults).
    """
    rows = [_row("system prompt", label, estimate_string_tokens(text))
            for label, text in split_rendered_prompt(session.freeze_system_prompt())]
    rows += [_row("tool schemas", name, estimate_string_tokens(json.dumps(tool.openai_schema())))
             for name, tool in session.tools().items()]
    history = truncate_older_messages(session.get_history(leaf_id), **(micro_compaction or {}))
    totals = {}
    for message in history:
        if is_summary_message(message):
            rows.append(_row("summaries", message["id"], message["tokens"]))
            continue
        outputs = sum(estimate_string_tokens(compact_json(p["output"]))
                      for p in message["parts"] if is_tool_part(p) and "output" in p)
        rest = MESSAGE_OVERHEAD_TOKENS + sum(estimate_part_tokens(p) for p in message["parts"]) - outputs
        totals[f"{message['role']} messages"] = totals.get(f"{message['role']} messages", 0) + rest
        if outputs:
            totals["tool outputs"] = totals.get("tool outputs", 0) + outputs
    rows += [_row("messages", item, tokens) for item, tokens in totals.items()]
    return rows
