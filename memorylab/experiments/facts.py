"""Fact matching: does a context still hold a short fact, however the fact is formatted?

Experiments score every arm by the facts its context keeps, so the verdict must not depend on a
model or on formatting. Texts and facts are cut into the same canonical tokens: lower case,
punctuation and spacing ignored, ``3,000`` = ``3000``, ``2.3M`` = ``2.3 million`` = ``2300000``,
``v2.1`` = ``version 2.1`` = ``2.1``, ``30 minutes`` = ``30 min`` = ``30-minute``, ``€`` = ``EUR``,
plurals folded (``classes`` = ``class``, ``parties`` = ``party``), and dates in ISO or written form
(``2026-11-15``, ``15 Nov 2026``, ``November 15, 2026``, ``Nov 15``) as one date token, which also
holds its month of the year, its year and its month's name (``December 2022``, ``2022`` and
``December`` are found in ``17 December, 2022``). Slash dates other than year-first are left alone:
whether ``11/08`` is day or month first cannot be told.

A fact is kept when all its significant terms (numbers, dates, ids, words of three or more letters
that are not stopwords, two-letter words written in capitals such as ``VR``) occur close together in
ONE text of the context (one message's text: a fact is never assembled from several). A fact of up
to three terms must be written as a phrase: its terms in any order with at most two other tokens
between neighbours, so "two times" is not found in "you two have a great time". A longer fact's
terms must fall within a window that grows with its length. Tokens written together in the fact
(``A-4471``, ``customers.email``, ``48GB``) and a number with its unit (``48 GB``) form one term
whose pieces must be adjacent. Numbers only equal whole numbers: ``48`` is not found in ``480``,
nor ``2.3`` in ``2.35``.

A fact date with a year is also found written without a year (summaries drop it), but never with a
different year; a fact date without a year matches that day in any year; a month of a year
(``December 2022``) is found in any date of that month.
"""
import re
from bisect import bisect_left, bisect_right
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from itertools import compress, islice
from typing import NamedTuple

from ..text_stretches import AsciiTwin, stretches

MONTH_NUMBERS = {
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
    "jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12,
}
"""A month's number by the first three letters of its name, lower case (the artifact ledger's dates too)."""
_MONTH = r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|(?-i:May)|june?|july?|aug(?:ust)?" \
         r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
