"""Stretches of a text near the matches of a pattern, so a costly pattern runs only where it can match.

The fact matcher's full tokenizer and several of the artifact ledger's patterns can only match near
some character or short hint (a digit, a slash, a month's name). Scanning a long text with such a
pattern tries a match at every position; scanning only the stretches within a few words of each
hint finds the same matches, provided every match holds a hint and spans at most that many
whitespace-separated words on either side of it.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from functools import lru_cache
from itertools import chain


@lru_cache(maxsize=None)
def _words_ahead(words: int) -> re.Pattern:
    return re.compile(rf"\S*(?:\s+\S+){{0,{words}}}")


@lru_cache(maxsize=None)
def _words_behind(words: int) -> re.Pattern:
    """Read on the reversed text from a hint's start: the rest of the word it stands in, then
    ``words`` more words. A word here ends only at a space, a tab or a line break (other white space
    is not looked for, which can only make a stretch longer); the white space between words is any."""
    return re.compile(rf"[^ \n\t]*(?:\s*[^ \n\t]*){{{words}}}")


def stretches(text: str, near: re.Pattern | AnyOf | AsciiTwin, words: int, start: int = 0,
              end: int | None = None) -> list[list[int]]:
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
    ahead, behind = _words_ahead(words), _words_behind(words)
    length, reverse = len(text), None
    for hint_start, hint_end in hints:
        end = ahead.match(text, hint_end).end()
        if found and hint_start < found[-1][1]:  # inside the last stretch, which it can only extend
            found[-1][1] = max(found[-1][1], end)
            continue
        floor = found[-1][1] if found else 0  # a start at or before it joins the last stretch
        if reverse is None:
            reverse = text[::-1]  # read backwards from the hint in one call of the regex engine
        start = length - behind.match(reverse, length - hint_start, length - floor).end()
        if found and start <= found[-1][1]:
            found[-1][1] = max(found[-1][1], end)
        else:
            found.append([start, end])
    return found


class AnyOf:
    """Hints that are the matches of any of several patterns, each opening with one plain character.
    The regex engine skips to a plain character as fast as ``str.find`` does, while a pattern that
    opens with a class (a digit, one of several characters) has it test every character in turn, about
    six times slower; so a hint such as "a dot between digits" is cheaper written as a dot that looks
    behind itself. Matches of different patterns may overlap: each is a hint."""

    def __init__(self, *sources: str):
        self.patterns = tuple(re.compile(source) for source in sources)

    def finditer(self, text: str, start: int = 0, end: int | None = None) -> Iterator[re.Match]:
        """Every pattern's matches, in order of their starts."""
        end = len(text) if end is None else end
        found = [match for pattern in self.patterns for match in pattern.finditer(text, start, end)]
        if len(self.patterns) > 1:
            found.sort(key=re.Match.start)
        return iter(found)

    def search(self, text: str, start: int = 0, end: int | None = None) -> bool:
        """Whether any pattern matches between ``start`` and ``end``."""
        end = len(text) if end is None else end
        return any(pattern.search(text, start, end) for pattern in self.patterns)


class AsciiTwin:
    """A pattern that opens with a class holding ``\\d``, and its twin for texts of ASCII only, whose
    opening class holds 0-9 instead: the same characters there. Skipping ahead, the regex engine asks
    the Unicode tables whether each character is a digit, where 0-9 is a range it compares with: a scan
    of the twin costs about 40% less. Which of the two reads a text is decided per text (``str.isascii``
    is free: Python records it with the string)."""

    def __init__(self, source: str, opening: str, ascii_opening: str, flags: int = 0):
        if not source.startswith(opening):
            raise ValueError(f"{source!r} does not open with {opening!r}")
        self.pattern = source
        self.unicode = re.compile(source, flags)
        self.ascii = re.compile(ascii_opening + source[len(opening):], flags)

    def finditer(self, text: str, start: int = 0, end: int | None = None) -> Iterator[re.Match]:
        return (self.ascii if text.isascii() else self.unicode).finditer(text, start, len(text) if end is None else end)

    def search(self, text: str, start: int = 0, end: int | None = None) -> re.Match | None:
        return (self.ascii if text.isascii() else self.unicode).search(text, start, len(text) if end is None else end)


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
