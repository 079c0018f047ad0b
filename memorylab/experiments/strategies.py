"""What each arm's strategy makes of a branch: the context the model would see on its next turn.

``apply_arm(arm, history)`` is one arm on one case's branch: the stored messages as written, except for a
``recorded`` arm, which is given the branch as the session reads it, with its overlays applied. It never
writes to the store: a summary becomes a summary message in the returned context exactly as an accepted
overlay would show on read, so probes are answered from what a real compaction would leave.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..errors import InvalidInputError
from ..history.compaction import build_summary_prompt, plan_compaction, render_transcript
from ..history.overlays import is_summary_message, summary_message
from ..history.pins import kept_with_partners, pinned_ids_of
from ..history.truncation import mask_older_tool_outputs, truncate_older_messages
from ..history.window import SIMPLE_CUT, ContextWindow, simple_cut
from ..llm.api_hosts import check_spec_call
from ..messages import utc_now_iso
from ..shapes import Messages
from ..tokens import estimate_message_tokens, estimate_string_tokens
from .cancellation import complete_unless_cancelled
from .extractive import extractive_summary
from .spec import STRATEGY_DEFAULTS

WINDOW_HANDLERS = {SIMPLE_CUT: simple_cut}
"""The resize handlers a ``window`` arm can name: ``handler(full_context, context_window, memo,
settings) -> (full_context, context_window, memo)``, as ``ContextWindow.register_resize_handler`` takes."""
EXPERIMENT_OVERLAY_ID = "experiment"


def register_window_handler(name, handler) -> None:
    """Make ``handler`` available to window arms as ``handler: name`` (it runs when the window is
    over ``max_length``)."""
    if not callable(handler):
        raise TypeError(f"a window handler must be callable, got {handler!r}")
    WINDOW_HANDLERS[name] = handler


@dataclass
class ArmOutput:
    """One arm's result on one branch. ``request`` is what was sent to a model (None when none was);
    ``cost`` is None where litellm does not know the model's price."""

    context: Messages = field(default_factory=Messages)
    tokens_before: int = 0
    tokens_after: int = 0
    summary: str | None = None
    summary_tokens: int = 0
    dropped: tuple = ()
    """Ids of the original messages the context no longer holds verbatim."""
    request: dict | None = None
    model: str | None = None
    usage: dict = field(default_factory=dict)
    cost: float | None = 0.0
    latency: float = 0.0


def branch_tokens(history) -> int:
    return sum(message.get("tokens") or 0 for message in history)


