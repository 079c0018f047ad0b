"""Prompt-cache cost per turn: how much of each request a provider's prefix cache could serve.

``ChatRunner`` fingerprints the first request of every turn as a list of elements: the system
prompt with the tool schemas, the recalled memories message when there is one, then one element per
history message as sent (after overlays and micro-compaction). An element is
``[kind, id, digest, tokens]``. A turn stores only what changed: the position where its request
first differs from the previous request on the same branch (the nearest ancestor assistant turn
with a fingerprint) and the elements from there on, under ``metadata["prompt_cache"]``. Walking a
branch's stored originals from the root rebuilds every request, segment by segment.

``prompt_cache_report`` turns that walk into one row per assistant turn: the cached prefix, what
was lost and why, and the cost with and without caching from litellm's price map.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..history.overlays import is_summary_message
from ..store import capabilities
from ..tokens import MESSAGE_OVERHEAD_TOKENS, estimate_message_tokens, estimate_string_tokens

if TYPE_CHECKING:
    import pandas as pd

PROMPT_CACHE_KEY = "prompt_cache"
SYSTEM, MEMORIES, MESSAGE, CUT, SUMMARY = "system", "memories", "message", "cut", "summary"
"""Element kinds: a ``cut`` element is a history message that micro-compaction shortened."""
CAUSE_PHRASES = {"block write": "a block write", "memories": "new memories", "compaction": "a compaction",
                 "micro-compaction": "a micro-compaction", "edit": "an edit", "history window": "the history window"}
"""What can invalidate the cached prefix, and how a caption names it."""
COLUMNS = ["turn", "message_id", "recorded", "model", "request_tokens", "cached_tokens", "uncached_tokens",
           "lost_tokens", "cause", "tool_rounds", "input_tokens", "cached_input_tokens", "output_tokens",
           "provider_prompt_tokens", "provider_cached_tokens", "cost_cached", "cost_uncached"]
TOTAL_KEYS = ("request_tokens", "cached_tokens", "uncached_tokens", "lost_tokens", "input_tokens",
              "cached_input_tokens", "output_tokens")


# -- recording (ChatRunner) --------------------------------------------------------------------

def _digest(text) -> str:
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def _text_tokens(text) -> int:
    return MESSAGE_OVERHEAD_TOKENS + estimate_string_tokens(text) if text else 0


@dataclass
class RequestFingerprint:
    """One request's elements: ``keys`` ``(kind, id, in-process hash of the rendering, tokens)``,
    cheap to compare and to keep between turns (a kept reference to the sent messages would keep
    a whole history alive and slow the next turn's reads by more than hashing costs), and the
    ``renderings`` that ``stored`` digests for a record. A rendering is the ``repr`` of what is
    sent: stable for values read back from rows (their keys keep the stored order), and a third
    cheaper than JSON."""
    keys: list[tuple]
    renderings: list[str]

    def add(self, kind, element_id, sent, tokens):
        rendering = repr(sent)
        self.keys.append((kind, element_id, hash(rendering), tokens))
        self.renderings.append(rendering)

    @property
    def tokens(self) -> int:
        return sum(key[3] for key in self.keys)

    def stored(self, start=0) -> list[list]:
        """The elements from ``start`` on as a record keeps them: ``[kind, id, digest, tokens]``."""
        return [[kind, element_id, _digest(rendering), tokens]
                for (kind, element_id, _, tokens), rendering in zip(self.keys[start:], self.renderings[start:])]


def request_fingerprint(system_prompt, tools, memories_text, whole, sent) -> RequestFingerprint:
    """The fingerprint of one request: the system prompt with the tool schemas (both come from the
    context blocks), the memories message when ``memories_text``, then each message of ``sent`` (the
    history as sent) beside ``whole`` (the same messages before micro-compaction)."""
    tool_tokens = sum(estimate_string_tokens(json.dumps(schema)) for schema in tools or ())
    fingerprint = RequestFingerprint([], [])
    fingerprint.add(SYSTEM, None, (system_prompt, tools), _text_tokens(system_prompt) + tool_tokens)
    if memories_text:
        fingerprint.add(MEMORIES, None, memories_text, _text_tokens(memories_text))
    for original, message in zip(whole, sent):
        tokens = message.get("tokens")
        fingerprint.add(SUMMARY if is_summary_message(message) else CUT if message is not original else MESSAGE,
                        message.get("id"), (message["role"], message["parts"]),
                        estimate_message_tokens(message) if tokens is None else tokens)
    return fingerprint


def shared_prefix_length(previous, current) -> int:
    """How many leading elements ``previous`` and ``current`` share."""
    length = min(len(previous), len(current))
    for index in range(length):
        if previous[index] != current[index]:
            return index
    return length


class RequestRecorder:
    """A runner's memory of its latest request, so an ordinary turn (one that continues the runner's
    previous answer) diffs against it without rebuilding it from the branch. One per runner."""

    def __init__(self):
        self.turn_id = None  # the assistant message whose first request ``keys`` describes
        self.keys = None

    def record(self, session, user, history, fingerprint) -> dict:
        """What the turn answering ``user`` stores: ``{"after", "from", "elements"}``. ``history``
        is the overlaid history ending at ``user``, read for the request already."""
        if self.keys is not None and self.turn_id == user["parent_id"]:
            start = shared_prefix_length(self.keys, fingerprint.keys)
            return {"after": self.turn_id, "from": start, "elements": fingerprint.stored(start)}
        turn_id, previous = _previous_request(session, user, history)
        current = fingerprint.stored()
        start = shared_prefix_length(previous, current)
        return {"after": turn_id, "from": start, "elements": current[start:]}

    def remember(self, turn_id, fingerprint):
        self.turn_id, self.keys = turn_id, fingerprint.keys


def _previous_request(session, user, history):
    """``(turn id, elements)`` of the nearest fingerprinted assistant turn above ``user``. Turns
    hidden under a compaction count, so the stored originals are read when a summary shows."""
    if any(is_summary_message(message) for message in history):
        history = session.get_history(user["id"], apply_compactions=False)
    chain = RequestChain()
    for message in history:
        if message["role"] == "assistant":
            chain.advance(message)
    return chain.turn_id, list(chain.elements or ())


# -- rebuilding (a branch's stored segments) ----------------------------------------------------

@dataclass
class MeasuredTurn:
    """One fingerprinted turn, measured against the previous request of its branch."""
    request_tokens: int
    cached_tokens: int
    lost_tokens: int
    cause: str | None
    rounds: list[int]


class RequestChain:
    """The latest request of a branch, rebuilt one assistant turn at a time from root to leaf.

    ``elements`` is None after a segment that cannot be rebuilt (its previous turn was deleted):
    from there only a turn stored whole (``from`` 0) is understood again.
    """

    def __init__(self):
        self.turn_id = None
        self.elements = []
        self._sums = [0]  # token prefix sums of ``elements``

    def advance(self, message) -> MeasuredTurn | None:
        """Apply the turn ``message`` (an assistant message); None when it holds no usable fingerprint."""
        record = (message.get("metadata") or {}).get(PROMPT_CACHE_KEY)
        if not _well_formed(record):
            return None
        start, tail = record["from"], record["elements"]
        previous = self.elements
        follows = previous is not None and record.get("after") == self.turn_id and start <= len(previous)
        self.turn_id = message["id"]
        if not follows:
            if start:  # a change against a request that is no longer on this branch
                self.elements, self._sums = None, [0]
                return None
            previous = previous or []  # stored whole: measure it against this branch's request
            start = shared_prefix_length(previous, tail)
            tail = tail[start:]
        previous_tokens = self._sums[-1]
        cause = _cause(previous, start, tail)
        del previous[start:]
        del self._sums[start + 1:]
        for element in tail:
            previous.append(element)
            self._sums.append(self._sums[-1] + element[3])
        self.elements = previous
        return MeasuredTurn(self._sums[-1], self._sums[start], previous_tokens - self._sums[start], cause,
                    [size for size in record.get("rounds") or () if isinstance(size, int)])


def _well_formed(record) -> bool:
    return (isinstance(record, dict) and isinstance(record.get("from"), int) and record["from"] >= 0
            and isinstance(record.get("elements"), list)
            and all(isinstance(e, list) and len(e) == 4 and isinstance(e[3], int) for e in record["elements"]))


def _cause(previous, start, tail) -> str | None:
    """What invalidated ``previous`` from position ``start`` on, where the new request
    (``previous[:start] + tail``) first differs from it; None for a pure append."""
    if start >= len(previous):
        return None
    before, after = previous[start], tail[0] if tail else None
    kinds = {before[0], after[0] if after else None}
    if SYSTEM in kinds:
        return "block write"
    if MEMORIES in kinds:
        return "memories"
    if SUMMARY in kinds:
        return "compaction"
    if after is not None and after[1] == before[1]:  # the same message, rendered differently
        return "micro-compaction" if (before[0] == CUT) != (after[0] == CUT) else "edit"
    oldest_sent = previous[start - 1][0] in (SYSTEM, MEMORIES)
    if oldest_sent and before[1] not in {element[1] for element in tail}:
        return "history window"  # the oldest message sent last time is no longer sent
    return "edit"


# -- the report -------------------------------------------------------------------------------

@dataclass
class PromptCacheReport:
    """One row per assistant turn of a branch (``COLUMNS``), oldest first, and notes on the prices."""
    rows: list[dict]
    notes: list[str] = field(default_factory=list)

    def __len__(self):
        return len(self.rows)

    @property
    def recorded_rows(self) -> list[dict]:
        return [row for row in self.rows if row["recorded"]]

    def frame(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self.rows, columns=COLUMNS)

    def by_message_id(self) -> dict[str, dict]:
        return {row["message_id"]: row for row in self.rows}

    def totals(self) -> dict:
        """Sums over the recorded turns, the cached share of their input, and tokens lost by cause.
        A cost total is None when any recorded turn has no price."""
        recorded = self.recorded_rows
        totals = {"turns": len(self.rows), "recorded": len(recorded)}
        totals.update({key: sum(row[key] for row in recorded) for key in TOTAL_KEYS})
        for key in ("cost_cached", "cost_uncached"):
            costs = [row[key] for row in recorded]
            totals[key] = None if None in costs else sum(costs)
        totals["cached_share"] = (totals["cached_input_tokens"] / totals["input_tokens"]
                                  if totals["input_tokens"] else 0.0)
        lost = {}
        for row in recorded:
            if row["lost_tokens"]:
                lost[row["cause"]] = lost.get(row["cause"], 0) + row["lost_tokens"]
        totals["lost_by_cause"] = lost
        return totals

    def _repr_html_(self):
        from ..display.notebook import table_html

        captions = [turn_cache_caption(row) for row in self.rows]
        rows = [{"turn": row["turn"], "message": row["message_id"], "cache": caption, "cause": row["cause"]}
                for row, caption in zip(self.rows, captions)]
        return table_html(rows, caption=" ".join(self.notes) or None)


def prompt_cache_report(session, leaf_id=None, *, model=None) -> PromptCacheReport:
    """The prompt-cache report of the branch ending at ``leaf_id`` (default: the newest leaf).

    Each turn is priced as its stored model, or as ``model`` when given (a litellm model string:
    "what would this branch cost on gpt-4o?"). Turns ChatRunner did not send (imported ones) are
    rows with ``recorded`` False and no numbers.
    """
    if leaf_id is None:
        leaf_id = session.get_latest_leaf_id()
    chain, rows = RequestChain(), []
    for message in capabilities.assistant_turns(session.storage, leaf_id) if leaf_id else ():
        rows.append(_row(len(rows) + 1, message, chain.advance(message)))
    notes = _price(rows, model)
    if not any(row["recorded"] for row in rows):
        notes.insert(0, "No turn on this branch was recorded: chat on this branch to record requests.")
    return PromptCacheReport(rows, notes)


def _row(turn, message, step):
    metadata = message.get("metadata") or {}
    usage = metadata.get("usage") if isinstance(metadata.get("usage"), dict) else {}
    row = dict.fromkeys(COLUMNS)
    row.update(turn=turn, message_id=message["id"], recorded=step is not None, model=metadata.get("model"),
               provider_prompt_tokens=usage.get("prompt_tokens"), provider_cached_tokens=usage.get("cached_tokens"))
    if step is None:
        return row
    sizes = [step.request_tokens, *step.rounds]
    cached_input = step.cached_tokens + sum(sizes[:-1])  # a tool round is cached up to the round before
    row.update(request_tokens=step.request_tokens, cached_tokens=step.cached_tokens,
               uncached_tokens=step.request_tokens - step.cached_tokens, lost_tokens=step.lost_tokens,
               cause=step.cause, tool_rounds=len(step.rounds), input_tokens=sum(sizes),
               cached_input_tokens=cached_input, output_tokens=int(usage.get("completion_tokens") or 0))
    return row


def _price(rows, model) -> list[str]:
    """Fill each recorded row's costs; returns notes on the models litellm cannot price."""
    prices, notes = {}, []
    for row in rows:
        if not row["recorded"]:
            continue
        name = model or row["model"]
        if name not in prices:
            prices[name] = model_prices(name)
            notes.extend(_price_notes(name, prices[name]))
        price = prices[name]
        if price is None:
            continue
        uncached_input = row["input_tokens"] - row["cached_input_tokens"]
        output = row["output_tokens"] * price["output"]
        row["cost_uncached"] = row["input_tokens"] * price["input"] + output
        row["cost_cached"] = row["cached_input_tokens"] * price["cache_read"] + uncached_input * price["input"] + output
    return notes


