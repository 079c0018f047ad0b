"""How the engine's objects look in Jupyter: HTML for sessions, plans, system prompts and tables.

Pure functions that return strings, so nothing here imports Jupyter and the engine stays importable
anywhere; ``Session._repr_html_`` and ``CompactionPlan._repr_html_`` call them. Every value that
came from a user, a provider or a model goes through ``html.escape``: a message holding
``<script>`` shows as text and never runs in the notebook.
"""
import html

from ..context.providers import TAGS
from ..context.render import usage_percent
from ..experiments.results import percent_text
from ..tokens import compact_json
from ..validation import is_integer

# Wrapped and scrollable: a rendered prompt has long lines and can run to hundreds of them.
PROMPT_STYLE = ("white-space:pre-wrap;max-height:32em;overflow:auto;background:#f8fafc;padding:8px;"
                "border:1px solid #e5e7eb")


def _text(value):
    """A cell value as escaped text: numbers with thousands separators, lists and dicts as compact
    JSON, None as nothing."""
    if value is None:
        return ""
    if is_integer(value):
        return f"{value:,}"
    if isinstance(value, (dict, list, tuple)):
        return html.escape(compact_json(value))
    return html.escape(str(value))


def table_html(rows, *, columns=None, caption=None):
    """An HTML table of dict rows; ``columns`` (default: every key, in order of appearance) picks them."""
    columns = list(columns or dict.fromkeys(key for row in rows for key in row))
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{_text(row.get(c))}</td>" for c in columns) + "</tr>"
        for row in rows
    )
    title = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f"<table>{title}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def prompt_html(text):
    """A system prompt as preformatted text: its rules and line breaks are part of what the model sees."""
    return f'<pre style="{PROMPT_STYLE}">{html.escape(text)}</pre>'


def _block_row(block):
    budget = block["max_tokens"]
    return {
        "block": block["label"], "description": block["description"], "kind": TAGS[block["kind"]],
        "tokens": block["tokens"],
        "budget": f"{budget:,} ({usage_percent(block['tokens'], budget)}% used)" if budget else "",
    }


def session_html(session):
    """A session at a glance: who it belongs to, its tree and token counts, and its context blocks."""
    info, stats = session.info, session.stats()
    title = info["metadata"].get("title")
    heading = (f"<b>Session</b> <code>{html.escape(session.session_id)}</code> · agent "
               f"<code>{html.escape(session.agent_id)}</code> · tenant <code>{html.escape(session.tenant_id)}</code>")
    if title:
        heading += f"<br><i>{html.escape(str(title))}</i>"
    counts = table_html([{
        "messages": stats["messages"], "branches": stats["branches"], "overlays": stats["compactions"],
        "latest path (messages)": stats["latest_path_length"], "latest path tokens": stats["latest_path_tokens"],
        "history tokens (overlays applied)": stats["history_tokens"],
    }])
    blocks = session.get_context_blocks()
    parts = [heading, counts]
    if blocks:
        parts.append(table_html([_block_row(b) for b in blocks], caption="Context blocks"))
    status = session.compaction_status
    if status:
        parts.append(f"Last compaction: <b>{html.escape(status['state'])}</b> ({html.escape(status['detail'])})")
    return f'<div class="memorylab-session">{"".join(parts)}</div>'


def plan_html(plan):
    """A compaction plan as a table: what stays, what a summary replaces, and the tokens either way."""
    def span(messages):
        return f"{messages[0]['id']} … {messages[-1]['id']}" if messages else ""

    rows = [
        {"part": "head (kept)", "messages": len(plan.head), "span": span(plan.head), "tokens": plan.head_tokens},
        {"part": "middle (summarized)", "messages": len(plan.middle), "span": f"{plan.from_id} … {plan.to_id}",
         "tokens": plan.middle_tokens},
        *([{"part": "pinned (kept whole after the summary)", "messages": len(plan.kept), "span": span(plan.kept),
            "tokens": plan.kept_tokens}] if plan.kept else []),
        {"part": "tail (kept)", "messages": len(plan.tail), "span": span(plan.tail), "tokens": plan.tail_tokens},
    ]
    saved = plan.tokens_before - plan.tokens_after
    settings = (f"protect_head={plan.protect_head}, tail_token_budget={plan.tail_token_budget:,}, "
                f"min_tail_messages={plan.min_tail_messages}")
    summary = (f"{plan.tokens_before:,} → {plan.tokens_after:,} tokens (saves {saved:,}; summary target "
               f"{plan.target_summary_tokens:,})" + (" · updates an earlier summary" if plan.previous_summary else ""))
    return (f'<div class="memorylab-plan"><b>Compaction plan</b> · {html.escape(settings)}<br>{html.escape(summary)}'
            f"{table_html(rows)}<details><summary>The prompt the summarizer gets</summary>{prompt_html(plan.prompt)}"
            "</details></div>")


