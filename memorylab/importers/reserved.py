"""The message metadata keys memorylab gives a meaning to, which an imported source cannot claim.

memorylab reads these back: ``openai_item`` is the item ``MemorylabSession`` hands an agent for the
message, ``replay`` marks a message a replay wrote (the lab lists such branches as replays),
``prompt_cache`` is the request record the prompt-cache report measures, ``row_size_limit`` is
memorylab's record of what it cut to fit a row. Under one of these names a source's metadata is
the source's own, so an import keeps it as ``source.<key>``, shown in the lab and read by nothing;
only a key the reader set itself (``SourceMessage.reader_keys``) keeps its name. The append API is
not filtered: memorylab's own features write these keys through it, and whoever appends owns the
store; an agent is given a kept item only while it stands for its message (``kept_item``).
"""
from __future__ import annotations

from ..history.truncation import ROW_SIZE_KEY
from ..llm.prompt_cache import PROMPT_CACHE_KEY
from ..llm.replay import REPLAY_KEY
from .openai_items import ITEM_KEY

RESERVED_MESSAGE_KEYS = (ITEM_KEY, REPLAY_KEY, PROMPT_CACHE_KEY, ROW_SIZE_KEY)
SOURCE_PREFIX = "source."
"""What a reserved key a source gave is renamed with."""


def without_claimed_keys(message, reader_keys=()) -> dict:
    """``message`` (normalized) with each reserved metadata key it holds renamed ``source.<key>``, but
    for the ``reader_keys``; the same object when it claims none."""
    metadata = message["metadata"]
    claimed = [key for key in RESERVED_MESSAGE_KEYS if key in metadata and key not in reader_keys]
    if not claimed:
        return message
    renamed = {key: value for key, value in metadata.items() if key not in claimed}
    renamed.update((SOURCE_PREFIX + key, metadata[key]) for key in claimed)
    return {**message, "metadata": renamed}
