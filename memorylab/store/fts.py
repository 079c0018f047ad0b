"""Turning any user string into a safe full-text query, for SQLite's FTS5 and for PostgreSQL.

Every whitespace-separated chunk (or ``"quoted phrase"``) becomes one quoted term, so operators
(AND, OR, NOT, NEAR, ``&``, ``|``, ``!``, ``<->``), parentheses, column filters (``text:``), ``^``
and stray quotes are matched as plain words and can never raise a syntax error. Bare words match
as prefixes ("pickup" finds "pickups", which a stemmer gets wrong as often as right), or with
``prefixes=False`` as whole words (long-term recall, as Agently matches); a quoted phrase matches
exactly. Terms are ANDed (``any_word=False``, a search box) or ORed
(``any_word=True``, a whole prompt used to recall memories), and the engine's ranking does the rest.
"""
import re
from typing import NamedTuple

MAX_ANY_WORD_TERMS = 32
"""Recall ORs the words of a prompt; past this many, the rarest words have already done the ranking."""

_CHUNK = re.compile(r'"([^"]*)"|(\S+)')
_WORD = re.compile(r"[^\W_]", re.UNICODE)
_ONE_LETTER = re.compile(r"[^\W_]", re.UNICODE)
_CONTROL = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")


def search_terms(text, *, any_word=False, prefixes=True):
    """``[(chunk, is_prefix)]``: the searchable terms of ``text``, in order ([] when it has none).
    Bare words are prefixes unless ``prefixes`` is False.

    For ``any_word`` queries repeats go, one-letter prefixes go (they would match nearly
    everything) and at most ``MAX_ANY_WORD_TERMS`` remain.
    """
    if not isinstance(text, str):
        return []
    terms = []
    for quoted, bare in _CHUNK.findall(_CONTROL.sub(" ", text)):
        chunk = (quoted or bare).replace('"', " ").rstrip("*").strip()
        if _WORD.search(chunk):
            terms.append((chunk, prefixes and not quoted))
    if any_word:
        terms = [t for t in dict.fromkeys(terms) if not (t[1] and _ONE_LETTER.fullmatch(t[0]))]
        terms = terms[:MAX_ANY_WORD_TERMS]
    return terms


def fts_query(text, *, any_word=False, prefixes=True):
    """The FTS5 MATCH expression for ``text``, or None when it holds no searchable word."""
    terms = search_terms(text, any_word=any_word, prefixes=prefixes)
    phrases = [f'"{chunk}"*' if prefix else f'"{chunk}"' for chunk, prefix in terms]
    return (" OR " if any_word else " ").join(phrases) or None


def tsquery(text, *, any_word=False, prefixes=True):
    """The input of PostgreSQL's ``to_tsquery`` for ``text``, or None when it holds no searchable word.

    Each term is a quoted lexeme (``'`` doubled, ``\\`` escaped): ``to_tsquery`` splits it with the
    same parser as the indexed text, so ``A-4471`` or ``wrong item`` become phrases of their parts.
    """
    lexemes = []
    for chunk, prefix in search_terms(text, any_word=any_word, prefixes=prefixes):
        quoted = "'" + chunk.replace("\\", "\\\\").replace("'", "''") + "'"
        lexemes.append(quoted + ":*" if prefix else quoted)
    return (" | " if any_word else " & ").join(lexemes) or None


class FullText(NamedTuple):
    """How one backend searches one kind of row: the FROM clause (which names the searched table's
    usual alias), the WHERE condition and the rank (lower is better) as SQL over ``:match``."""

    source: str
    condition: str
    rank: str
    snippet: str = "NULL"