_MONTH_INITIAL = f"[{''.join(sorted({name[0] for name in MONTH_NUMBERS}))}]"
_ORDINAL = r"(?:st|nd|rd|th)?"
_YEAR = r"(?:,?\s+(?P<{}>\d{{4}})(?![\d]))?"
_TOKEN = re.compile(
    rf"""
    (?P<iso>(?=\d)(?<![\d.])(?P<iso_year>\d{{4}})([-/])(?P<iso_month>\d{{1,2}})\3(?P<iso_day>\d{{1,2}})(?!\d))
  | (?P<day_first>(?=\d)(?<![\d.,])(?P<df_day>\d{{1,2}}){_ORDINAL}\s+(?:of\s+)?(?P<df_month>{_MONTH})\b\.?
        {_YEAR.format("df_year")})
  | (?P<month_first>(?={_MONTH_INITIAL})\b(?P<mf_month>{_MONTH})\b\.?\s+(?P<mf_day>\d{{1,2}}){_ORDINAL}(?![\w])
        {_YEAR.format("mf_year")})
  | (?P<month_year>(?={_MONTH_INITIAL})\b(?P<my_month>{_MONTH})\b\.?,?\s+(?:of\s+)?(?P<my_year>\d{{4}})(?!\d))
  | (?P<number>(?=[\dv])(?:\b(?:version:?\s*|v)(?=\d))?
        (?P<digits>\d{{1,3}}(?:,\d{{3}})+(?!\d)(?:\.\d+)?|\d+(?:\.\d+)*)
        (?:(?:st|nd|rd|th)(?![^\W\d_]))?
        (?P<magnitude>\s*(?:million|billion|thousand|mn|bn)\b|(?-i:[kKM]|\s+M)(?![^\W\d_]))?)
  | (?P<word>[^\W\d_]+(?:['’][^\W\d_]+)*)
  | (?P<symbol>[€$£%])
    """,
    re.IGNORECASE | re.VERBOSE,
)
"""Each alternative but the last two opens with a look-ahead at what it can start with (a digit, a
month's initial, or for a number a digit or a "v"): a word is then tried against the month names
only where it opens like one, not at every word, and no match changes."""
_MAGNITUDES = {"k": 3, "thousand": 3, "m": 6, "mn": 6, "million": 6, "bn": 9, "billion": 9}
_SYMBOL_WORDS = {"€": "eur", "$": "usd", "£": "gbp", "%": "percent"}
_WORD_ALIASES = {"euro": "eur", "euros": "eur", "pct": "percent", "dollar": "usd", "dollars": "usd"}
# Words that, right after a number, are its unit: canonical so "30 min" = "30 minutes", and part of
# the number's term so "48 GB" is never satisfied by a 48 and a GB far apart.
_UNIT_ALIASES = {
    "ms": "ms", "msec": "ms", "millisecond": "ms", "milliseconds": "ms",
    "s": "s", "sec": "s", "secs": "s", "second": "s", "seconds": "s",
    "min": "min", "mins": "min", "minute": "min", "minutes": "min",
    "h": "h", "hr": "h", "hrs": "h", "hour": "h", "hours": "h",
    "d": "day", "day": "day", "days": "day", "wk": "week", "week": "week", "weeks": "week",
    "yr": "year", "yrs": "year", "year": "year", "years": "year", "percent": "percent",
    "b": "b", "kb": "kb", "mb": "mb", "gb": "gb", "tb": "tb", "pb": "pb",
    "kib": "kib", "mib": "mib", "gib": "gib", "tib": "tib",
}
_STOPWORDS = frozenset({
    "the", "and", "for", "was", "were", "our", "are", "with", "from", "that", "this", "has",
    "have", "had", "its", "into", "onto", "than", "then", "them", "they", "their", "there",
    "these", "those", "which", "who", "whom", "what", "when", "where", "will", "would", "shall",
    "should", "can", "could", "been", "being", "also", "you", "your", "his", "her", "she", "him",
    "via", "about", "just", "some", "such", "very", "only", "over", "out", "yet", "does", "did",
    "let", "per", "any", "all", "but",
})
# Characters that join tokens into one term when a fact writes them without spaces: A-4471,
# customers.email, Europe/Berlin, mysql-prod-01.
_JOINERS = frozenset("-_./:@#+~")
_PHRASE_TERMS = 3
"""Facts of up to this many terms must be written as a phrase."""
_PHRASE_GAP = 2
_WINDOW_BASE = 12
_WINDOW_PER_TERM = 6
_FULL_SCAN_EVENTS = 2000
"""Occurrences of a fact's terms from which a match looks only near the rarest one."""


class _Token(NamedTuple):
    offers: tuple
    """Canonical forms a context offers at this token."""
    wants: tuple
    """Forms that satisfy this token when it stands in a fact."""
    start: int
    end: int
    kind: str
    unit: bool
    """A unit (or %) right after a number: it belongs to the number's term."""


def _date_token(match, kind, start, end):
    """A date offers its day (with and without its year) and also its month-year, its year and its
    month's name, so "December 2022", "2022" and "December" are each found in "17 December, 2022"."""
    if kind == "iso":
        year, month, day = match["iso_year"], int(match["iso_month"]), int(match["iso_day"])
        name = None
    else:
        prefix = "df" if kind == "day_first" else "mf"
        year, name = match[f"{prefix}_year"], match[f"{prefix}_month"]
        month = MONTH_NUMBERS[name[:3].casefold()]
        day = int(match[f"{prefix}_day"])
    month_day = f"date:{month:02}-{day:02}"
    parts = (_word_form(name, False)[0],) if name else ()
    if year:
        dated = f"date:{year}-{month:02}-{day:02}"
        offers = (dated, month_day, f"month:{year}-{month:02}", year, *parts)
        return _Token(offers, (dated, f"date:?-{month:02}-{day:02}"), start, end, "date", False)
    return _Token((month_day, f"date:?-{month:02}-{day:02}", *parts), (month_day,), start, end, "date", False)


