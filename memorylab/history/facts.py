"""Fact survival: which of the facts a user listed does a summary still hold?

A summary rarely repeats a fact word for word, so the check is the experiments' fact matcher
(``memorylab.experiments.facts``): every significant term of the fact must appear close together in
the summary, whatever its case, punctuation, number, date or unit format. The terms that are
missing are reported, so a "lost" verdict can be checked by eye.
"""
from ..experiments.facts import ContextText, match_facts


def fact_survival(summary, facts) -> list[dict]:
    """``[{"fact", "kept", "missing"}]`` for each non-empty fact, in order."""
    listed = [fact.strip() for fact in facts if fact.strip()]
    return [match.to_dict() for match in match_facts(ContextText(summary or ""), listed)]
