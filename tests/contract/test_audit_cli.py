"""`memorylab audit` through the real entry point: over a store's sessions, and over transcript files
imported into a throwaway store."""
import json
import shutil
from pathlib import Path

from memorylab import Session, Store
from memorylab.cli import main
from tests.contract.test_audit import planted_session

CLAUDE_CODE = Path(__file__).parents[1] / "data" / "claude_code"


def test_audit_of_a_store_prints_each_loss_and_the_retention_table(store, store_target, capsys, tmp_path):
    planted_session(store, "deploy").add_compaction("Deploy fails; config deploy/prod/settings.toml.", "m0", "m3")
    planted_session(store, "untouched")
    out = tmp_path / "audit.json"
    assert main(["--db", str(store_target), "audit", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "deploy overlay 1: 4 messages" in printed
    assert "lost url        https://wiki.example.com/runbooks/ledgerline-deploy  (message m1)" in printed
    assert "untouched" not in printed
    assert "retention over 1 compaction(s):" in printed
    document = json.loads(out.read_text())
    (compaction,) = document["compactions"]
    assert set(compaction) == {"session_id", "agent_id", "tenant_id", "overlay_id", "span_messages", "span_tokens",
                               "summary_tokens", "kept", "lost", "retention"}
    assert {"kind": "url", "text": "https://wiki.example.com/runbooks/ledgerline-deploy", "message_id": "m1"} \
        in compaction["lost"]
    assert document["totals"]["by_kind"]["path"] == {"kept": 1, "lost": 0}
    assert document["totals"]["by_kind"]["url"] == {"kept": 0, "lost": 1}


def test_audit_of_named_sessions_and_of_an_unknown_one(store, store_target, capsys):
    planted_session(store, "a").add_compaction("Deploy fails.", "m0", "m3")
    planted_session(store, "b").add_compaction("Deploy fails.", "m0", "m2")
    assert main(["--db", str(store_target), "audit", "b"]) == 0
    printed = capsys.readouterr().out
    assert "b overlay 1: 3 messages" in printed and "a overlay" not in printed
    assert main(["--db", str(store_target), "audit", "ghost"]) == 1
    assert "no session ghost" in capsys.readouterr().err


def test_audit_of_a_claude_code_projects_folder_touches_no_store(tmp_path, capsys, monkeypatch):
    projects = tmp_path / "projects"
    (projects / "-home-ana-src-httpkit").mkdir(parents=True)
    shutil.copy(CLAUDE_CODE / "compacted.jsonl", projects / "-home-ana-src-httpkit" / "b8e14d20.jsonl")
    shutil.copy(CLAUDE_CODE / "tool-use.jsonl", projects / "-home-ana-src-httpkit" / "3f2c5b1e.jsonl")
    (projects / "notes.json").write_text('{"not": "a transcript"}')
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "week.json"
    assert main(["audit", str(projects), "--json", str(out)]) == 0
    captured = capsys.readouterr()
    assert "b8e14d20-6f3a-4c97-a5d2-7e90c1f38b64 overlay 1" in captured.out
    assert "b8e14d20-6f3a-4c97-a5d2-7e90c1f38b64 overlay 2" in captured.out
    assert "lost path       CHANGELOG.md" in captured.out
    assert "retention over 2 compaction(s):" in captured.out
    assert "skipped" in captured.err and "notes.json" in captured.err
    assert "files read: 3 of 3" in captured.err
    assert not list(tmp_path.glob("*.db")), "auditing files must not create a store"
    document = json.loads(out.read_text())
    assert len(document["compactions"]) == 2
    assert all(c["session_id"].startswith("b8e14d20") for c in document["compactions"])


def test_audit_of_one_file_that_is_not_a_transcript_is_an_error(tmp_path, capsys):
    broken = tmp_path / "broken.jsonl"
    broken.write_text("{not json\n")
    assert main(["audit", str(broken)]) == 1
    assert "broken.jsonl" in capsys.readouterr().err


def test_a_store_without_compactions_says_so(tmp_path, capsys):
    path = tmp_path / "lab.db"
    with Store(path) as store:
        Session.create(store, "plain")
    assert main(["--db", str(path), "audit"]) == 0
    assert "no compactions found" in capsys.readouterr().out


def test_with_lab_url_the_audits_link_is_printed(store, store_target, capsys):
    planted_session(store, "a").add_compaction("Deploy fails.", "m0", "m3")
    assert main(["--db", str(store_target), "audit", "a", "--lab-url", "http://localhost:8501"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == \
        "lab: http://localhost:8501/audit?tenant=default&agent=default&session=a&overlay=1"
    planted_session(store, "b").add_compaction("Deploy fails.", "m0", "m2")
    assert main(["--db", str(store_target), "audit", "--lab-url", "http://localhost:8501"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "lab: http://localhost:8501/audit"