def _month_token(match, start, end):
    """A month of a year ("December 2022", "Dec 2022"): wants that month of that year, offers it, its
    year and its month's name."""
    year, name = match["my_year"], match["my_month"]
    month = f"month:{year}-{MONTH_NUMBERS[name[:3].casefold()]:02}"
    return _Token((month, year, _word_form(name, False)[0]), (month,), start, end, "date", False)


def _number_form(match):
    digits = match["digits"].replace(",", "")
    magnitude = (match["magnitude"] or "").strip()
    if magnitude and digits.count(".") <= 1:
        scaled = Decimal(digits).scaleb(_MAGNITUDES[magnitude.lower()])
        return format(scaled.normalize(), "f")
    return digits


@lru_cache(maxsize=1 << 16)
def _word_form(word, after_number):
    """A word's canonical form, and whether it is a number's unit; cached, as most words repeat."""
    word = word.lower().replace("’", "'")
    word = word.removesuffix("'s")
    if after_number and word in _UNIT_ALIASES:
        return _UNIT_ALIASES[word], True
    word = _WORD_ALIASES.get(word, word)
    if word in _STOPWORDS:
        return word, False
    return _singular(word), False


def _singular(word):
    """One form for a word and its plural, whichever is written: the plural ``s`` dropped, then the
    ``e`` an ``-es`` or ``-ies`` plural adds folded the same way in both ("classes" and "class" give
    "class", "boxes" and "box" "box", "parties" and "party" "party", "movies" and "movie" "movy")."""
    if len(word) >= 4 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if len(word) >= 4 and word.endswith(("sse", "she", "che", "xe", "ze")):
        return word[:-1]
    if len(word) >= 5 and word.endswith("ie"):
        return word[:-2] + "y"
    return word


def _token(match, previous_kind) -> _Token:
    """The token a match of ``_TOKEN`` stands for, ``previous_kind`` being the kind of the token before."""
    kind, start, end = match.lastgroup, match.start(), match.end()
    if kind in ("iso", "day_first", "month_first"):
        return _date_token(match, kind, start, end)
    if kind == "month_year":
        return _month_token(match, start, end)
    if kind == "number":
        form = _number_form(match)
        return _Token((form,), (form,), start, end, "number", False)
    if kind == "word":
        form, unit = _word_form(match["word"], previous_kind == "number")
        return _Token((form,), (form,), start, end, "word", unit)
    form = _SYMBOL_WORDS[match["symbol"]]
    return _Token((form,), (form,), start, end, "symbol", form == "percent" and previous_kind == "number")


def _tokens(text):
    previous_kind = None
    for match in _TOKEN.finditer(text):
        token = _token(match, previous_kind)
        previous_kind = token.kind
        yield token


_ANCHOR = AsciiTwin(r"[\d€$£%]+", r"[\d€$£%]+", "[0-9€$£%]+")
_PLAIN_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*")
_ZONE_WORDS = 2
"""Words either side of a digit or symbol that a number, date or unit token can reach (a month name
and "of" before a day or a year, "version" before a number, a month, a year, a magnitude or a unit
after it): each such token holds one."""


def _zones(text):
    """The spans that may hold numbers, dates or symbols (``memorylab.text_stretches``): outside
    them every token is a word."""
    return stretches(text, _ANCHOR, _ZONE_WORDS)


@lru_cache(maxsize=1 << 16)
def _word_offer(word):
    """The offer of a word that does not follow a number, ``(form,)``: most tokens are one, so each
    is built once."""
    return (_word_form(word, False)[0],)


