"""Macro-compaction: deciding which messages a summary replaces, and asking for that summary.

``plan_compaction`` is the whole decision as a dry run (the lab's preview and notebooks use it);
``create_compact_function`` runs exactly that plan through a ``summarize(prompt) -> str`` the caller
supplies. Nothing here does I/O or calls a model, and token counts come from the numbers stored
with each message, so planning a long branch never re-tokenizes it.
"""
import string
from collections.abc import Callable
from dataclasses import dataclass, fields

from ..errors import InvalidInputError
from ..messages import is_tool_part, message_text
from .overlays import is_summary_message
from .pins import kept_with_partners, pinned_ids_of
from ..shapes import Message, Messages
from ..tokens import compact_json, estimate_message_tokens, estimate_string_tokens
from .truncation import truncate_text
from ..validation import check_counts, is_number

SUMMARY_SECTIONS = ("Topic", "Key Points", "Current State", "Open Items")
MIN_TARGET_SUMMARY_TOKENS = 100
TOOL_OUTPUT_PREVIEW_CHARS = 300
TEMPLATE_FIELDS = ("transcript", "previous_summary", "target_tokens")

DEFAULT_SUMMARY_TEMPLATE = """\
You are compacting the older part of a conversation between a user and an AI assistant. The \
assistant will continue the conversation from your summary instead of these messages, so anything \
you leave out is forgotten.

{previous_summary}Messages to summarize:
<transcript>
{transcript}
</transcript>

Write the summary in about {target_tokens} tokens, with exactly these four Markdown sections:

## Topic
What the conversation is about and what the user is trying to achieve.

## Key Points
Facts, results and decisions established so far. Keep concrete details exactly as written: ids, \
names, numbers, amounts, dates, file paths, and which option was chosen and why.

## Current State
Where the work stands at the end of these messages.

## Open Items
Questions, tasks and promises that are still unresolved.

Reply with the summary only."""

PREVIOUS_SUMMARY_SECTION = """\
A summary of the conversation before these messages already exists. Update it with the messages \
below rather than starting over: keep every fact it holds unless a newer message contradicts it, \
and fold in what is new.
<previous_summary>
{text}
</previous_summary>

"""


class CompactionContext(Messages):
    """What one request on a branch would hold: the overlaid history (the list itself), the frozen
    system prompt and the context blocks it was rendered from.

    Every ``token_counter`` is called with one of these and answers the size of everything it holds;
    the compaction planner asks about one message at a time, in a context with no system prompt.
    Being the history list, it works wherever a plain history does.
    """

    def __init__(self, history=(), *, system_prompt="", blocks=(), leaf_id=None, token_counter=None):
        """``blocks`` may be a function returning them: they are read only when asked for, so an
        append that checks the threshold does not render every block."""
        super().__init__(history)
        self.pinned_ids = pinned_ids_of(history)
        self.system_prompt = system_prompt
        self._blocks = blocks
        self.leaf_id = leaf_id
        self.token_counter = token_counter
        """The counter the session was told to use (``compact_after``); the compaction planner
        uses it for its boundaries when it has none of its own."""

    @property
    def blocks(self) -> list[dict]:
        if callable(self._blocks):
            self._blocks = self._blocks()
        return list(self._blocks)

    def tokens(self) -> int | float:
        """The size of everything the context holds: ``token_counter(self)`` when there is one (an
        answer that is no finite number counts 0, so a broken counter never triggers compaction),
        else the messages' stored estimates plus the system prompt's."""
        if self.token_counter is not None:
            counted = self.token_counter(self)
            return counted if is_number(counted) else 0
        return sum(message["tokens"] for message in self) + estimate_string_tokens(self.system_prompt)


@dataclass(frozen=True)
class CompactionPlan:
    """One compaction decision: head and tail kept as they are, the middle replaced by a summary.

    ``from_id``/``to_id`` are original message ids, the range the new overlay covers; when the middle
    starts with an existing summary, ``from_id`` is where that summary started, so the new overlay
    supersedes it. ``kept`` are the pinned messages inside that range: they are not in ``middle``, and
    the history reads them whole right after the summary. Token numbers are sums of per-message counts.
    """

    head: list
    middle: list
    kept: list
    tail: list
    from_id: str
    to_id: str
    previous_summary: str | None
    tokens_before: int
    head_tokens: int
    middle_tokens: int
    kept_tokens: int
    tail_tokens: int
    target_summary_tokens: int
    tokens_after: int
    prompt: str
    protect_head: int
    tail_token_budget: int
    min_tail_messages: int
    prompt_template: str | None

    def to_dict(self) -> dict:
        """JSON-friendly form: message ids instead of whole messages."""
        plain = {}
        for field in fields(self):
            value = getattr(self, field.name)
            if field.name in ("head", "middle", "kept", "tail"):
                plain[f"{field.name}_ids"] = [message["id"] for message in value]
            else:
                plain[field.name] = value
        return plain

    def _repr_html_(self):
        """Jupyter's view of the plan: head, middle and tail as a table, the prompt folded away."""
        from ..lab.notebook import plan_html

        return plan_html(self)


