"""Write a legacy-layout fixture with the older llm release first on the path (see README.md for the
commands). The model is canned, so two runs differ only in ids and timestamps.
"""
import subprocess
import sys
import tempfile
from pathlib import Path

import llm
import sqlite_utils
from llm.migrations import migrate

HAS_TOOLS = hasattr(llm, "Tool")


class CannedModel(llm.Model):
    """Answers from a script; with tools, the first answer of the tool turn asks for the time."""

    model_id = "canned"
    supports_tools = True

    def execute(self, prompt, stream, response, conversation):
        if HAS_TOOLS and prompt.tools and not prompt.tool_results:
            response.add_tool_call(llm.ToolCall(name="clock", arguments={"zone": "UTC"}, tool_call_id="call_1"))
            response.set_usage(input=30, output=7)
            return
        answer = f"Canned answer to: {prompt.prompt or 'the tool result'}"
        response.set_usage(input=len((prompt.prompt or "").split()) + 10, output=len(answer.split()))
        yield answer


def clock(zone: str) -> str:
    """The time in a zone."""
    return f"12:00 {zone}"


def main(target):
    with tempfile.TemporaryDirectory() as directory:
        db = sqlite_utils.Database(Path(directory) / "logs.db")
        migrate(db)
        conversation = CannedModel().conversation()
        first = conversation.prompt("Hello there", system="You are terse.")
        first.text()
        first.log_to_db(db)
        second = conversation.prompt("And the weather?", system="You are terse.")
        second.text()
        second.log_to_db(db)
        if HAS_TOOLS:
            chain = conversation.chain("What time is it?", system="You are terse.", tools=[clock])
            chain.text()
            chain.log_to_db(db)
        db.conn.commit()
        db.close()
        # The sqlite3 shell's dump, not Python's iterdump: iterdump writes the rows of llm's FTS5
        # index as inserts into the virtual table, which no database can load back.
        dump = subprocess.run(["sqlite3", Path(directory) / "logs.db", ".dump"], check=True,
                              capture_output=True, text=True).stdout
    Path(__file__).with_name(target).write_text(dump, encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1])