def _offers(text) -> list[tuple]:
    """The offers of ``text``'s tokens, in order: what ``_tokens`` gives, found faster. Text between
    zones (most of it) is only words, read with a plain word pattern; zones get the full tokenizer,
    whose words (most of its tokens too) skip building a ``_Token``."""
    offers, previous_kind, position = [], None, 0
    for start, end in [*_zones(text), (len(text), len(text))]:
        words = _PLAIN_WORD.findall(text, position, start)
        if words:
            offers.append((_word_form(words[0], previous_kind == "number")[0],))
            offers += map(_word_offer, islice(words, 1, None))
            previous_kind = "word"
        for match in _TOKEN.finditer(text, start, end):
            if match.lastgroup == "word" and previous_kind != "number":
                offers.append(_word_offer(match["word"]))
                previous_kind = "word"
            else:
                token = _token(match, previous_kind)
                offers.append(token.offers)
                previous_kind = token.kind
        position = end
    return offers


class _TextTokens:
    """One text's canonical tokens (``_offers``) and the forms they hold. Where a form occurs is found
    only when a match asks about it: an audit asks about a few of a text's forms, and indexing every
    form of every text was a third of tokenizing them."""

    __slots__ = ("offers", "forms", "_firsts", "_first_at", "_last_at", "_others")

    def __init__(self, offers):
        self.offers = offers
        self._firsts = firsts = [offer[0] for offer in offers]
        count = len(firsts)
        self._first_at = dict(zip(reversed(firsts), range(count - 1, -1, -1)))
        self._last_at = dict(zip(firsts, range(count)))
        self._others: dict[str, list[int]] = {}
        # A date's other forms (its year, its month): few, so those tokens are picked out in C.
        for position in compress(range(count), map((1).__lt__, map(len, offers))):
            for form in offers[position][1:]:
                self._others.setdefault(form, []).append(position)
        self.forms = frozenset(self._first_at).union(self._others)

    def positions(self, form) -> list[int]:
        """Where ``form`` occurs among the text's tokens, in order (empty when it does not)."""
        found = []
        at = self._first_at.get(form)
        if at is not None:
            last, firsts = self._last_at[form], self._firsts
            found.append(at)
            while at != last:
                at = firsts.index(form, at + 1)
                found.append(at)
        others = self._others.get(form)
        return sorted(found + others) if others else found


@lru_cache(maxsize=8192)
def _text_tokens(text) -> _TextTokens:
    """One text's tokens, cached on the text itself: the arms of an experiment leave contexts that
    share most of their messages, so each is tokenized once."""
    return _TextTokens(_offers(text))


_NOWHERE: list[int] = []
"""The positions of a form a context does not hold (shared: never written to)."""


