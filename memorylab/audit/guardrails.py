"""Why a summary should not replace its span as it stands, read off its audit (``audit_proposal``):
a summary like "I'm ready to help" is flagged before anyone accepts it.

Pure: the audit in, sentences out (none for a summary that holds up).
"""
MIN_SUMMARY_TOKENS = 32
"""A summary shorter than this, standing in for a longer span, is flagged as too short."""
MOST_LOST_SHARE = 0.75
"""A summary after which the request loses this share of its span's artifacts, or more, is flagged."""


def summary_warnings(audit) -> list[str]:
    """What is wrong with the summary ``audit`` (a ``CompactionAudit``) describes, one sentence each."""
    found = []
    if audit.summary_tokens < MIN_SUMMARY_TOKENS < audit.span_tokens:
        found.append(f"It is {audit.summary_tokens:,} tokens standing in for {audit.span_messages:,} messages of "
                     f"{audit.span_tokens:,} tokens: too short to carry what they said.")
    whole = len(audit.kept) + len(audit.lost)
    stated = sum(artifact["where"] == "summary" for artifact in audit.kept)
    if audit.lost and not audit.kept:
        found.append(f"It keeps none of the {whole:,} artifacts its span states (ids, numbers, paths, decisions…): "
                     "the next request holds none of them.")
    elif whole and not stated:
        found.append(f"It states none of the {whole:,} artifacts of its span itself; only the head, the tail or a "
                     "pin still holds the ones kept.")
    if audit.lost and audit.kept and len(audit.lost) >= MOST_LOST_SHARE * whole:
        found.append(f"It loses {len(audit.lost):,} of the {whole:,} artifacts its span states "
                     f"({len(audit.lost) / whole:.0%}).")
    return found
