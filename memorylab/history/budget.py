"""What fills the next request, part by part, in estimated tokens (no model, no tokenizer).

The parts are the ones a user tunes: each context block of the frozen system prompt, each tool
schema, compaction summaries, messages by role and tool outputs. Rows are plain dicts, ready for
pandas or a chart.
"""
import json

from ..context.render import RULE
from ..messages import is_tool_part
from ..tokens import compact_json, estimate_string_tokens
from ..validation import check_counts
from .overlays import is_summary_message
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
    settings = dict(micro_compaction or {})
    keep_recent = settings.pop("keep_recent", 4)
    return prompt_and_tool_rows(session) + HistoryBudget(session.get_history(leaf_id), **settings).rows(keep_recent)


def prompt_and_tool_rows(session) -> list[dict]:
    """The rows every request of the session holds whatever its branch: the frozen system prompt
    block by block, then each tool schema."""
    rows = [_row("system prompt", label, estimate_string_tokens(text))
            for label, text in split_rendered_prompt(session.freeze_system_prompt())]
    return rows + [_row("tool schemas", name, estimate_string_tokens(json.dumps(tool.openai_schema())))
                   for name, tool in session.tools().items()]


class HistoryBudget:
    """The messages' rows of a request (summaries, messages by role, tool outputs) for any number of
    newest messages that micro-compaction keeps whole.

    Built in one pass over an overlaid history: each message is measured as sent whole and as
    micro-compaction cuts it, from its stored token estimate (only tool outputs are measured, to
    show them apart). ``rows(keep_recent)`` then answers from those totals without walking the
    branch again, so a page can cache one budget per branch and let the user move the setting.
    """

    def __init__(self, history, *, max_tool_output_chars=500, max_text_chars=10000):
        cut = truncate_older_messages(history, keep_recent=0, max_tool_output_chars=max_tool_output_chars,
                                      max_text_chars=max_text_chars)
        self._whole = [_shares(message) for message in history]
        self._cut = [whole if shortened is message else _shares(shortened)
                     for message, shortened, whole in zip(history, cut, self._whole)]
        self._cut_totals: dict[tuple[str, str], int] = {}
        for shares in self._cut:
            _add(self._cut_totals, shares, 1)

    def __len__(self):
        return len(self._whole)

    def rows(self, keep_recent=4) -> list[dict]:
        """Summaries first (oldest first), then the message totals; a part holding nothing has no row."""
        check_counts(keep_recent=keep_recent)
        totals = dict(self._cut_totals)
        for index in range(max(len(self) - keep_recent, 0), len(self)):
            _add(totals, self._cut[index], -1)
            _add(totals, self._whole[index], 1)
        ordered = sorted(totals.items(), key=lambda entry: entry[0][0] != "summaries")
        return [_row(part, item, tokens) for (part, item), tokens in ordered if tokens]


def _shares(message):
    """``((part, item), tokens)`` pairs of one message as the request sends it."""
    if is_summary_message(message):
        return ((("summaries", message["id"]), message["tokens"]),)
    outputs = sum(estimate_string_tokens(compact_json(part["output"]))
                  for part in message["parts"] if is_tool_part(part) and "output" in part)
    shares = ((("messages", f"{message['role']} messages"), message["tokens"] - outputs),)
    return shares + (((("messages", "tool outputs"), outputs),) if outputs else ())


def _add(totals, shares, sign):
    for key, tokens in shares:
        totals[key] = totals.get(key, 0) + sign * tokens