class ContextText:
    """A context prepared for matching many facts against it: its canonical tokens and where each
    form occurs. ``texts`` is one text or several (a context's messages, in order), each tokenized
    once per process; a term written together never spans two of them."""

    def __init__(self, texts):
        self._starts, self._parts = [], []
        length = 0
        for text in [texts] if isinstance(texts, str) else texts:
            tokens = _text_tokens(text or "")
            if tokens.offers:
                self._starts.append(length)
                self._parts.append(tokens)
                length += len(tokens.offers)
        self._length = length
        self._found: dict[str, list[int]] = {}
        self._gathered: set[str] = set()
        self._occurrence_cache = {}

    def __len__(self) -> int:
        return self._length

    def _text_of(self, position) -> int:
        """The index of the text the token at ``position`` belongs to."""
        return bisect_right(self._starts, position) - 1

    def _offer(self, position):
        index = self._text_of(position)
        return self._parts[index].offers[position - self._starts[index]]

    def gather(self, forms) -> None:
        """Index where each of ``forms`` occurs in the whole context, in one pass over its texts
        (a set intersection per text): matching asks only about the forms its facts hold. Only
        the forms that occur get an entry; the texts come in order, so each list is in order too."""
        forms = frozenset(forms).difference(self._gathered)
        if not forms:
            return
        self._gathered.update(forms)
        found = self._found
        for start, part in zip(self._starts, self._parts):
            for form in forms & part.forms:
                positions = part.positions(form)
                if form in found:
                    found[form].extend([start + p for p in positions])
                else:
                    found[form] = [start + p for p in positions]

    def holds_any(self, forms) -> bool:
        """Whether the context holds at least one of ``forms`` anywhere: a cheap test before a match
        (two set operations, once the forms are gathered)."""
        if not self._gathered.issuperset(forms):
            self.gather(forms)
        return not self._found.keys().isdisjoint(forms)

    def _positions(self, form) -> list[int]:
        if form not in self._gathered:
            self.gather((form,))
        return self._found.get(form, _NOWHERE)

    def _occurrences(self, pieces) -> list[int]:
        """Token positions where ``pieces`` (one tuple of wanted forms per token) occur adjacently,
        in order; found once per context (an audit asks the same terms of a long tail many times)."""
        found = self._occurrence_cache.get(pieces)
        if found is None:
            found = self._occurrence_cache[pieces] = self._find_occurrences(pieces)
        return found

    def _find_occurrences(self, pieces) -> list[int]:
        """Anchored on the piece the context holds least often, so a term that starts with a common
        word ("the ticket T-1234") costs what its rarest piece occurs, not what its first does."""
        counts = [sum(len(self._positions(form)) for form in piece) for piece in pieces]
        anchor = counts.index(min(counts))
        if not counts[anchor]:
            return []
        starts = sorted({p - anchor for form in pieces[anchor] for p in self._positions(form) if p >= anchor})
        rest = [(offset, wanted) for offset, wanted in enumerate(pieces) if offset != anchor]
        last = self._length - len(pieces)
        return [
            start for start in starts
            if start <= last and all(
                any(form in wanted for form in self._offer(start + offset)) for offset, wanted in rest
            )
        ]


@dataclass(frozen=True)
class FactMatch:
    """One fact's verdict; ``missing`` names the fact's terms, as the fact writes them, that were
    not found near the others (all of them when the context lacks them entirely)."""

    fact: str
    kept: bool
    missing: list[str]

    def to_dict(self) -> dict:
        return {"fact": self.fact, "kept": self.kept, "missing": list(self.missing)}


class _Term(NamedTuple):
    surface: str
    pieces: tuple


def _written_together(fact, before, after):
    """Adjacent tokens with nothing or only joining characters between them (a currency sign stands
    apart: "€49.90" and "49.90 €" are the same fact)."""
    gap = fact[before.end:after.start]
    return set(gap) <= _JOINERS and "symbol" not in (before.kind, after.kind)


def _is_significant(token, fact):
    """Numbers, dates, units, words of three or more letters that are not stopwords, and two-letter
    words the fact writes in capitals (an acronym: the "VR" of "VR Club" must be found too)."""
    if token.kind != "word":
        return True
    word = token.offers[0]
    if token.unit or (len(word) >= 3 and word not in _STOPWORDS):
        return True
    return len(word) == 2 and fact[token.start:token.end].isupper()


def fact_terms(fact) -> tuple[_Term, ...]:
    """The terms a context must hold for ``fact``: runs of tokens written together (and a number with
    its unit) form one term; terms with no significant token are dropped, and repeats merged. A fact
    with no significant term at all keeps every token, so "a" still has to appear."""
    return _fact_layout(fact)[0]


@lru_cache(maxsize=4096)
def _fact_layout(fact) -> tuple[tuple[_Term, ...], int]:
    """``fact_terms(fact)`` and how many tokens the fact spans from its first term to its last."""
    groups, position = [], 0
    for token in _tokens(fact):
        if groups and (token.unit or _written_together(fact, groups[-1][1][-1], token)):
            groups[-1][1].append(token)
        else:
            groups.append((position, [token]))
        position += 1
    terms, kept = {}, []
    for significant_only in (True, False):
        for first, group in groups:
            if not significant_only or any(_is_significant(token, fact) for token in group):
                terms.setdefault(tuple(token.wants for token in group), fact[group[0].start:group[-1].end])
                kept.append((first, first + len(group)))
        if terms:
            break
    span = kept[-1][1] - kept[0][0] if kept else 0
    return tuple(_Term(surface, pieces) for pieces, surface in terms.items()), span


