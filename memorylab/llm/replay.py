"""Replay: ask a branch's user turns again under another model or other settings, and compare.

A replay forks at the branch's first user message: its first new answer is a sibling of the old
one, and every later user message is copied (same parts) under the previous new answer and
answered, tools run again through the session's tools. Everything a replay writes is marked
``metadata["replay"] = {"of": original message id, "source_leaf": leaf id, "model": model}``, so
the replays of a branch can be found and each message traced to the one it stands for.
``compare_branches`` then lines up two branches' answers by user turn, with tokens, cost and latency.
"""
from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import InvalidInputError, ModelError, NotFoundError
from ..jobs import BackgroundJob
from ..messages import message_text

if TYPE_CHECKING:
    import pandas as pd

    from .chat import ChatRunner

REPLAY_KEY = "replay"
SIDE_COLUMNS = ("answer", "input_tokens", "output_tokens", "cost", "latency_ms", "model")
COMPARISON_COLUMNS = ["turn", "user", "user_b", *(f"{c}_{side}" for side in "ab" for c in SIDE_COLUMNS), "shared"]


@dataclass
class ReplayResult:
    """What a replay stored: ``leaf_id`` ends the new branch (None when nothing was stored),
    ``answer_ids`` are its complete answers, one per user turn replayed, of ``total`` turns.
    ``cancelled`` or ``error`` (a failed model call) say why it stopped early; what it stored stays."""

    source_leaf_id: str
    model: str
    total: int
    leaf_id: str | None = None
    answer_ids: list[str] = field(default_factory=list)
    cancelled: bool = False
    error: str | None = None

    @property
    def answered(self) -> int:
        return len(self.answer_ids)

    @property
    def complete(self) -> bool:
        return self.answered == self.total

    @property
    def stopped(self) -> bool:
        """True when the replay ended before its last turn: cancelled, or a model call failed."""
        return not self.complete


class RecallOnly:
    """A long-term memory that recalls but extracts nothing: a replayed turn would store again what
    its original turn stored."""

    def __init__(self, long_term):
        self.long_term = long_term

    def prepare_request(self, session_id, prompt):
        return self.long_term.prepare_request(session_id, prompt)

    def after_turn(self, session_id, user_content, assistant_content):
        return None


@dataclass(frozen=True)
class _Plan:
    """A replay ready to run: the runner that answers, the source leaf and its user turns."""

    runner: ChatRunner
    source_leaf_id: str
    turns: list

    def mark(self, original_id):
        return {REPLAY_KEY: {"of": original_id, "source_leaf": self.source_leaf_id, "model": self.runner.model}}


def replay_branch(runner, leaf_id, *, model=None, on_progress=None, cancel=None, **completion_args) -> ReplayResult:
    """Ask every user turn of the branch ending at ``leaf_id`` (the stored originals, overlays not
    applied) again under ``model`` (default: ``runner``'s) and ``completion_args`` (merged over the
    runner's), storing the answers as a sibling branch from the branch's first user message.

    Long-term memories are recalled as in a chat, but nothing is extracted after a replayed turn:
    the original turns already stored what they taught. ``on_progress(done, total)`` is called
    before the first turn and after each answer; ``cancel`` (a ``threading.Event``) is checked
    between turns. A ModelError stops the replay and keeps what was stored (``result.error``).
    An unknown leaf is a NotFoundError, a branch without a user message an InvalidInputError.
    """
    return _run(_prepare(runner, leaf_id, model, completion_args), on_progress, cancel)


class ReplayJob(BackgroundJob):
    """``replay_branch`` on a thread of its own: ``done`` of ``total`` turns, ``cancel()``, and the
    ReplayResult as ``result`` once it ended. The leaf, model and arguments are checked here, so a
    wrong one is refused at once rather than on the thread."""

    what = "the replay"

    def __init__(self, runner, leaf_id, *, model=None, **completion_args):
        plan = _prepare(runner, leaf_id, model, completion_args)
        super().__init__(f"replay of {leaf_id} with {plan.runner.model}", len(plan.turns),
                         lambda progress, cancel: _run(plan, progress, cancel))
        self.session_id = runner.session.session_id
        self.source_leaf_id = leaf_id
        self.model = plan.runner.model


def user_turns(path) -> list[tuple[dict, list[dict]]]:
    """``[(user message, the messages answering it)]`` of a root-to-leaf path; the answer of a turn is
    everything up to the next user message. What precedes the first user message is no turn."""
    turns = []
    for message in path:
        if message["role"] == "user":
            turns.append((message, []))
        elif turns:
            turns[-1][1].append(message)
    return turns


def replay_mark(message) -> dict | None:
    """``{"of", "source_leaf", "model"}`` when a replay wrote ``message``, else None."""
    mark = (message.get("metadata") or {}).get(REPLAY_KEY)
    return mark if isinstance(mark, dict) else None


