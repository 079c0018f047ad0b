"""Decay over repeated compactions: what an arm keeps of the early conversation after its Nth compaction.

An agent compacts again each time its context grows past a threshold, each summary updating the
last. ``replay_with_compactions`` plays a branch into an arm that way, message by message, and keeps
the context after each listed round; ``retention_scores`` scores the probes whose facts were all in
the conversation before its first compaction on each of those contexts, with the fact matcher.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..history.overlays import is_summary_message
from ..shapes import Messages
from .scoring import score_probes
from .strategies import ArmOutput, apply_arm, branch_tokens


@dataclass
class Replay:
    """A branch replayed with repeated compactions: ``output`` is the context at its end (tokens,
    usage and cost over every compaction); ``before_first`` the context just before the first one
    (None: it never grew past ``compact_at``); ``rounds`` the context after each listed round reached."""

    output: ArmOutput
    compact_at: int
    compactions: int = 0
    before_first: Messages | None = None
    rounds: dict = field(default_factory=dict)


def compaction_threshold(arm, history) -> int:
    """``compact_at``, or the branch's tokens over one more than the last round: room for that many
    compactions on a branch that grows evenly."""
    return arm.settings["compact_at"] or max(branch_tokens(history) // (max(arm.settings["rounds"]) + 1), 1)


def replay_with_compactions(arm, history, *, allowed_hosts=(), cancel=None) -> Replay:
    """``history`` appended one message at a time, the arm applied to the context each time it is over
    the threshold; a compaction that shrinks nothing is not a round. Raises what ``apply_arm`` raises."""
    replay = Replay(output=ArmOutput(), compact_at=compaction_threshold(arm, history))
    context, outputs, tokens = Messages(), [], 0
    for message in history:
        context.append(message)
        tokens += message.get("tokens") or 0  # branch_tokens(context), kept as it grows
        if tokens <= replay.compact_at:
            continue
        output = apply_arm(arm, context, allowed_hosts=allowed_hosts, cancel=cancel)
        if output.tokens_after >= tokens:
            continue
        if replay.before_first is None:
            replay.before_first = Messages(context)
        replay.compactions += 1
        outputs.append(output)
        context = Messages(output.context)
        tokens = branch_tokens(context)
        if replay.compactions in arm.settings["rounds"]:
            replay.rounds[replay.compactions] = context
    replay.output = _over_every_compaction(outputs, context, history)
    return replay


def _over_every_compaction(outputs, context, history) -> ArmOutput:
    """The replay's end as one arm output: its last summary, every compaction's model use summed."""
    usage, cost, prompts, latency = {}, 0.0, [], 0.0
    for output in outputs:
        for key, value in output.usage.items():
            usage[key] = usage.get(key, 0) + value
        cost = None if cost is None or output.cost is None else cost + output.cost
        prompts += (output.request or {}).get("prompts", [])
        latency += output.latency
    last = outputs[-1] if outputs else ArmOutput()
    request = None if last.request is None else last.request | {"prompts": prompts}
    summaries = [m for m in context if is_summary_message(m)]
    kept = {id(m) for m in context}
    return ArmOutput(context=context, tokens_before=branch_tokens(history), tokens_after=branch_tokens(context),
                     summary=summaries[-1]["parts"][0]["text"] if summaries else None,
                     summary_tokens=sum(m["tokens"] for m in summaries),
                     dropped=tuple(m["id"] for m in history if id(m) not in kept),
                     request=request, model=last.model, usage=usage, cost=cost, latency=latency)


def retention_scores(replay, probes, rounds) -> dict[str, list[dict]]:
    """Per early probe (its facts all matched before the first compaction), its fact score after each
    listed round: ``{probe id: [{"round", "score"}]}``, score None for a round the branch never reached."""
    if replay.before_first is None:
        return {}
    baseline, _ = score_probes(replay.before_first, probes)
    early = [probe for probe, score in zip(probes, baseline) if score["fact_score"] == 1]
    scored = {number: score_probes(context, early)[0] for number, context in replay.rounds.items()}
    return {probe.id: [{"round": number,
                        "score": scored[number][index]["fact_score"] if number in scored else None}
                       for number in rounds]
            for index, probe in enumerate(early)}


def decay_output(arm, history, probes, *, allowed_hosts=(), cancel=None) -> tuple[ArmOutput, dict]:
    """A decay arm on one branch: the context at the branch's end and ``retention_scores``."""
    replay = replay_with_compactions(arm, history, allowed_hosts=allowed_hosts, cancel=cancel)
    return replay.output, retention_scores(replay, probes, arm.settings["rounds"])


def retention_curve(runs) -> list[dict]:
    """Per decay arm and listed round, ``{"arm", "round", "score", "probes"}``: the mean score of the
    early probes over every case that reached the round (``probes`` counts them; score None: none did)."""
    scores: dict = {}
    for run in runs:
        for probe in run["scores"]:
            for entry in probe.get("rounds") or ():
                scores.setdefault((run["arm"], entry["round"]), []).append(entry["score"])
    curve = []
    for (arm, number), values in scores.items():
        reached = [value for value in values if value is not None]
        curve.append({"arm": arm, "round": number, "score": sum(reached) / len(reached) if reached else None,
                      "probes": len(reached)})
    return curve