def default_tail_budget(history) -> int:
    """The tail a plan keeps when an arm does not say: a quarter of the branch's tokens, so the middle
    always holds something to compact on a branch of any length."""
    return max(branch_tokens(history) // 4, 1)


def suggested_plan_settings(history, *, tail_share=4) -> dict:
    """Plan settings (``protect_head``, ``tail_token_budget``, ``min_tail_messages``) that compact
    something on a branch of any size, to start tuning from: an arm's defaults, with a tail of a
    ``tail_share``-th of the branch's tokens (a quarter, as an arm without a tail budget) rounded to 100."""
    tail = max(round(default_tail_budget(history) * 4 / tail_share, -2), 100)
    plan_keys = ("protect_head", "tail_token_budget", "min_tail_messages")
    return {key: STRATEGY_DEFAULTS["extractive"][key] for key in plan_keys} | {"tail_token_budget": int(tail)}


def plan_for(arm, history):
    """The compaction plan of a summarize or extractive arm on ``history`` (None: nothing to compact)."""
    settings = arm.settings
    budget = settings["tail_token_budget"]
    return plan_compaction(
        history, protect_head=settings["protect_head"], min_tail_messages=settings["min_tail_messages"],
        tail_token_budget=default_tail_budget(history) if budget is None else budget,
        prompt_template=settings.get("template"),
    )


def apply_arm(arm, history, *, allowed_hosts=(), cancel=None) -> ArmOutput:
    """The context ``arm`` leaves of ``history``. Model failures raise ModelError; a summarize arm whose
    ``api_base`` names a host ``allowed_api_hosts(allowed_hosts)`` does not allow, ApiHostNotAllowedError.
    A model arm raises RunCancelled before its next model call once the ``threading.Event`` ``cancel`` is set."""
    started = time.perf_counter()
    if arm.strategy in MODEL_STRATEGIES:
        check_spec_call({"model": arm.settings["model"]}, arm.settings["completion"], allowed_hosts)
        output = _MODEL_ARMS[arm.strategy](arm, history, cancel)
    else:
        output = _STRATEGIES[arm.strategy](arm, history)
    output.latency = time.perf_counter() - started
    return output


def _full(arm, history):
    tokens = branch_tokens(history)
    return ArmOutput(context=Messages(history), tokens_before=tokens, tokens_after=tokens)


def _truncate(arm, history):
    return _rewritten(history, truncate_older_messages(history, **arm.settings))


def _mask(arm, history):
    return _rewritten(history, mask_older_tool_outputs(history, keep_recent=arm.settings["keep_recent"]))


def _rewritten(history, context):
    """The output of a strategy that rewrites messages in place: those it changed count as dropped."""
    shortened = tuple(before["id"] for before, after in zip(history, context) if before is not after)
    return ArmOutput(context=context, tokens_before=branch_tokens(history), tokens_after=branch_tokens(context),
                     dropped=shortened)


def _mask_then_summarize(arm, history, cancel):
    """Masking, and a summary of the masked branch only when masking leaves it over ``token_budget``."""
    masked = _mask(arm, history)
    budget = arm.settings["token_budget"]
    if masked.tokens_after <= (branch_tokens(history) // 2 if budget is None else budget):
        return masked
    output = _summarize(arm, masked.context, cancel)
    output.tokens_before = masked.tokens_before
    output.dropped = tuple(dict.fromkeys(masked.dropped + output.dropped))
    return output


def _window(arm, history):
    """Seed 002's policy on the branch rendered as ``{"role", "content"}`` messages (one line per part).
    Messages the window kept whole stay the branch's own; one it cut becomes a message of its own."""
    window = ContextWindow(max_length=arm.settings["max_length"], auto_resize=False)
    handler = arm.settings["handler"]
    window.register_resize_handler(handler, WINDOW_HANDLERS[handler])
    if handler != SIMPLE_CUT:
        window.register_analysis_handler(
            lambda full, current, memo, settings: handler if window.length(current) > settings["max_length"] else None)
    rendered = [{"role": m["role"], "content": render_transcript([m])} for m in history]
    window.set_chat_history(rendered)
    window.resize()
    kept = window.context_window
    start = len(history) - len(kept)  # simple_cut keeps the newest messages; a custom handler may not
    context = Messages()
    for offset, plain in enumerate(kept):
        index = start + offset
        whole = 0 <= index < len(history) and plain == rendered[index]
        context.append(history[index] if whole else _window_message(offset, plain))
    kept_ids = {m["id"] for m in context}
    pinned = kept_with_partners(history, pinned_ids_of(history)).difference(kept_ids)
    if pinned:  # the window drops old messages, never pinned ones: they go back in front, in order
        context = Messages([m for m in history if m["id"] in pinned] + context)
        kept_ids.update(pinned)
    return ArmOutput(context=context, tokens_before=branch_tokens(history), tokens_after=branch_tokens(context),
                     dropped=tuple(m["id"] for m in history if m["id"] not in kept_ids))


def _window_message(index, plain):
    content = plain["content"] if isinstance(plain.get("content"), str) else str(plain.get("content"))
    message = {"id": f"window-{index}", "role": plain.get("role", "user"),
               "parts": [{"type": "text", "text": content}], "metadata": {}, "parent_id": None}
    message["tokens"] = estimate_message_tokens([message])
    return message


def _with_summary(plan, summary, history):
    overlay = {"id": EXPERIMENT_OVERLAY_ID, "summary": summary, "from_id": plan.from_id, "to_id": plan.to_id,
               "created_at": utc_now_iso()}
    context = Messages(plan.head)
    context.append(summary_message(overlay, plan.middle))
    context += plan.kept
    context += plan.tail
    return context


def _compacted(arm, history, summarize):
    """A plan's head and tail around the summary ``summarize(plan) -> ArmOutput`` writes (whose
    context and token counts are filled in here)."""
    plan = plan_for(arm, history)
    tokens = branch_tokens(history)
    if plan is None:
        return ArmOutput(context=Messages(history), tokens_before=tokens, tokens_after=tokens)
    output = summarize(plan)
    output.context = _with_summary(plan, output.summary, history)
    output.tokens_before = tokens
    output.tokens_after = branch_tokens(output.context)
    output.summary_tokens = estimate_string_tokens(output.summary)
    output.dropped = tuple(m["id"] for m in plan.middle)
    return output


def _extractive(arm, history):
    def summarize(plan):
        return ArmOutput(summary=extractive_summary(plan.middle, plan.target_summary_tokens))

    return _compacted(arm, history, summarize)


def _summarize(arm, history, cancel):
    from ..llm.models import DEFAULT_LOCAL_MODEL, model_context_tokens

    model = arm.settings["model"] or DEFAULT_LOCAL_MODEL
    completion = dict(arm.settings["completion"])

    def summarize(plan):
        budget = arm.settings["chunk_tokens"] or _chunk_budget(model_context_tokens(model), completion)
        summary, usage, cost, prompts = plan.previous_summary, {}, 0.0, []
        summaries = [m for m in plan.middle if is_summary_message(m)]
        to_summarize = [m for m in plan.middle if not summaries or m is not summaries[-1]]
        for chunk in _chunks(to_summarize, budget):
            prompt = build_summary_prompt(chunk, previous_summary=summary, target_tokens=plan.target_summary_tokens,
                                          template=arm.settings["template"])
            text, accounted = complete_unless_cancelled(prompt, model=model, cancel=cancel, **completion)
            summary = text.strip() or summary
            prompts.append(prompt)
            for key, value in accounted["usage"].items():
                usage[key] = usage.get(key, 0) + value
            cost = None if cost is None or accounted["cost"] is None else cost + accounted["cost"]
        return ArmOutput(summary=summary or "",
                         request={"model": model, "prompts": prompts, **completion},
                         model=model, usage=usage, cost=cost)

    return _compacted(arm, history, summarize)


def _chunk_budget(context_tokens, completion):
    """Estimated tokens of messages per summary request: half of what the model reads once its answer
    is set aside (estimates run below a real tokenizer's count, and the template and the summary so
    far ride along). None, no chunking, when the model's window is unknown."""
    if context_tokens is None:
        return None
    return max((context_tokens - int(completion.get("max_tokens") or 1024)) // 2, 256)


def _chunks(messages, budget):
    """Consecutive runs of ``messages`` whose stored tokens fit ``budget`` (one message over it goes alone)."""
    if budget is None:
        return [messages]
    chunks, current, total = [], [], 0
    for message in messages:
        tokens = message.get("tokens") or 0
        if current and total + tokens > budget:
            chunks.append(current)
            current, total = [], 0
        current.append(message)
        total += tokens
    return chunks + [current] if current else chunks


def _recorded(arm, history):
    """The branch as the session reads it, the compactions on record (the agent's own, imported, or
    accepted in the lab) standing in their spans: ``history`` is that read."""
    summaries = [m for m in history if is_summary_message(m)]
    if not summaries:
        raise InvalidInputError("no compaction is recorded on this branch: a recorded arm replays the overlays the "
                                "session holds (imported from the agent, or accepted in the Compaction lab)")
    tokens_after = branch_tokens(history)
    covered = sum(m["metadata"]["compaction"]["covered_tokens"] for m in summaries)
    summary_tokens = sum(m["tokens"] for m in summaries)
    return ArmOutput(context=Messages(history), tokens_before=tokens_after - summary_tokens + covered,
                     tokens_after=tokens_after, summary="\n\n".join(m["parts"][0]["text"] for m in summaries),
                     summary_tokens=summary_tokens)


_STRATEGIES = {"none": _full, "truncate": _truncate, "window": _window, "extractive": _extractive,
               "recorded": _recorded, "mask": _mask}
_MODEL_ARMS = {"summarize": _summarize, "mask+summarize": _mask_then_summarize}
MODEL_STRATEGIES = frozenset(_MODEL_ARMS)
"""The strategies that call (or may call) a model: seconds to minutes a run, where the others take
milliseconds; their ``completion`` is held to the allowed hosts before anything runs."""
