"""A pattern run only on the stretches near its hints finds what it finds in the whole text.

The artifact ledger and the fact matcher rely on this to skip most of a long text; each test
compares the shortcut with the whole-text scan on texts built to stress the stretches' edges
(white space of every kind, hints at the text's ends, hints close enough to merge)."""
import random
import re

import pytest

from memorylab.audit import artifacts
from memorylab.experiments import facts
from memorylab.text_stretches import WordHints, stretches

_PIECES = ["15 Nov 2026", "15th of\n\nNovember,   2026", "Nov.  15th, 2026", "December\t2022", "Sept 3", "May 2024",
           "Python\n3.11", "Node.js  20.1", "release\tv3.1", "Go 1.22", "+1 (555) 123 4567", "+44 20 7946 0958",
           "(555) 123-4567", "555-123-4567", "a@b.co", "550e8400-e29b-41d4-a716-446655440000", "src/app/main.py",
           "./a/b", "Makefile", "deadbeef12", "v1.2.3-rc.1", "==2.31.0", "3,000", "2.3M", "version: 2.1", "30 minutes",
           "€49.90", "100%", "$3.5 million", "classes", "the", "x", "~/.bashrc", "Dockerfile.dev", "a.git"]
_STATEMENTS = [
    "we are going to go with", "we're going\tto switch to", "We have decided to standardize on", "going forward,\nuse",
    "let us\n\nship", "go ahead with", "i would  rather", "keep it under", "must not be", "mustn't go",
    "under no circumstances", "Decision (final, v 2 of a b c d e):", "revised decision:", "agreed", "never",
    "do not touch", "no more than", "limited to", "from now on", "i'd rather", "Postgres", "it",
]
_SEPARATORS = [" ", "  ", "\n", "\t", " - ", ", ", "(", "/", ".", "", " \n ", "\r\n", "\u00a0", "\u2003", "\x1c"]


def _texts(count, seed):
    rng = random.Random(seed)
    for _ in range(count):
        yield "".join(rng.choice(_PIECES) + rng.choice(_SEPARATORS) for _ in range(rng.randint(1, 9)))


def test_stretches_start_after_white_space_end_before_it_and_merge():
    text = "one two 3 four five six seven 8 nine"
    assert stretches(text, re.compile(r"\d"), 1) == [[4, 14], [24, 36]]
    assert stretches(text, re.compile(r"\d"), 3) == [[0, 36]]  # close enough to join
    assert stretches("ab/cd", re.compile("/"), 0) == [[0, 5]]
    assert stretches("no hint here", re.compile(r"\d"), 2) == []


@pytest.mark.parametrize("kind", [k for k in artifacts._PROSE_KINDS if k.near], ids=lambda k: k.pattern.pattern[:24])
def test_a_ledger_pattern_finds_the_same_matches_on_its_stretches(kind):
    for text in _texts(3000, seed=11):
        whole = [m.span() for m in kind.pattern.finditer(text)]
        near = [m.span() for start, end in stretches(text, kind.near, kind.reach)
                for m in kind.pattern.finditer(text, start, end)]
        assert near == whole, text


def test_the_matchers_zones_give_the_tokens_of_the_whole_text():
    for text in _texts(3000, seed=12):
        assert facts._offers(text) == [token.offers for token in facts._tokens(text)], text


@pytest.mark.parametrize("statement", [artifacts._DECISION, artifacts._CONSTRAINT], ids=("decision", "constraint"))
def test_a_statement_pattern_finds_the_same_matches_on_its_stretches(statement):
    rng = random.Random(13)
    for _ in range(3000):
        text = "".join(rng.choice(_STATEMENTS + _PIECES) + rng.choice(_SEPARATORS) for _ in range(rng.randint(1, 12)))
        lower = text.lower()
        whole = [m.span() for m in statement.plain.finditer(lower)]
        assert [m.span() for m in statement.finditer(text, lower)] == whole, text


def test_a_grouped_alternation_matches_what_the_plain_alternation_matches():
    sources = [*artifacts._CONSTRAINT_HINTS, "no", "do", r"decision\b\s*(?:\([^)\n]{0,30}\))?", "Go", "Google"]
    grouped, plain = artifacts._alternation(sources), re.compile("|".join(sources))
    for text in _texts(2000, seed=14):
        text = text + " no more do not decision (x y): Google never"
        assert [m.span() for m in grouped.finditer(text)] == [m.span() for m in plain.finditer(text)], text
    with pytest.raises(ValueError, match="plain character"):
        artifacts._alternation([r"\bword"])


def _prose_the_long_way(text):
    """What ``_Finder.prose`` finds, with every kind's pattern run on the whole text: no hint, gate,
    stretch or digit window."""
    finder, claimed = artifacts._Finder("m"), bytearray(len(text))
    for kind in artifacts._PROSE_KINDS:
        for match in kind.pattern.finditer(text):
            finder._claim(claimed, match, kind.found)
    return finder.found


def test_the_ledgers_shortcuts_find_what_every_pattern_finds_on_the_whole_text():
    rng = random.Random(15)
    pieces = _PIECES + ["$ 40", "5 million dollars", "15th of\nNovember", "Mar 3", "PAY-2291", "#1234", "12ab34cd",
                        "2026-03-05 10:00", "3.1.2026", "Python 3", "no digits here at all", "Market May"]
    for _ in range(4000):
        text = "".join(rng.choice(pieces) + rng.choice(_SEPARATORS) for _ in range(rng.randint(1, 14)))
        finder = artifacts._Finder("m")
        finder.prose(text)
        assert finder.found == _prose_the_long_way(text), text


def test_a_texts_digit_window_runs_from_words_before_its_first_digit_to_words_after_its_last():
    text = "one two three four 5 six seven eight 9 ten eleven twelve thirteen"
    start, end = artifacts._digit_window(text, text.index("5"))
    assert text[start:end] == "three four 5 six seven eight 9 ten eleven"
    assert artifacts._digit_window("٣ apples", 0) == (0, 8)  # any decimal digit, not only 0-9


def test_word_hints_find_every_occurrence_even_overlapping_and_widen_where_told():
    hints = WordHints(["go with", "going", "decision"], widen={"decision": re.compile(r"(?:\s*\([^)\n]{0,30}\))?")})
    text = "going with it; go with x. decision (final, v2): y. decisions"
    assert hints.spans(text) == [(0, 5), (15, 22), (26, 46), (51, 59)]
    assert not hints.found_in("nothing to see")


@pytest.mark.parametrize("text", ["ValueError: bad\nnext", "x\n\nnpm ERR! code E1\nnpm ERR! boom\n\nnpm ERR! again",
                                  "  E   assert 1 == 2", "a\n3:7  error  'x' is not defined  no-undef"])
def test_error_lines_are_found_at_every_line_start_the_first_included(text):
    reference = re.compile("|".join("^" + line for line in artifacts._ERROR_LINES), re.MULTILINE)
    expected = [(m.start(), m.end(), m.group(0)) for m in reference.finditer(text)]
    found = [(m.start(), m.end() - 1, m.group(0)[1:]) for m in artifacts._EXCEPTION_LINE.finditer("\n" + text)]
    assert found == expected and found

