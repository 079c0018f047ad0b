"""The documentation: the site builds with every link and API name resolved, its measured tables are
the committed data's, the API reference covers ``memorylab.__all__``, and the README's Python start
runs as written."""
import contextlib
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import memorylab

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
sys.path.insert(0, str(ROOT / "scripts"))

from mkdocs_api_reference import INIT, public_sections  # noqa: E402  (scripts/mkdocs_api_reference.py)


def run(*command):
    return subprocess.run([sys.executable, *command], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


def test_the_site_builds_strictly(tmp_path):
    done = run("-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site"))
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}{done.stderr}"
    assert (tmp_path / "site" / "reference" / "api" / "index.html").exists()


def test_the_measured_tables_are_the_committed_data():
    done = run("scripts/docs-tables", "--check")
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_api_reference_lists_every_public_name():
    listed = [name for names in public_sections(INIT.read_text(encoding="utf-8")).values() for name in names]
    assert sorted(listed) == sorted(memorylab.__all__)


def readme_python_start():
    text = README.read_text(encoding="utf-8")
    section = text.split("## Start in Python", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S)[1]


def test_the_readme_python_start_runs_and_prints_what_its_comments_say(tmp_path, monkeypatch):
    code = readme_python_start()
    monkeypatch.chdir(tmp_path)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "README.md", "exec"), {})
    said = [line.split("  # ", 1)[1] for line in code.splitlines() if line.startswith("print(")]
    lines = printed.getvalue().splitlines()
    assert len(lines) == len(said)
    for line, comment in zip(lines, said):
        assert comment.startswith(line), f"README says {comment!r}, the code prints {line!r}"


def test_the_readme_is_a_front_door():
    assert len(README.read_text(encoding="utf-8").splitlines()) < 200


def test_the_readme_keeps_the_test_command_ci_runs():
    assert "```bash\nscripts/test\n```" in README.read_text(encoding="utf-8")
