"""A 100 MB import streams: its memory does not grow with the file."""
import json
import subprocess
import sys

from memorylab import Session, Store
from tests.helpers import ROOT

IMPORT_AND_MEASURE = """
import resource, sys
from memorylab import Store
from memorylab.importers import import_source
with Store(sys.argv[2]) as store:
    report = import_source(store, sys.argv[1])
print(report.messages_added, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
"""


def write_conversations(path, conversations, messages_each, text_chars):
    filler = "The order 4471 ships to Lisbon on 2026-12-01; the customer prefers email. " * (text_chars // 74 + 1)
    with open(path, "w", encoding="utf-8") as file:
        for number in range(conversations):
            messages = [{"role": "user" if i % 2 == 0 else "assistant",
                         "content": f"{number}.{i} {filler[:text_chars]}"}
                        for i in range(messages_each)]
            file.write(json.dumps({"id": f"c{number}", "messages": messages}) + "\n")


def import_in_child(source, target):
    result = subprocess.run([sys.executable, "-c", IMPORT_AND_MEASURE, str(source), str(target)], cwd=ROOT,
                            capture_output=True, text=True, timeout=600, check=True)
    added, peak_mib = map(int, result.stdout.split())
    return added, peak_mib


def test_a_100_mb_jsonl_imports_in_bounded_memory(tmp_path):
    small, large = tmp_path / "small.jsonl", tmp_path / "large.jsonl"
    write_conversations(small, 100, 100, 1050)
    write_conversations(large, 1000, 100, 1050)
    assert large.stat().st_size > 100 * 1024 * 1024

    small_added, small_peak = import_in_child(small, tmp_path / "small.db")
    large_added, large_peak = import_in_child(large, tmp_path / "large.db")
    assert (small_added, large_added) == (10_000, 100_000)
    # Ten times the file, and memory grows by far less than the file: it is read line by line.
    assert large_peak - small_peak < 40, (small_peak, large_peak)
    with Store(tmp_path / "large.db") as store:
        assert store.sessions.count() == 1000
        assert Session.open(store, "c999", agent_id="openai-messages").get_path_length() == 100
