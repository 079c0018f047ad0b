"""Stretches of a text near the matches of a pattern, so a costly pattern runs only where it can match.

The fact matcher's full tokenizer and several of the artifact ledger's patterns can only match near
some character or short hint (a digit, a slash, a month's name). Scanning a long text with such a
pattern tries a match at every position; scanning only the stretches within a few words of each
hint finds the same matches, provided every match holds a hint and spans at most that many
whitespace-separated words on either side of it.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from itertools import chain


@lru_cache(maxsize=None)
def _words_ahead(words: int) -> re.Pattern:
    return re.compile(rf"\S*(?:\s+\S+){{0,{words}}}")


def _word_start(text: str, at: int, floor: int) -> int:
    """Where the word holding ``at`` starts, or earlier, never before ``floor``: just after the last
    space, tab or line break before it. Other white space is not looked for, which can only make a
    stretch longer."""
    return max(text.rfind(" ", floor, at), text.rfind("\n", floor, at), text.rfind("\t", floor, at)) + 1 or floor


def stretches(text: str, near: re.Pattern, words: int, start: int = 0, end: int | None = None) -> list[list[int]]:
    """``[start, end]`` of each stretch of ``text`` within ``words`` words of a match of ``near``
    (between ``start`` and ``end``, where given), overlapping stretches merged, in order. A stretch
    starts at the text's start or just after white space, and ends at white space or at the text's
    end: a pattern run on it (or on a slice of it) sees at its edges what it sees in the whole text."""
    hints = near.finditer(text, start, len(text) if end is None else end)
    first = next(hints, None)
    if first is None:  # most texts hold no hint: spared the rest
        return []
    return stretches_around(text, chain((first.span(),), (hint.span() for hint in hints)), words)


def stretches_around(text: str, hints: Iterable[tuple[int, int]], words: int) -> list[list[int]]:
    """``stretches`` around the spans ``hints``, in order of their starts (they may overlap)."""
    found: list[list[int]] = []
    ahead = _words_ahead(words)
    for hint_start, hint_end in hints:
        end = ahead.match(text, hint_end).end()
        if found and hint_start < found[-1][1]:  # inside the last stretch, which it can only extend
            found[-1][1] = max(found[-1][1], end)
            continue
        floor = found[-1][1] if found else 0  # a start at or before it joins the last stretch
        start = _word_start(text, hint_start, floor)
        for _ in range(words):
            while start > floor and text[start - 1].isspace():
                start -= 1
            start = _word_start(text, start, floor)
        if found and start <= found[-1][1]:
            found[-1][1] = max(found[-1][1], end)
        else:
            found.append([start, end])
    return found


class WordHints:
    """Hints that are plain strings, found with ``str.find``: C's substring search reads a text
    several times faster than the regex engine looks for an alternation of words, which stops at
    every letter one of them opens with. Every occurrence counts, overlapping ones too, so the
    stretches around them hold those around a pattern's matches of the same words. ``widen``, where
    set, is a pattern matched where a hint ends that makes it longer (a word and what may follow it)."""

    def __init__(self, words: Iterable[str], widen: dict[str, re.Pattern] | None = None):
        self.words = tuple(words)
        self.widen = widen or {}

    def spans(self, text: str) -> list[tuple[int, int]]:
        """``(start, end)`` of every occurrence of a hint in ``text``, in order of their starts."""
        found = []
        for word in self.words:
            at = text.find(word)
            while at >= 0:
                end = at + len(word)
                wider = self.widen.get(word)
                found.append((at, wider.match(text, end).end() if wider else end))
                at = text.find(word, at + 1)
        found.sort()
        return found

    def found_in(self, text: str) -> bool:
        return any(word in text for word in self.words)
