"""Turning any user string into a safe FTS5 query.

Every whitespace-separated chunk (or ``"quoted phrase"``) becomes a quoted FTS5 phrase, so
operators (AND, OR, NOT, NEAR), parentheses, column filters (``text:``), ``^`` and stray quotes are
matched as plain words and can never raise a syntax error. Bare words match as prefixes
("pickup" finds "pickups", which a stemmer gets wrong as often as right); a quoted phrase matches
exactly. Chunks become an implicit AND, which BM25 then ranks.
"""
import re

_CHUNK = re.compile(r'"([^"]*)"|(\S+)')
_WORD = re.compile(r"[^\W_]", re.UNICODE)
_CONTROL = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")


def fts_query(text):
    """The FTS5 MATCH expression for ``text``, or None when it holds no searchable word."""
    if not isinstance(text, str):
        return None
    text = _CONTROL.sub(" ", text)
    phrases = []
    for quoted, bare in _CHUNK.findall(text):
        chunk = (quoted or bare).replace('"', " ").rstrip("*").strip()
        if not _WORD.search(chunk):
            continue
        phrases.append(f'"{chunk}"' if quoted else f'"{chunk}"*')
    return " ".join(phrases) or None