def _price_notes(name, price):
    if price is None:
        return [f"litellm's cost map has no prices for {name!r}: its turns have no costs."]
    if price["cache_read_missing"]:
        return [f"litellm's cost map has no cached-input price for {name!r}: its cached cost is the uncached one."]
    return []


def model_prices(model) -> dict | None:
    """``{"input", "cache_read", "output", "cache_read_missing"}`` in dollars per token from litellm's
    cost map, or None where the map has no input price. The embedded model is free."""
    from .models import _is_local, _litellm

    if not isinstance(model, str) or not model:
        return None
    if _is_local(model):
        return {"input": 0.0, "cache_read": 0.0, "output": 0.0, "cache_read_missing": False}
    try:
        info = _litellm().get_model_info(model)
    except Exception:  # litellm raises for models missing from its map
        return None
    if info.get("input_cost_per_token") is None:
        return None
    cache_read = info.get("cache_read_input_token_cost")
    return {"input": info["input_cost_per_token"], "output": info.get("output_cost_per_token") or 0.0,
            "cache_read": info["input_cost_per_token"] if cache_read is None else cache_read,
            "cache_read_missing": cache_read is None}


def turn_cache_caption(row) -> str:
    """One line for a turn (a report row), e.g. "cache: 1,234 of 1,500 tokens a cached prefix (82%)
    · 300 lost to a compaction · $0.0012 vs $0.0030 uncached"."""
    if not row["recorded"]:
        return "cache: not recorded (ChatRunner did not send this turn)"
    request, cached = row["request_tokens"], row["cached_tokens"]
    pieces = [f"cache: {cached:,} of {request:,} tokens a cached prefix ({cached / request if request else 0:.0%})"]
    if row["lost_tokens"]:
        pieces.append(f"{row['lost_tokens']:,} lost to {CAUSE_PHRASES.get(row['cause'], row['cause'])}")
    if row["provider_cached_tokens"] is not None:
        pieces.append(f"provider: {row['provider_cached_tokens']:,} cached")
    if row["cost_uncached"]:  # unknown or free (the embedded model): no price to compare
        pieces.append(f"{dollars(row['cost_cached'])} vs {dollars(row['cost_uncached'])} uncached")
    return " · ".join(pieces)


def dollars(amount) -> str:
    """A cost in dollars: four decimals, six under a tenth of a cent (a short turn on a cheap model)."""
    return f"${amount:.4f}" if amount == 0 or amount >= 0.001 else f"${amount:.6f}"
