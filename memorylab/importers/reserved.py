"""The message metadata keys memorylab gives a meaning to, which an imported source cannot claim.

memorylab reads these back: ``openai_item`` is the item ``MemorylabSession`` hands an agent for the
message, ``replay`` marks a message a replay wrote (the lab lists such branches as replays),
``prompt_cache`` is the request record the prompt-cache report measures, ``row_size_limit`` is
memorylab's record of what it cut to fit a row. Under one of these names a source's metadata is
the source's own, so an import keeps it as ``source.<key>``, shown in the lab and read by nothing.
An ``openai_item`` that stands for exactly what its message shows (``kept_item``), as the Agents
SDK importer's items do, keeps its name. The append API is not filtered: memorylab's own features
write these keys through it, and whoever appends owns the store.
"""
from __future__ import annotations

from ..history.truncation import ROW_SIZE_KEY
from ..llm.prompt_cache import PROMPT_CACHE_KEY
from ..llm.replay import REPLAY_KEY
from .openai_items import ITEM_KEY, kept_item

RESERVED_MESSAGE_KEYS = (ITEM_KEY, REPLAY_KEY, PROMPT_CACHE_KEY, ROW_SIZE_KEY)
SOURCE_PREFIX = "source."
"""What a reserved key a source gave is renamed with."""


def without_claimed_keys(message) -> dict:
    """``message`` (normalized) with each reserved metadata key it holds renamed ``source.<key>``, but for
    an item that stands for the message; the same object when it claims none."""
    metadata = message["metadata"]
    claimed = [key for key in RESERVED_MESSAGE_KEYS if key in metadata]
    if ITEM_KEY in claimed and kept_item(message) is not None:
        claimed.remove(ITEM_KEY)
    if not claimed:
        return message
    renamed = {key: value for key, value in metadata.items() if key not in claimed}
    renamed.update((SOURCE_PREFIX + key, metadata[key]) for key in claimed)
    return {**message, "metadata": renamed}