def is_replay_of(message, leaf_id) -> bool:
    """True when a replay of the branch ending at ``leaf_id`` wrote ``message``."""
    return (replay_mark(message) or {}).get("source_leaf") == leaf_id


def replays_of(session, leaf_id) -> list[dict]:
    """The leaves of the replays of the branch ending at ``leaf_id``, newest first (a replay branch
    that was chatted on since ends in an unmarked message and is not listed)."""
    return [leaf for leaf in session.get_leaves() if is_replay_of(leaf, leaf_id)]


def _prepare(runner, leaf_id, model, completion_args):
    turns = user_turns(_stored_branch(runner.session, leaf_id))
    if not turns:
        raise InvalidInputError(f"the branch ending at {leaf_id!r} has no user message: there is nothing to replay")
    return _Plan(_replay_runner(runner, model, completion_args), leaf_id, turns)


def _replay_runner(runner, model, completion_args):
    """A runner like ``runner`` (same session, tools, window, tool rounds) with the replay's model and
    arguments, whose long-term memory only recalls."""
    long_term = RecallOnly(runner.long_term) if runner.long_term is not None else None
    return type(runner)(runner.session, model=model or runner.model, long_term=long_term,
                        max_tool_rounds=runner.max_tool_rounds, history_window=runner.history_window,
                        repair_tool_pairs=runner.repair_tool_pairs, **{**runner.completion_kwargs, **completion_args})


def _stored_branch(session, leaf_id):
    if not isinstance(leaf_id, str) or session.get_message(leaf_id) is None:
        raise NotFoundError(f"no message {leaf_id!r} in session {session.session_id!r}: pick a leaf of "
                            "session.get_leaves()")
    return session.get_history(leaf_id, apply_compactions=False)


def _run(plan, on_progress, cancel) -> ReplayResult:
    result = ReplayResult(plan.source_leaf_id, plan.runner.model, len(plan.turns))
    _report(on_progress, 0, result.total)
    for index, (original, replies) in enumerate(plan.turns):
        if cancel is not None and cancel.is_set():
            result.cancelled = True
            break
        user = original  # the first turn is answered again where it stands: the fork
        if index:
            user = _copied(plan.runner.session, original, result.leaf_id, plan.mark(original["id"]))
            result.leaf_id = user["id"]
        if not _answer_turn(plan, user, plan.mark(_first_answer_id(replies)), result):
            break
        _report(on_progress, result.answered, result.total)
    return result


def _answer_turn(plan, user, mark, result) -> bool:
    """Answer ``user`` and add the marked answer to ``result``; False when the model failed (a partial
    answer it stored is marked and ends the branch)."""
    runner = plan.runner
    try:
        answer = runner._reply(user, False)  # answers a stored user message; the public calls store a new one
    except ModelError as error:
        result.error = str(error)
        partial = runner.last_message
        if partial is not None and partial["parent_id"] == user["id"]:
            result.leaf_id = _marked(runner.session, partial, mark)["id"]
        return False
    result.leaf_id = _marked(runner.session, answer, mark)["id"]
    result.answer_ids.append(result.leaf_id)
    return True


def _copied(session, original, parent_id, mark):
    return session.append_message({"role": "user", "parts": original["parts"], "metadata": mark}, parent_id=parent_id)


def _marked(session, message, mark):
    return session.update_message({**message, "metadata": {**message["metadata"], **mark}})


def _first_answer_id(replies):
    return next((m["id"] for m in replies if m["role"] == "assistant"), None)


def _report(on_progress, done, total):
    if on_progress is not None:
        on_progress(done, total)


# -- comparison ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class BranchComparison:
    """Two branches' answers side by side, one row per user turn (``COMPARISON_COLUMNS``), and
    ``totals`` per branch (``{"a": {...}, "b": {...}}``: answers, input and output tokens, cost,
    latency). ``user_b`` is B's question where it differs from A's; ``shared`` marks a turn both
    branches answer with the same stored message (before they fork)."""

    leaf_a: str
    leaf_b: str
    rows: list[dict]
    totals: dict

    def frame(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self.rows, columns=COMPARISON_COLUMNS)

    def _repr_html_(self):
        head = "".join(f"<th>{html.escape(label)}</th>" for label in
                       ("#", "User", f"A · {self.leaf_a}", f"B · {self.leaf_b}"))
        body = "".join(
            f"<tr><td>{row['turn']}</td><td>{_html_text(row['user'])}</td>"
            f"<td>{_html_answer(row, 'a')}</td><td>{_html_answer(row, 'b')}</td></tr>" for row in self.rows)
        foot = (f"<tr><th></th><th>Totals</th><th>{html.escape(describe_totals(self.totals['a']))}</th>"
                f"<th>{html.escape(describe_totals(self.totals['b']))}</th></tr>")
        return (f"<table style='white-space: pre-wrap; vertical-align: top'><thead><tr>{head}</tr></thead>"
                f"<tbody>{body}</tbody><tfoot>{foot}</tfoot></table>")


