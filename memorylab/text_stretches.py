"""Stretches of a text near the matches of a pattern, so a costly pattern runs only where it can match.

The fact matcher's full tokenizer and several of the artifact ledger's patterns can only match near
some character or short hint (a digit, a slash, a month's name). Scanning a long text with such a
pattern tries a match at every position; scanning only the stretches within a few words of each
hint finds the same matches, provided every match holds a hint and spans at most that many
whitespace-separated words on either side of it.
"""
from __future__ import annotations

import re
from functools import lru_cache


@lru_cache(maxsize=None)
def _words_ahead(words: int) -> re.Pattern:
    return re.compile(rf"\S*(?:\s+\S+){{0,{words}}}")


def _word_start(text: str, at: int, floor: int) -> int:
    """Where the word holding ``at`` starts, or earlier, never before ``floor``: just after the last
    space, tab or line break before it. Other white space is not looked for, which can only make a
    stretch longer."""
    return max(text.rfind(" ", floor, at), text.rfind("\n", floor, at), text.rfind("\t", floor, at)) + 1 or floor


def stretches(text: str, near: re.Pattern, words: int) -> list[list[int]]:
    """``[start, end]`` of each stretch of ``text`` within ``words`` words of a match of ``near``,
    overlapping stretches merged, in order. A stretch starts at the text's start or just after
    white space, and ends at white space or at the text's end: a pattern run on it (or on a slice of
    it) sees at its edges what it sees in the whole text."""
    found: list[list[int]] = []
    ahead = _words_ahead(words)
    for hint in near.finditer(text):
        end = ahead.match(text, hint.end()).end()
        if found and hint.start() < found[-1][1]:  # inside the last stretch, which it can only extend
            found[-1][1] = max(found[-1][1], end)
            continue
        floor = found[-1][1] if found else 0  # a start at or before it joins the last stretch
        start = _word_start(text, hint.start(), floor)
        for _ in range(words):
            while start > floor and text[start - 1].isspace():
                start -= 1
            start = _word_start(text, start, floor)
        if found and start <= found[-1][1]:
            found[-1][1] = max(found[-1][1], end)
        else:
            found.append([start, end])
    return found
