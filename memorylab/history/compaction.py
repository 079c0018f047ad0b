"""Macro-compaction: deciding which messages a summary replaces, and asking for that summary.

``plan_compaction`` is the whole decision as a dry run (the lab's preview and notebooks use it);
``create_compact_function`` runs exactly that plan through a ``summarize(prompt) -> str`` the caller
supplies. Nothing here does I/O or calls a model, and token counts come from the numbers stored
with each message, so planning a long branch never re-tokenizes it.
"""
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields

from ..errors import InvalidInputError
from ..messages import is_tool_part, message_text
from ..shapes import Message, Messages
from ..tokens import compact_json, estimate_message_tokens, estimate_string_tokens
from ..validation import check_counts, check_template_fields, is_number
from .overlays import is_summary_message
from .pins import kept_with_partners, pinned_ids_of
from .truncation import truncate_text

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
        from ..display.notebook import plan_html

        return plan_html(self)


def plan_compaction(messages, *, protect_head=3, tail_token_budget=20000, min_tail_messages=2,
                    token_counter=None, prompt_template=None, pinned_ids=None) -> CompactionPlan | None:
    """The compaction that would run on ``messages`` (an overlaid history), or None if there is
    nothing to summarize: the middle holds no original message.

    ``token_counter(context) -> int`` replaces the stored per-message ``tokens``; it is asked about
    one message at a time, as a ``CompactionContext`` holding just that message. ``pinned_ids``
    (default: the pins a ``Session.get_history`` read carries) are never summarized: a pin at either
    end of the middle stays in the head or tail, one inside it is kept whole after the summary.
    ``Session.plan_compaction`` makes the same plan from the store, without reading the history whole.
    """
    settings = PlanSettings(protect_head, tail_token_budget, min_tail_messages, prompt_template)
    pinned_ids = pinned_ids_of(messages, pinned_ids)
    messages = list(messages)  # the plan indexes it message by message: a plain list's indexing is the fastest
    layout = lay_out_plan(messages, _message_tokens(messages, token_counter), pinned_ids, settings)
    if layout is None:
        return None
    middle = [messages[i] for i in layout.middle]
    return layout.plan(head=messages[:layout.head_end], middle=middle, kept=[messages[i] for i in layout.kept],
                       tail=messages[layout.tail_start:],
                       transcript=render_transcript([messages[i] for i in layout.summarized()]))


@dataclass(frozen=True)
class PlanSettings:
    """How a plan cuts a history (``plan_compaction``'s arguments, checked)."""

    protect_head: int = 3
    tail_token_budget: int = 20000
    min_tail_messages: int = 2
    prompt_template: str | None = None

    def __post_init__(self):
        check_counts(protect_head=self.protect_head, tail_token_budget=self.tail_token_budget,
                     min_tail_messages=self.min_tail_messages)
        check_summary_template(self.prompt_template)


