"""Fact survival: which of the facts a user listed does a summary still hold?

A summary rarely repeats a fact word for word, so a fact counts as kept when every one of its
significant terms (numbers, ids, and words of three or more letters) appears in the summary,
ignoring case and punctuation. The terms that are missing are reported, so a "lost" verdict can be
checked by eye.
"""
import re

_TERM = re.compile(r"[\w€$£%./:-]+", re.UNICODE)
_EDGE_PUNCTUATION = ".,:;!?()[]{}\"'`*"
_STOPWORDS = {"the", "and", "for", "was", "our", "are", "with", "from", "that", "this", "has", "have", "its",
              "not", "but", "all", "any", "per"}


def _terms(text):
    terms = []
    for raw in _TERM.findall(text.lower()):
        term = raw.strip(_EDGE_PUNCTUATION)
        if term and (any(c.isdigit() for c in term) or (len(term) >= 3 and term not in _STOPWORDS)):
            terms.append(term)
    return terms


def fact_survival(summary, facts) -> list[dict]:
    """``[{"fact", "kept", "missing"}]`` for each non-empty fact, in order."""
    present = set(_terms(summary or ""))
    flattened = " ".join(present)
    results = []
    for fact in facts:
        fact = fact.strip()
        if not fact:
            continue
        missing = [t for t in dict.fromkeys(_terms(fact)) if t not in present and t not in flattened]
        results.append({"fact": fact, "kept": not missing, "missing": missing})
    return results