def compare_branches(session, leaf_a, leaf_b) -> BranchComparison:
    """Line up the answers of the branches ending at ``leaf_a`` and ``leaf_b`` by user turn (the
    n-th user message of each, stored originals). Tokens come from each answer's stored usage, the
    output falling back to the stored estimate when the model reported none."""
    turns_a, turns_b = (user_turns(_stored_branch(session, leaf)) for leaf in (leaf_a, leaf_b))
    rows = [_row(index, _at(turns_a, index), _at(turns_b, index)) for index in range(max(len(turns_a), len(turns_b)))]
    return BranchComparison(leaf_a, leaf_b, rows, {side: _totals(rows, side) for side in "ab"})


def describe_totals(totals) -> str:
    """One line for a branch's totals: "3 answers · 120 in / 45 out tokens · $0.0001 · 2.1 s"."""
    cost = "cost unknown" if totals["cost"] is None else f"${totals['cost']:.6f}"
    tokens_in = "?" if totals["input_tokens"] is None else f"{totals['input_tokens']:,}"
    return (f"{totals['answers']} answers · {tokens_in} in / {totals['output_tokens']:,} out tokens · {cost} · "
            f"{totals['latency_ms'] / 1000:.1f} s")


def _at(turns, index):
    return turns[index] if index < len(turns) else (None, [])


def _row(index, turn_a, turn_b):
    (user_a, replies_a), (user_b, replies_b) = turn_a, turn_b
    text_a = message_text(user_a) if user_a else None
    text_b = message_text(user_b) if user_b else None
    answers_a, answers_b = _answers(replies_a), _answers(replies_b)
    return {
        "turn": index + 1, "user": text_a if text_a is not None else text_b,
        "user_b": text_b if text_a is not None and text_b != text_a else None,
        **_side(answers_a, "a"), **_side(answers_b, "b"),
        "shared": bool(answers_a) and [m["id"] for m in answers_a] == [m["id"] for m in answers_b],
    }


def _answers(replies):
    return [message for message in replies if message["role"] == "assistant"]


def _side(answers, side):
    """The columns of one branch's answer to a turn (several assistant messages count as one answer)."""
    if not answers:
        return {f"{column}_{side}": None for column in SIDE_COLUMNS}
    metadata = [message.get("metadata") or {} for message in answers]
    usages = [m.get("usage") if isinstance(m.get("usage"), dict) else {} for m in metadata]
    reported_in = [_tokens(usage, "prompt_tokens", "input_tokens") for usage in usages]
    output = [_tokens(usage, "completion_tokens", "output_tokens") for usage in usages]
    return {
        f"answer_{side}": "\n\n".join(filter(None, map(message_text, answers))),
        f"input_tokens_{side}": _known_sum(reported_in),
        f"output_tokens_{side}": sum(o if o is not None else m.get("tokens") or 0 for o, m in zip(output, answers)),
        f"cost_{side}": _known_sum(m.get("cost") for m in metadata),
        f"latency_ms_{side}": _known_sum(m.get("latency_ms") for m in metadata),
        f"model_{side}": next((m["model"] for m in metadata if isinstance(m.get("model"), str)), None),
    }


def _tokens(usage, *keys):
    return next((usage[key] for key in keys if isinstance(usage.get(key), int)), None)


def _known_sum(values):
    """The sum of the numbers among ``values``; None when none is known."""
    known = [value for value in values if isinstance(value, (int, float)) and not isinstance(value, bool)]
    return sum(known) if known else None


def _totals(rows, side):
    answered = [row for row in rows if row[f"answer_{side}"] is not None]

    def total(key):
        return _known_sum(row[f"{key}_{side}"] for row in answered)

    return {"answers": len(answered), "input_tokens": total("input_tokens"),
            "output_tokens": total("output_tokens") or 0, "cost": total("cost"), "latency_ms": total("latency_ms") or 0}


def _html_text(text):
    return "" if text is None else html.escape(text)


def _html_answer(row, side):
    if row[f"answer_{side}"] is None:
        return "<em>no answer</em>"
    cost = row[f"cost_{side}"]
    detail = (f"{row[f'model_{side}'] or 'model unknown'} · {row[f'output_tokens_{side}']:,} tokens out"
              + ("" if cost is None else f" · ${cost:.6f}"))
    return f"{_html_text(row[f'answer_{side}'])}<br><small>{html.escape(detail)}</small>"