def _window_width(terms, span):
    """How many tokens a fact's terms may spread over: a short fact is a phrase (its terms in any
    order, spread as the fact spreads them, ``span`` tokens, plus at most ``_PHRASE_GAP`` tokens more
    between neighbours); a longer one, a window that grows with its length."""
    if len(terms) <= _PHRASE_TERMS:
        return span + _PHRASE_GAP * (len(terms) - 1)
    return _WINDOW_BASE + sum(len(term.pieces) + _WINDOW_PER_TERM for term in terms)


def _events(starts, terms, width):
    """(start, end, term index) of every occurrence, in order; in a long context where the terms
    occur often, only those within ``width`` of an occurrence of the rarest term that occurs: a window
    holding every term holds one of those, so whether a fact is kept does not change, while the
    sliding window no longer walks every occurrence of a common word."""
    if sum(map(len, starts)) <= _FULL_SCAN_EVENTS or not any(starts):
        return sorted((start, start + len(terms[i].pieces), i) for i, found in enumerate(starts) for start in found)
    anchors = min((found for found in starts if found), key=len)
    near = set()
    for anchor in anchors:
        for index, found in enumerate(starts):
            for start in found[bisect_left(found, anchor - width):bisect_right(found, anchor + width)]:
                near.add((start, start + len(terms[index].pieces), index))
    return sorted(near)


def _best_window(context, terms, width):
    """The indexes of the terms in the densest stretch of one text of the context: the window of the
    allowed width that holds the most of them (in a long context, of those windows holding the rarest
    term). A window never spans two texts, so a fact is never assembled from several messages."""
    events = _events([context._occurrences(term.pieces) for term in terms], terms, width)
    texts = [context._text_of(start) for start, _, _ in events]
    counts, best, left = Counter(), set(), 0
    for at, (start, end, index) in enumerate(events):
        counts[index] += 1
        while texts[left] != texts[at] or end - events[left][0] > width:
            dropped = events[left][2]
            counts[dropped] -= 1
            if not counts[dropped]:
                del counts[dropped]
            left += 1
        if len(counts) > len(best):
            best = set(counts)
            if len(best) == len(terms):
                break
    return best


def _as_context(text_or_context):
    if isinstance(text_or_context, ContextText):
        return text_or_context
    return ContextText(text_or_context)


def match_fact(context, fact: str) -> FactMatch:
    """Whether ``context`` (a text or a ``ContextText``) holds ``fact``. A fact with no letters or
    digits cannot be held: it comes back not kept, itself missing."""
    context = _as_context(context)
    terms, span = _fact_layout(fact)
    if not terms:
        return FactMatch(fact, False, [fact])
    found = _best_window(context, terms, _window_width(terms, span))
    missing = [term.surface for index, term in enumerate(terms) if index not in found]
    return FactMatch(fact, not missing, missing)


def match_facts(text_or_context, facts) -> list[FactMatch]:
    """``match_fact`` for each fact, in order, preparing the context once."""
    context = _as_context(text_or_context)
    context.gather(form for fact in facts for term in fact_terms(fact) for piece in term.pieces[:1] for form in piece)
    return [match_fact(context, fact) for fact in facts]


def fact_survival(summary, facts) -> list[dict]:
    """Which of the facts a user listed a summary still holds: ``[{"fact", "kept", "missing"}]`` for
    each non-empty fact, in order, the missing terms listed so a "lost" verdict can be checked by eye."""
    listed = [fact.strip() for fact in facts if fact.strip()]
    return [match.to_dict() for match in match_facts(ContextText(summary or ""), listed)]
