"""The documentation: the site builds with every link and API name resolved, its measured tables are
the committed data's, the API reference covers ``memorylab.__all__``, every module, name and file
the pages mention exists, and the README's Python start and the storage example run as written."""
import contextlib
import importlib
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


PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
DOTTED_NAME = re.compile(r"\bmemorylab(?:\.[A-Za-z_]\w*)+")
REPOSITORY_PATH = re.compile(
    r"(?<![\w/.~-])((?:memorylab|app_pages|lab_ui|pages|scripts|tests|benchmarks|sample_data|examples|packages)/[\w./-]*)")


def resolves(dotted):
    """Whether ``memorylab.a.b.c`` is a module, or a name reached from the longest module it starts with."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


def test_every_name_and_file_the_pages_mention_exists():
    missing = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        missing += [f"{page.relative_to(ROOT)}: {name}" for name in sorted(set(DOTTED_NAME.findall(text)))
                    if not resolves(name)]
        missing += [f"{page.relative_to(ROOT)}: {path}" for path in sorted(set(REPOSITORY_PATH.findall(text)))
                    if not (ROOT / path.rstrip(".")).exists()]
    assert not missing, "the docs name what the code no longer has:\n" + "\n".join(missing)


def python_block(path, heading):
    """The first Python block under ``heading`` in the Markdown file at ``path``."""
    section = path.read_text(encoding="utf-8").split(heading, 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S)[1]


def assert_runs_and_prints_what_its_comments_say(code, name):
    """Run ``code`` as a reader would paste it; each ``print(...)  # said`` line must print the start of ``said``."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, name, "exec"), {"__name__": "docs_example"})
    said = [line.split("  # ", 1)[1] for line in code.splitlines() if line.startswith("print(")]
    lines = printed.getvalue().splitlines()
    assert len(lines) == len(said)
    for line, comment in zip(lines, said):
        assert comment.startswith(line), f"{name} says {comment!r}, the code prints {line!r}"


def test_the_readme_python_start_runs_and_prints_what_its_comments_say(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert_runs_and_prints_what_its_comments_say(python_block(README, "## Start in Python"), "README.md")


def test_the_storage_of_your_own_runs_and_prints_what_its_comments_say(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    page = ROOT / "docs" / "python" / "storage.md"
    assert_runs_and_prints_what_its_comments_say(python_block(page, "## Start from the one in memory"),
                                                 "docs/python/storage.md")


def test_the_readme_is_a_front_door():
    assert len(README.read_text(encoding="utf-8").splitlines()) < 200


def test_the_readme_keeps_the_test_command_ci_runs():
    assert "```bash\nscripts/test\n```" in README.read_text(encoding="utf-8")
