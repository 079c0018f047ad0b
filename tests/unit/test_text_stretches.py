"""A pattern run only on the stretches near its hints finds what it finds in the whole text.

The artifact ledger and the fact matcher rely on this to skip most of a long text; each test
compares the shortcut with the whole-text scan on texts built to stress the stretches' edges
(white space of every kind, hints at the text's ends, hints close enough to merge)."""
import random
import re

import pytest

from memorylab.audit import artifacts
from memorylab.experiments import facts
from memorylab.text_stretches import AnyOf, AsciiTwin, WordHints, stretches, stretches_around

_PIECES = ["15 Nov 2026", "15th of\n\nNovember,   2026", "Nov.  15th, 2026", "December\t2022", "Sept 3", "May 2024",
           "Python\n3.11", "Node.js  20.1", "release\tv3.1", "Go 1.22", "+1 (555) 123 4567", "+44 20 7946 0958",
           "(555) 123-4567", "555-123-4567", "a@b.co", "550e8400-e29b-41d4-a716-446655440000", "src/app/main.py",
           "./a/b", "Makefile", "deadbeef12", "v1.2.3-rc.1", "==2.31.0", "3,000", "2.3M", "version: 2.1", "30 minutes",
           "€49.90", "100%", "$3.5 million", "classes", "the", "x", "~/.bashrc", "Dockerfile.dev", "a.git",
           "€15–20", "5h 41m", "7 MB/s", "17 GB per day", "RF-2025-031977"]
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
                        "2026-03-05 10:00", "3.1.2026", "Python 3", "no digits here at all", "Market May",
                        "€15–20", "€35–60 per person", "17 GB per day", "$3.5 million per year", "7 MB/s", "5h 41m",
                        "2 min 08 s", "3-4 days", "740M rows", "40 orders-api", "`$1`", "RF-2025-031977",
                        "+447700900123", "0000-00-00", "12 June,", "Nov."]
    for _ in range(4000):
        text = "".join(rng.choice(pieces) + rng.choice(_SEPARATORS) for _ in range(rng.randint(1, 14)))
        finder = artifacts._Finder("m")
        finder.prose(text)
        assert finder.found == _prose_the_long_way(text), text


def test_a_texts_digit_window_runs_from_words_before_its_first_digit_to_words_after_its_last():
    text = "one two three four 5 six seven eight 9 ten eleven twelve thirteen"
    start, end = artifacts._digit_window(text, text.index("5"))
    assert text[start:end] == "two three four 5 six seven eight 9 ten eleven twelve"
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



def _stretch_start_the_long_way(text, at, floor, words):
    """Where a stretch around a hint at ``at`` starts, stepping back one word at a time: a word ends
    at a space, a tab or a line break, white space between words is any, never before ``floor``."""
    def word_start(at):
        return max(text.rfind(" ", floor, at), text.rfind("\n", floor, at), text.rfind("\t", floor, at)) + 1 or floor
    start = word_start(at)
    for _ in range(words):
        while start > floor and text[start - 1].isspace():
            start -= 1
        start = word_start(start)
    return start


def test_stretches_step_back_word_by_word_over_every_kind_of_white_space():
    rng = random.Random(16)
    alphabet = ["a", "1", " ", "  ", "\n", "\t", "\r", "\u00a0", "\u2003", "\x1c", ".", "-"]
    for _ in range(20000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30)))
        at, words = rng.randrange(len(text)), rng.randint(0, 4)
        (start, _end), = stretches_around(text, [(at, at)], words)
        assert start == _stretch_start_the_long_way(text, at, 0, words), (text, at, words)


def test_any_of_gives_every_patterns_matches_overlapping_in_order_of_their_starts():
    hints = AnyOf(r"-\d", r"\.(?<=\d\.)\d")
    text = "a-1.2 b.3 4.5-6"
    assert [m.span() for m in hints.finditer(text)] == [(1, 3), (3, 5), (11, 13), (13, 15)]
    assert [m.span() for m in hints.finditer(text, 4, 13)] == [(11, 13)]  # each reads to the end given
    assert hints.search(text, 5, 10) is False and hints.search(text)


@pytest.mark.parametrize("twin", [artifacts._QUANTITY, artifacts._NUMERIC_DATE, artifacts._DIGIT, artifacts._HEX_PAIR,
                                  facts._ANCHOR], ids=lambda twin: twin.pattern[:16])
def test_an_ascii_twin_finds_what_its_pattern_finds(twin):
    for text in _texts(3000, seed=17):
        text = text.encode("ascii", "replace").decode()
        assert [m.span() for m in twin.ascii.finditer(text)] == [m.span() for m in twin.unicode.finditer(text)], text
    # Other scripts' digits are digits too: a text that holds any reads with the pattern itself.
    assert [m.group(0) for m in artifacts._QUANTITY.finditer("٣٤ files and 5 ms")] == ["٣٤ files", "5 ms"]
    with pytest.raises(ValueError, match="does not open with"):
        AsciiTwin(r"x\d", r"\d", "[0-9]")


def test_a_quantity_is_read_as_the_plain_pattern_reads_it():
    """The number read atomically and the units grouped by their first letter find what a number that
    gives back its digits, followed by every unit in turn, finds."""
    plain = re.compile(artifacts._QUANTITY.pattern.replace("(?>", "(?:").replace(
        artifacts._UNITS, "|".join(artifacts._UNIT_WORDS)), re.VERBOSE)
    assert plain.pattern != artifacts._QUANTITY.pattern
    rng = random.Random(18)
    numbers = ["3", "3,000", "2.5", "1,2", "40.", "7", "12ab", "v3", "$ 4", "€49.90", "5 million", "10k"]
    units = ["ms", "s", "secs", "MB", "MiB", "MHz", "%", "req/s", "x", "xs", "files", "times", "dollars", "days", "d"]
    for _ in range(4000):
        text = "".join(rng.choice(numbers) + rng.choice(["", " ", "-", "  "]) + rng.choice(units)
                       + rng.choice(_SEPARATORS) for _ in range(rng.randint(1, 6)))
        assert [m.span() for m in artifacts._QUANTITY.finditer(text)] == [m.span() for m in plain.finditer(text)], text
