import json
import subprocess
import sys

import pytest

from memorylab import Session, Store
from memorylab.cli import main
from memorylab.samples import sample_files, sample_memory_keys


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "memorylab", *args], capture_output=True, text=True, timeout=120)


def test_help_describes_every_command():
    result = run_cli("--help")
    assert result.returncode == 0
    for command in ("demo", "import", "export", "stats"):
        assert command in result.stdout


def test_demo_stats_export_import_round_trip(tmp_path, capsys):
    db = str(tmp_path / "demo.db")
    assert main(["--db", db, "demo"]) == 0
    assert f"loaded {len(sample_files())} sample session(s)" in capsys.readouterr().out
    assert main(["demo", "--db", db]) == 0
    assert "loaded 0 sample session(s)" in capsys.readouterr().out

    assert main(["--db", db, "stats", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == len(sample_files()) + len(sample_memory_keys())
    first = rows[0]

    out = tmp_path / "export.json"
    assert main(["--db", db, "export", first["session_id"], "--agent", first["agent_id"], "-o", str(out)]) == 0
    copy_db = str(tmp_path / "copy.db")
    assert main(["--db", copy_db, "import", str(out)]) == 0
    assert f"{first['session_id']} (agent {first['agent_id']}): new" in capsys.readouterr().out
    with Store(db) as a, Store(copy_db) as b:
        original = Session.open(a, first["session_id"], agent_id=first["agent_id"])
        copy = Session.open(b, first["session_id"], agent_id=first["agent_id"])
        assert copy.get_all_messages() == original.get_all_messages()

    assert main(["--db", db, "stats"]) == 0
    table = capsys.readouterr().out
    assert "branches" in table and first["session_id"] in table


def test_export_to_stdout_is_valid_json(tmp_path):
    db = str(tmp_path / "d.db")
    assert run_cli("--db", db, "demo").returncode == 0
    rows = json.loads(run_cli("--db", db, "stats", "--json").stdout)
    result = run_cli("--db", db, "export", rows[0]["session_id"], "--agent", rows[0]["agent_id"])
    assert result.returncode == 0
    assert json.loads(result.stdout)["format"] == "memorylab.session"


@pytest.mark.parametrize("args, fragment", [
    (["stats"], "no database at"),
    (["export", "nope"], "no database at"),
    (["import", "missing.json"], "missing.json: no such file"),
])
def test_errors_are_one_line_and_exit_non_zero(tmp_path, args, fragment):
    result = run_cli("--db", str(tmp_path / "absent.db"), *args)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("memorylab: error:")
    assert fragment in result.stderr


def test_broken_import_file_and_unknown_session(tmp_path):
    db = str(tmp_path / "d.db")
    broken = tmp_path / "broken.json"
    broken.write_text('{"format": "memorylab.session", "messages": [')
    result = run_cli("--db", db, "import", str(broken))
    assert result.returncode == 1 and "not valid JSON" in result.stderr
    result = run_cli("--db", db, "export", "ghost")
    assert result.returncode == 1 and "no session 'ghost'" in result.stderr


def test_not_a_database_is_a_clear_error(tmp_path):
    fake = tmp_path / "fake.db"
    fake.write_bytes(b"this is not sqlite" * 100)
    result = run_cli("--db", str(fake), "stats")
    assert result.returncode == 1 and result.stderr.startswith("memorylab: error:")
    assert "Traceback" not in result.stderr


def test_db_may_be_a_postgres_url(postgres_url, capsys):
    assert main(["--db", postgres_url, "stats"]) == 0
    assert "0 session(s), 0 messages" in capsys.readouterr().out
    assert main(["demo", "--db", postgres_url]) == 0
    assert main(["check", postgres_url]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{postgres_url}: loaded {len(sample_files())} sample session(s)")
    assert out.rstrip().endswith("no problems found")
    assert main(["--db", postgres_url, "export", "support-order-4471", "--agent", "support-bot"]) == 0
    assert json.loads(capsys.readouterr().out)["session"]["id"] == "support-order-4471"


def test_help_says_db_may_be_a_url():
    assert "postgresql://" in run_cli("--help").stdout
    copy_help = run_cli("copy", "--help").stdout
    assert "--from SOURCE --to TARGET" in copy_help
    assert run_cli("migrate", "--help").stdout == copy_help  # the old name of the command