@dataclass(frozen=True)
class PlanLayout:
    """Where a plan cuts a history, in positions of it, and its token sums: worked out on rows that
    carry each message's id, role and tool parts (whole messages, or the few fields of them that
    ``Session.plan_compaction`` keeps), so a plan from the store and one from a list are one rule."""

    settings: PlanSettings
    head_end: int
    tail_start: int
    kept: list
    middle: list
    newest_summary: Message | None
    newest_summary_at: int | None
    from_id: str
    to_id: str
    head_tokens: int
    middle_tokens: int
    kept_tokens: int
    tail_tokens: int

    def summarized(self) -> list[int]:
        """The positions whose messages the prompt's transcript shows: the middle less the previous summary."""
        return [i for i in self.middle if i != self.newest_summary_at]

    def plan(self, *, head, middle, kept, tail, transcript) -> CompactionPlan:
        """The CompactionPlan, given the messages at this layout's positions and the rendered transcript."""
        settings = self.settings
        previous_summary = message_text(self.newest_summary) if self.newest_summary else None
        target = max(MIN_TARGET_SUMMARY_TOKENS, -(-self.middle_tokens // 5))
        return CompactionPlan(
            head=head, middle=middle, kept=kept, tail=tail, from_id=self.from_id, to_id=self.to_id,
            previous_summary=previous_summary,
            tokens_before=self.head_tokens + self.middle_tokens + self.kept_tokens + self.tail_tokens,
            head_tokens=self.head_tokens, middle_tokens=self.middle_tokens, kept_tokens=self.kept_tokens,
            tail_tokens=self.tail_tokens, target_summary_tokens=target,
            tokens_after=self.head_tokens + target + self.kept_tokens + self.tail_tokens,
            prompt=summary_prompt(transcript, previous_summary=previous_summary, target_tokens=target,
                                  template=settings.prompt_template),
            protect_head=settings.protect_head, tail_token_budget=settings.tail_token_budget,
            min_tail_messages=settings.min_tail_messages, prompt_template=settings.prompt_template,
        )


def lay_out_plan(rows, counts, pinned_ids, settings) -> PlanLayout | None:
    """The ``PlanLayout`` of ``rows`` (an overlaid history's messages, or rows with their id, role and
    tool parts) whose token counts are ``counts``; None when the middle holds no original message."""
    head_end = _head_end(rows, settings.protect_head)
    tail_start = _tail_start(rows, counts, head_end, settings.tail_token_budget, settings.min_tail_messages)
    kept_ids = kept_with_partners(rows[head_end:tail_start], pinned_ids)
    while head_end < tail_start and rows[head_end]["id"] in kept_ids:
        head_end += 1
    while tail_start > head_end and rows[tail_start - 1]["id"] in kept_ids:
        tail_start -= 1
    span = range(head_end, tail_start)
    middle = [i for i in span if rows[i]["id"] not in kept_ids]
    if all(is_summary_message(rows[i]) for i in middle):
        return None
    kept = [i for i in span if rows[i]["id"] in kept_ids]
    summaries = [i for i in middle if is_summary_message(rows[i])]
    newest_summary_at = summaries[-1] if summaries else None
    return PlanLayout(
        settings=settings, head_end=head_end, tail_start=tail_start, kept=kept, middle=middle,
        newest_summary=None if newest_summary_at is None else rows[newest_summary_at],
        newest_summary_at=newest_summary_at,
        from_id=_original_id(rows[middle[0]], "from_id"), to_id=_original_id(rows[middle[-1]], "to_id"),
        head_tokens=sum(counts[:head_end]), middle_tokens=sum(counts[i] for i in middle),
        kept_tokens=sum(counts[i] for i in kept), tail_tokens=sum(counts[tail_start:]),
    )


def stored_tokens(message) -> int:
    """A message's stored token estimate (estimated now when it has none)."""
    tokens = message.get("tokens")
    return tokens if isinstance(tokens, int) else estimate_message_tokens([message])


def _message_tokens(messages, token_counter):
    if token_counter is not None:
        return [token_counter(CompactionContext([message])) for message in messages]
    return [stored_tokens(message) for message in messages]


def _head_end(rows, protect_head):
    """End (exclusive) of the head: it stops before a summary, so an old summary is always updated
    rather than frozen, and runs on past the results of a tool call it ends with. ``rows`` need only
    each message's id and role."""
    end = min(protect_head, len(rows))
    end = next((i for i in range(end) if is_summary_message(rows[i])), end)
    while 0 < end < len(rows) and rows[end].get("role") == "tool":
        end += 1
    return end


def _tail_start(rows, counts, head_end, tail_token_budget, min_tail_messages):
    """Start of the tail: newest messages while they fit the budget, at least ``min_tail_messages``
    and the newest one; moved back so tool results stay with the message that called the tool.
    ``rows`` need only each message's role; ``counts`` are their tokens."""
    required = max(min_tail_messages, 1)
    start, total = len(rows), 0
    while start > head_end:
        cost = counts[start - 1]
        if len(rows) - start >= required and total + cost > tail_token_budget:
            break
        total += cost
        start -= 1
    while head_end < start < len(rows) and rows[start].get("role") == "tool":
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
    if "transcript" not in check_template_fields(template, TEMPLATE_FIELDS, "the summary prompt template"):
        raise InvalidInputError(
            "the summary prompt template has no {transcript} placeholder, so the model would never see "
            "the messages; add {transcript} (literal braces are written {{ and }})"
        )


def build_summary_prompt(middle, *, previous_summary=None, target_tokens, template=None) -> str:
    """The prompt that asks for a four-section summary of ``middle``.

    In a template, ``{previous_summary}`` becomes a short section holding the previous summary and
    the instruction to update it, or nothing when there is none. Summary messages left in ``middle``
    (an older one beside the previous summary) are shown in the transcript, so their facts survive.
    """
    check_summary_template(template)
    return summary_prompt(render_transcript(middle), previous_summary=previous_summary, target_tokens=target_tokens,
                          template=template)


def summary_prompt(transcript, *, previous_summary, target_tokens, template) -> str:
    """``build_summary_prompt`` for a transcript already rendered (``render_transcript``)."""
    previous = PREVIOUS_SUMMARY_SECTION.format(text=previous_summary) if previous_summary else ""
    return (template or DEFAULT_SUMMARY_TEMPLATE).format(
        transcript=transcript, previous_summary=previous, target_tokens=target_tokens,
    )


def render_transcript(messages) -> str:
    """Role-labelled lines; a tool call shows its input and (cut) output on one line, even when the
    result arrived in a separate tool message. Reasoning is left out: it is not part of what was said."""
    return "\n".join(transcript_lines(messages, tool_result_outputs(messages)))


def tool_result_outputs(messages) -> dict:
    """``{call id: cut output}`` of the results that arrived in separate tool messages (None: the result
    holds no output), the later one winning: all a transcript needs of them, so a transcript rendered
    in pages (``transcript_lines``) holds these few characters per result rather than the results."""
    return {
        part.get("toolCallId"): _output_preview(part)
        for message in messages if message.get("role") == "tool"
        for part in message.get("parts") or () if is_tool_part(part)
    }


def transcript_lines(messages, results, shown=None) -> Iterator[str]:
    """The lines of ``render_transcript`` for ``messages``, one page of a longer transcript: ``results``
    are the ``tool_result_outputs`` of the whole transcript, and ``shown`` (kept from page to page)
    the calls whose separate result has been shown with them, so the result is not shown again."""
    shown = set() if shown is None else shown
    for message in messages:
        label = "earlier summary" if is_summary_message(message) else message.get("role")
        for part in message.get("parts") or ():
            call_id = part.get("toolCallId")
            if part.get("type") == "text":
                yield f"{label}: {part.get('text') or ''}"
            elif is_tool_part(part) and call_id not in shown:
                if "output" in part:
                    output = _output_preview(part)
                elif call_id in results:
                    output = results[call_id]
                    shown.add(call_id)
                else:
                    output = None
                yield f"{label}: {_render_tool_call(part, output)}"


def _output_preview(part):
    return truncate_text(compact_json(part["output"]), TOOL_OUTPUT_PREVIEW_CHARS) if "output" in part else None


def _render_tool_call(call, output):
    name = call.get("toolName") or call.get("type", "").removeprefix("tool-") or "tool"
    rendered = f"tool {name}"
    if "input" in call:
        rendered += f"({compact_json(call['input'])})"
    if output is not None:
        rendered += f" -> {output}"
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
    PlanSettings(protect_head, tail_token_budget, min_tail_messages, prompt_template)  # refused now, not later

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
