"""Rendering context blocks into the system prompt (pure functions over block dicts)."""
from .providers import READONLY, TAGS

RULE = "═" * 46


def usage_percent(tokens, max_tokens) -> int:
    """tokens / max_tokens as a whole percent, rounded half up (integer arithmetic)."""
    return (200 * tokens + max_tokens) // (2 * max_tokens)


def block_header(block) -> str:
    header = block["label"].upper()
    if block.get("description"):
        header += f" ({block['description']})"
    if block.get("max_tokens"):
        tokens, limit = block["tokens"], block["max_tokens"]
        header += f" [{usage_percent(tokens, limit)}% — {tokens}/{limit} tokens]"
    return f"{header} [{TAGS[block['kind']]}]"


def render_block(block) -> str:
    return f"{RULE}\n{block_header(block)}\n{RULE}\n{block['content']}"


def render_system_prompt(blocks) -> str:
    """Blocks in order, separated by a blank line; an empty readonly block is left out."""
    return "\n\n".join(
        render_block(b) for b in blocks if b["content"].strip() or b["kind"] != READONLY
    )
