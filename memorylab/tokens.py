"""Model-free token estimates.

The estimate is deliberately cheap and conservative: the larger of "4 characters per token" and
"1.3 tokens per word". It is computed once per message when the message is written and stored, so
budgets over long branches are sums of stored numbers, never a re-tokenization.
"""
import json

MESSAGE_OVERHEAD_TOKENS = 4


def estimate_string_tokens(text) -> int:
    """ceil(max(len(text) / 4, words * 1.3)), in integer arithmetic (no float rounding surprises)."""
    if not text:
        return 0
    by_chars = (len(text) + 3) // 4
    by_words = (len(text.split()) * 13 + 9) // 10
    return max(by_chars, by_words)


def compact_json(value) -> str:
    """The compact JSON form used to count structured values (tool inputs and outputs)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def estimate_part_tokens(part) -> int:
    kind = part.get("type", "")
    if kind in ("text", "reasoning"):
        return estimate_string_tokens(part.get("text") or "")
    if kind.startswith("tool-") or kind == "dynamic-tool":
        tokens = 0
        if "input" in part:
            tokens += estimate_string_tokens(compact_json(part["input"]))
        if "output" in part:
            tokens += estimate_string_tokens(compact_json(part["output"]))
        return tokens
    return estimate_string_tokens(compact_json(part))


def estimate_message_tokens(messages) -> int:
    """Estimated tokens of a list of messages (a single message dict is accepted too)."""
    if isinstance(messages, dict):
        messages = [messages]
    return sum(
        MESSAGE_OVERHEAD_TOKENS + sum(estimate_part_tokens(p) for p in m.get("parts") or ())
        for m in messages
    )
