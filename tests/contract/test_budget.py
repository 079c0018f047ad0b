from memorylab import StaticProvider
from memorylab.history.budget import request_breakdown, split_rendered_prompt
from memorylab.tokens import estimate_message_tokens
from tests.helpers import text_message


def test_split_rendered_prompt_recovers_each_block(session):
    session.with_context("soul", provider=StaticProvider("I am calm.\n\nTwo paragraphs.")).with_context(
        "memory", description="facts", max_tokens=100)
    session.replace_context_block("memory", "likes tea")
    prompt = session.freeze_system_prompt()
    sections = split_rendered_prompt(prompt)
    assert [label for label, _ in sections] == ["soul", "memory"]
    assert "\n\n".join(text for _, text in sections) == prompt
    assert split_rendered_prompt("") == []


def test_breakdown_counts_every_part_of_the_request(session):
    session.with_context("memory", max_tokens=200)
    session.append_message(text_message("u1", "question " * 20))
    session.append_message({"id": "a1", "role": "assistant", "parts": [
        {"type": "text", "text": "let me look"},
        {"type": "tool-read", "toolCallId": "c", "toolName": "read", "input": {"p": 1},
         "output": "x" * 400, "state": "output-available"}]})
    session.append_message(text_message("u2", "thanks"))
    session.add_compaction("short summary", "u1", "u1")
    rows = {(r["part"], r["item"]): r["tokens"] for r in request_breakdown(session)}
    assert ("system prompt", "memory") in rows
    assert ("tool schemas", "set_context") in rows
    assert rows[("summaries", "compaction_1")] > 0
    assert rows[("messages", "tool outputs")] == 100
    history = session.get_history()
    message_tokens = sum(v for (part, _), v in rows.items() if part in ("messages", "summaries"))
    assert message_tokens == estimate_message_tokens(history)
