"""The project passes its linter and its type checker: the bare commands, as pyproject.toml configures
them (``[tool.ruff]``: the whole tree; ``[tool.mypy]``: the typed core)."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("tool, passed", [("ruff", "All checks passed"), ("mypy", "Success: no issues found")])
def test_the_bare_command_finds_nothing(tool, passed):
    done = subprocess.run([sys.executable, "-m", tool] + (["check"] if tool == "ruff" else []), cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, f"{tool} found problems:\n{done.stdout}{done.stderr}"
    assert passed in done.stdout
