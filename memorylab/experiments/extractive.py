"""Extractive summaries: the offline baseline an experiment compares model summaries against.

No model is asked: the span's text is cut into sentences (a tool call is one line, its output
cut), each sentence is scored for the signals summaries must not lose (identifiers, file paths,
numbers, dates, names, decisions), and the sentences adding the most signals not yet kept are
chosen until the token budget is spent, then shown in their original order. Among equal scores the
later sentence wins, since newer state replaces older; sentences with no signal (chatter) never
make it in.
"""
import heapq
import math
import re
from collections import Counter

from ..history.compaction import render_transcript
from ..history.overlays import is_summary_message
from ..history.truncation import truncate_text
from ..messages import is_tool_part
from ..tokens import estimate_string_tokens

MAX_SENTENCE_CHARS = 400
_MONTH = r"(?:[Jj]an|[Ff]eb|[Mm]ar|[Aa]pr|[Mm]ay|[Jj]u[nl]|[Aa]ug|[Ss]ep|[Oo]ct|[Nn]ov|[Dd]ec)[a-z]*\.?"
# Every signal starts at a word boundary, and a cheap look at the first character skips the long
# alternations at most words: this pattern is where a long span's time goes.
_SIGNALS = re.compile(
    rf"""\b(?:
      (?=[DdWwCcIiAaSsGgMmRr])(?P<decision>(?:[Dd]ecid(?:ed?|ing)|[Dd]ecision|[Ww]e'll|[Ww]e\ will
        |[Cc]ho(?:se|ose|sen)|[Ii]nstead|[Aa]greed?|[Ww]ill\ use|[Ss]witch(?:ed|ing)?|[Gg]o(?:ing)?\ with
        |[Mm]oved|[Rr]eplac(?:e|ed|es|ing)|[Ss]ettled|[Cc]onfirmed)\b)
    | (?=[JjFfMmAaSsOoNnDd0-9])(?P<date>\d{{4}}-\d{{2}}-\d{{2}}\b|{_MONTH}\s+\d{{1,2}}\b|\d{{1,2}}\s+{_MONTH})
    | (?P<identifier>\w+(?:[./:@-]\w+)+|[A-Za-z0-9]+(?:_[A-Za-z0-9]+)+|[a-z]+[A-Z]\w*)
    | (?P<number>\d+(?:[.,]\d+)*)
    | (?<=[\w,;)]\ )(?P<name>[A-Z][a-zß-öø-ÿ]+)
    )""",
    re.VERBOSE,
)
_WEIGHTS = {"decision": 3, "date": 3, "identifier": 2, "number": 2, "name": 1}
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9*\"'(\[`])")
_LINE_MARKER = re.compile(r"^\s*(?:[-*+] \[[ x]\]\s+|[-*+>#]+\s+|\d+[.)]\s+)*")


def extractive_summary(messages, target_tokens) -> str:
    """A summary of ``messages`` made of their most informative sentences, each prefixed with its
    role, under a one-line header, all within ``target_tokens`` (estimated); an empty string when
    not even the header fits."""
    header = f"Extractive summary of {len(messages)} messages:"
    budget = target_tokens - _line_cost(header)
    if budget < 0:
        return ""
    lines = ["{}: {}".format(*labelled) for labelled in _labelled_sentences(messages)]
    chosen = _choose(lines, budget)
    return "\n".join([header] + [lines[index] for index in sorted(chosen)])


def _choose(lines, budget):
    """Greedy selection by what each line adds: a signal (the same number, date, identifier or name)
    counts only for the first line chosen that holds it, so the budget goes to different facts rather
    than to repeats of one. Gains only shrink as lines are chosen, so a line whose stored gain is
    stale is re-scored and put back instead of re-scoring every line at every step."""
    signals = _weighted_signals(lines)
    costs = [_line_cost(line) for line in lines]
    covered, chosen = set(), []
    heap = [(-_gain(signals[i], covered, costs[i]), -i) for i in range(len(lines)) if signals[i]]
    heapq.heapify(heap)
    while heap:
        stale, negative_index = heapq.heappop(heap)
        index = -negative_index
        if costs[index] > budget:
            continue
        gain = _gain(signals[index], covered, costs[index])
        if gain <= 0:
            continue
        if gain < -stale and heap and (-gain, negative_index) > heap[0]:
            heapq.heappush(heap, (-gain, negative_index))
            continue
        chosen.append(index)
        covered.update(signals[index])
        budget -= costs[index]
    return chosen


def _line_cost(line):
    """A line's share of the whole summary's estimate: counting each line with its newline, the
    parts never add up to less than the estimate of the joined text."""
    return estimate_string_tokens(line + "\n")


def _weighted_signals(lines) -> list[dict]:
    """``{signal text: weight}`` per line, for what in it a summary must not lose. A signal the span
    keeps returning to (a table, a person, a date) is central to it, so its weight grows with the
    log of the number of lines that hold it."""
    signals = [
        {match.group().lower(): _WEIGHTS[match.lastgroup] for match in _SIGNALS.finditer(line)}
        for line in lines
    ]
    spread = Counter(signal for line_signals in signals for signal in line_signals)
    for line_signals in signals:
        for signal in line_signals:
            line_signals[signal] *= 1 + math.log(spread[signal])
    return signals


def _gain(signals, covered, cost):
    """The weight of the signals not covered yet, divided by the square root of the line's cost: a
    long line full of numbers should not outweigh several short ones that each hold a fact."""
    return sum(weight for signal, weight in signals.items() if signal not in covered) / math.sqrt(cost)


def _labelled_sentences(messages):
    """``(label, sentence)`` in message order; a tool call is one sentence with its result, even when
    the result came in a later tool message (then that result is not repeated)."""
    results = {
        part.get("toolCallId"): part
        for message in messages if message.get("role") == "tool"
        for part in message.get("parts") or () if is_tool_part(part) and "output" in part
    }
    called = set()
    for message in messages:
        label = "earlier summary" if is_summary_message(message) else message.get("role")
        for part in message.get("parts") or ():
            if part.get("type") == "text":
                for sentence in _sentences(part.get("text") or ""):
                    yield label, sentence
            elif is_tool_part(part) and part.get("toolCallId") not in called:
                yield label, _tool_sentence(part, results.get(part.get("toolCallId")))
                called.add(part.get("toolCallId"))


def _tool_sentence(call, result):
    """The call as the summary prompt's transcript shows it (``tool NAME(input) -> output``), cut."""
    if "output" not in call and result is not None:
        call = {**call, "output": result["output"]}
    rendered = render_transcript([{"role": "", "parts": [call]}]).removeprefix(": ")
    return truncate_text(rendered, MAX_SENTENCE_CHARS)


def _sentences(text):
    """The text's sentences, markdown list and heading markers and bold stripped; the lines of fenced
    code blocks are left out: code is rarely where a conversation's facts are stated."""
    in_code = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        line = _LINE_MARKER.sub("", line).replace("**", "").strip()
        for sentence in _SENTENCE_END.split(line):
            if sentence:
                yield truncate_text(sentence, MAX_SENTENCE_CHARS)
