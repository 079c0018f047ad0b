"""The summaries an undo removed, kept in the session's metadata so a second thought can restore them.

A pure module over the metadata dict: the newest ``KEPT_REMOVED`` removals are kept, newest first,
each an overlay as it was stored plus ``removed_at``.
"""
REMOVED_SUMMARIES_KEY = "memorylab.removed_summaries"
KEPT_REMOVED = 20


def removed_summaries(metadata) -> list[dict]:
    """The removed overlays recorded in ``metadata``, newest first."""
    kept = (metadata or {}).get(REMOVED_SUMMARIES_KEY)
    return list(kept) if isinstance(kept, list) else []


def with_removed(metadata, overlay, removed_at) -> dict:
    """``metadata`` with ``overlay`` recorded as removed at ``removed_at`` (the oldest record beyond
    ``KEPT_REMOVED`` is forgotten)."""
    kept = [{**overlay, "removed_at": removed_at}, *removed_summaries(metadata)][:KEPT_REMOVED]
    return {**metadata, REMOVED_SUMMARIES_KEY: kept}


def without_removed(metadata, overlay_id) -> dict:
    """``metadata`` without the newest record of removed overlay ``overlay_id`` (an id a later overlay
    took again may have been removed twice)."""
    kept = removed_summaries(metadata)
    newest = next((i for i, removed in enumerate(kept) if removed.get("id") == overlay_id), None)
    return {**metadata, REMOVED_SUMMARIES_KEY: [r for i, r in enumerate(kept) if i != newest]}