def plan_compaction(messages, *, protect_head=3, tail_token_budget=20000, min_tail_messages=2,
                    token_counter=None, prompt_template=None, pinned_ids=None) -> CompactionPlan | None:
    """The compaction that would run on ``messages`` (an overlaid history), or None if there is
    nothing to summarize: the middle holds no original message.

    ``token_counter(context) -> int`` replaces the stored per-message ``tokens``; it is asked about
    one message at a time, as a ``CompactionContext`` holding just that message. ``pinned_ids``
    (default: the pins a ``Session.get_history`` read carries) are never summarized: a pin at either
    end of the middle stays in the head or tail, one inside it is kept whole after the summary.
    """
    check_counts(protect_head=protect_head, tail_token_budget=tail_token_budget, min_tail_messages=min_tail_messages)
    check_summary_template(prompt_template)
    counts = _message_tokens(messages, token_counter)
    head_end = _head_end(messages, protect_head)
    tail_start = _tail_start(messages, counts, head_end, tail_token_budget, min_tail_messages)
    kept_ids = kept_with_partners(messages[head_end:tail_start], pinned_ids_of(messages, pinned_ids))
    while head_end < tail_start and messages[head_end]["id"] in kept_ids:
        head_end += 1
    while tail_start > head_end and messages[tail_start - 1]["id"] in kept_ids:
        tail_start -= 1
    span = range(head_end, tail_start)
    middle = [messages[i] for i in span if messages[i]["id"] not in kept_ids]
    if all(is_summary_message(message) for message in middle):
        return None
    kept = [messages[i] for i in span if messages[i]["id"] in kept_ids]
    summaries = [message for message in middle if is_summary_message(message)]
    newest_summary = summaries[-1] if summaries else None
    previous_summary = message_text(newest_summary) if newest_summary else None
    head_tokens, tail_tokens = sum(counts[:head_end]), sum(counts[tail_start:])
    middle_tokens = sum(counts[i] for i in span if messages[i]["id"] not in kept_ids)
    kept_tokens = sum(counts[i] for i in span if messages[i]["id"] in kept_ids)
    target = max(MIN_TARGET_SUMMARY_TOKENS, -(-middle_tokens // 5))
    prompt = build_summary_prompt(
        [message for message in middle if message is not newest_summary],
        previous_summary=previous_summary, target_tokens=target, template=prompt_template,
    )
    return CompactionPlan(
        head=messages[:head_end], middle=middle, kept=kept, tail=messages[tail_start:],
        from_id=_original_id(middle[0], "from_id"), to_id=_original_id(middle[-1], "to_id"),
        previous_summary=previous_summary,
        tokens_before=head_tokens + middle_tokens + kept_tokens + tail_tokens, head_tokens=head_tokens,
        middle_tokens=middle_tokens, kept_tokens=kept_tokens, tail_tokens=tail_tokens, target_summary_tokens=target,
        tokens_after=head_tokens + target + kept_tokens + tail_tokens, prompt=prompt,
        protect_head=protect_head, tail_token_budget=tail_token_budget,
        min_tail_messages=min_tail_messages, prompt_template=prompt_template,
    )


def _message_tokens(messages, token_counter):
    if token_counter is not None:
        return [token_counter(CompactionContext([message])) for message in messages]
    return [
        message["tokens"] if isinstance(message.get("tokens"), int) else estimate_message_tokens([message])
        for message in messages
    ]


def _head_end(messages, protect_head):
    """End (exclusive) of the head: it stops before a summary, so an old summary is always updated
    rather than frozen, and runs on past the results of a tool call it ends with."""
    end = min(protect_head, len(messages))
    end = next((i for i in range(end) if is_summary_message(messages[i])), end)
    while 0 < end < len(messages) and messages[end].get("role") == "tool":
        end += 1
    return end


def _tail_start(messages, counts, head_end, tail_token_budget, min_tail_messages):
    """Start of the tail: newest messages while they fit the budget, at least ``min_tail_messages``
    and the newest one; moved back so tool results stay with the message that called the tool."""
    required = max(min_tail_messages, 1)
    start, total = len(messages), 0
    while start > head_end:
        cost = counts[start - 1]
        if len(messages) - start >= required and total + cost > tail_token_budget:
            break
        total += cost
        start -= 1
    while head_end < start < len(messages) and messages[start].get("role") == "tool":
        start -= 1
    return start


def _original_id(message, which_end):
    """A message's own id, or for a summary the original id its overlay starts or ends at."""
    if is_summary_message(message):
        return message["metadata"]["compaction"][which_end]
    return message["id"]


def check_summary_template(template) -> None:
    """InvalidInputError unless ``template`` is None or a str.format template using only the known
    fields and including ``{transcript}``."""
    if template is None:
        return
    if not isinstance(template, str):
        raise InvalidInputError(f"a summary prompt template must be a string, got {type(template).__name__}")
    try:
        fields = {field for _, field, _, _ in string.Formatter().parse(template) if field is not None}
    except ValueError as error:
        raise InvalidInputError(f"the summary prompt template is not a valid format string: {error}") from None
    if "transcript" not in fields:
        raise InvalidInputError(
            "the summary prompt template has no {transcript} placeholder, so the model would never see "
            "the messages; add {transcript} (literal braces are written {{ and }})"
        )
    unknown = fields.difference(TEMPLATE_FIELDS)
    if unknown:
        raise InvalidInputError(
            f"the summary prompt template uses unknown placeholders {sorted(unknown)}; the known ones are "
            f"{', '.join('{' + name + '}' for name in TEMPLATE_FIELDS)}"
        )


def build_summary_prompt(middle, *, previous_summary=None, target_tokens, template=None) -> str:
    """The prompt that asks for a four-section summary of ``middle``.

    In a template, ``{previous_summary}`` becomes a short section holding the previous summary and
    the instruction to update it, or nothing when there is none. Summary messages left in ``middle``
    (an older one beside the previous summary) are shown in the transcript, so their facts survive.
    """
    check_summary_template(template)
    previous = PREVIOUS_SUMMARY_SECTION.format(text=previous_summary) if previous_summary else ""
    return (template or DEFAULT_SUMMARY_TEMPLATE).format(
        transcript=render_transcript(middle), previous_summary=previous, target_tokens=target_tokens,
    )


def render_transcript(messages) -> str:
    """Role-labelled lines; a tool call shows its input and (cut) output on one line, even when the
    result arrived in a separate tool message. Reasoning is left out: it is not part of what was said."""
    separate_results = {
        part.get("toolCallId"): part
        for message in messages if message.get("role") == "tool"
        for part in message.get("parts") or () if is_tool_part(part)
    }
    shown_results = set()
    lines = []
    for message in messages:
        label = "earlier summary" if is_summary_message(message) else message.get("role")
        for part in message.get("parts") or ():
            if part.get("type") == "text":
                lines.append(f"{label}: {part.get('text') or ''}")
            elif is_tool_part(part) and part.get("toolCallId") not in shown_results:
                result = part if "output" in part else separate_results.get(part.get("toolCallId"), part)
                if result is not part:
                    shown_results.add(part.get("toolCallId"))
                lines.append(f"{label}: {_render_tool_call(part, result)}")
    return "\n".join(lines)


def _render_tool_call(call, result):
    name = call.get("toolName") or call.get("type", "").removeprefix("tool-") or "tool"
    rendered = f"tool {name}"
    if "input" in call:
        rendered += f"({compact_json(call['input'])})"
    if "output" in result:
        rendered += f" -> {truncate_text(compact_json(result['output']), TOOL_OUTPUT_PREVIEW_CHARS)}"
    return rendered


def create_compact_function(summarize, *, protect_head=3, tail_token_budget=20000, min_tail_messages=2,
                            token_counter=None, prompt_template=None) -> Callable[[list[Message]], dict | None]:
    """``compact(messages) -> {"summary", "from_id", "to_id", "plan"} | None`` for ``Session.on_compaction``.

    Without a ``token_counter`` of its own, it uses the one a ``CompactionContext`` carries (the
    session's ``compact_after(..., token_counter=...)``), so the threshold and the boundaries agree.

    It runs ``plan_compaction`` with these settings and sends ``plan.prompt`` to ``summarize``; None when
    there is nothing to compact or the model answered with nothing. Errors from ``summarize``
    propagate, so the session can hand them to its error handler.
    """
    if not callable(summarize):
        raise InvalidInputError(f"summarize must be a callable taking the prompt, got {summarize!r}")
    settings = {
        "protect_head": protect_head, "tail_token_budget": tail_token_budget,
        "min_tail_messages": min_tail_messages, "token_counter": token_counter,
        "prompt_template": prompt_template,
    }
    check_counts(protect_head=protect_head, tail_token_budget=tail_token_budget, min_tail_messages=min_tail_messages)
    check_summary_template(prompt_template)

    def compact(messages):
        counter = settings["token_counter"] or getattr(messages, "token_counter", None)
        plan = plan_compaction(messages, **{**settings, "token_counter": counter})
        if plan is None:
            return None
        summary = summarize(plan.prompt)
        if summary is not None and not isinstance(summary, str):
            raise TypeError(f"summarize must return a string, got {type(summary).__name__}")
        if not summary or not summary.strip():
            return None
        return {"summary": summary.strip(), "from_id": plan.from_id, "to_id": plan.to_id, "plan": plan}

    return compact
