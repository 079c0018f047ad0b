"""The tool-pair lint keeps a few dozen bytes of each message, never the message: ``memorylab check``
lints a 200,000-message session in bounded memory (benchmarks/run.py --scale --memory measures it
whole)."""
import tracemalloc

from memorylab.history.tool_pairs import ORPHAN_CALL, lint_tree

MESSAGES = 30_000
BYTES_PER_MESSAGE = 300
"""The lint's tree holds about 180 bytes a message here; keeping each message read costs over 1,000."""


def long_branch():
    """A branch of ``MESSAGES`` messages with a kilobyte of text or tool input each, made as it is
    read; every fiftieth is a tool call no result follows."""
    for i in range(MESSAGES):
        if i % 50 == 1:
            parts = [{"type": "tool-lookup", "toolCallId": f"call-{i}", "state": "input-available",
                      "input": {"query": "x" * 1000}}]
        else:
            parts = [{"type": "text", "text": f"message {i} " + "y" * 1000}]
        yield {"id": f"m{i}", "parent_id": f"m{i - 1}" if i else None, "role": ("user", "assistant")[i % 2],
               "parts": parts}


def test_the_lint_keeps_an_outline_of_each_message_not_the_message():
    tracemalloc.start()
    try:
        findings = lint_tree(long_branch(), [])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(findings) == MESSAGES // 50 and {f.kind for f in findings} == {ORPHAN_CALL}
    assert peak / MESSAGES < BYTES_PER_MESSAGE, f"{peak / MESSAGES:.0f} bytes a message"