class SystemPrompt(str):
    """A system prompt that Jupyter shows preformatted; otherwise the very same string."""

    def _repr_html_(self):
        return prompt_html(self)


def show_prompt(session, *, frozen=True):
    """The session's system prompt for display: the frozen one (what the next request sends), or
    with ``frozen=False`` the one the blocks would render now. It compares equal to the plain str."""
    return SystemPrompt(session.freeze_system_prompt() if frozen else session.render_system_prompt())


def diagnostics_html(diagnostics, *, caption=None):
    """A diagnostics dict (long-term memory's ``after_turn`` / ``prepare_request``, a compaction
    status) as tables: plain fields as name/value rows, a dict of dicts (per scope) as one row per
    key, a list of dicts (events) as a table of its own."""
    fields, tables = [], []
    for name, value in diagnostics.items():
        if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
            tables.append(table_html(value, caption=name))
        elif isinstance(value, dict) and value and all(isinstance(item, dict) for item in value.values()):
            tables.append(table_html([{name: key, **item} for key, item in value.items()], caption=name))
        else:
            fields.append({"field": name, "value": value})
    return f'<div class="memorylab-diagnostics">{table_html(fields, caption=caption)}{"".join(tables)}</div>'


class HTML:
    """Markup that Jupyter renders, as ``IPython.display.HTML`` would, without importing IPython."""

    def __init__(self, markup):
        self.markup = markup

    def _repr_html_(self):
        return self.markup


def show_table(data, *, caption=None):
    """Display dict rows (fact survival, a request breakdown) or a diagnostics dict as tables,
    without pandas; see ``table_html`` and ``diagnostics_html``."""
    if isinstance(data, dict):
        return HTML(diagnostics_html(data, caption=caption))
    return HTML(table_html(list(data), caption=caption))


def spec_html(spec):
    """An experiment spec: its arms with their settings and its cases with their probe counts."""
    arms = [{"arm": a.name, "strategy": a.strategy, "settings": {k: v for k, v in a.to_dict().items()
                                                               if k not in ("name", "strategy")}}
            for a in spec.arms]
    cases = [{"case": c.name, "session": c.session, "agent": c.agent, "leaf": c.leaf or "newest",
              "probes": len(c.probes), "kinds": ", ".join(sorted({p.kind for p in c.probes}))} for c in spec.cases]
    heading = f"<b>Experiment</b> <code>{html.escape(spec.name)}</code>"
    if spec.description:
        heading += f"<br><i>{html.escape(spec.description)}</i>"
    return (f'<div class="memorylab-experiment">{heading}{table_html(arms, caption="Arms")}'
            f'{table_html(cases, caption="Cases")}</div>')


def results_html(results):
    """A trial's leaderboard, best arm first, with each arm's 95% interval, its verdict against the
    best arm and its threshold verdict."""
    from ..experiments.results import against_best_text, interval_text

    rows = []
    for arm in sorted(results.arm_summaries(), key=lambda a: -a["score"]):
        verdict = "" if arm["passed"] is None else ("passed" if arm["passed"] else f"under {arm['min_score']}")
        rows.append({"arm": arm["arm"], "strategy": arm["strategy"], "score": f"{arm['score']:.2f}",
                     "95% interval": interval_text(arm), "against the best": against_best_text(arm),
                     "spread": f"{arm['spread']:.2f}", "tokens after": arm["tokens_after"],
                     "saved": percent_text(arm["saved_pct"]),
                     "cost": "n/a" if arm["cost"] is None else f"{arm['cost']:.4f}", "errors": arm["errors"],
                     "threshold": verdict})
    state = "" if results.complete else " (cancelled before every run finished)"
    heading = (f"<b>Experiment</b> <code>{html.escape(results.experiment)}</code>, trial {results.trial}: "
               f"{len(results.runs)} runs{state}")
    return f'<div class="memorylab-results">{heading}{table_html(rows)}</div>'
