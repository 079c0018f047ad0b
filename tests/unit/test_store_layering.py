"""The repositories write their SQL against a store's public face and its dialect: nothing outside the
backend classes (``store/sqlite.py``, ``store/postgres.py``) touches a backend's private names."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = {ROOT / "memorylab" / "store" / "sqlite.py", ROOT / "memorylab" / "store" / "postgres.py"}
PRIVATE_REACH = re.compile(r"\b_?store\._[A-Za-z]")
"""``store._x`` or ``self._store._x``: a private name of a store, read from outside it."""


def reaches(path):
    return [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if PRIVATE_REACH.search(line)]


def test_no_code_outside_the_backends_reaches_into_a_store_s_private_names():
    sources = [*(ROOT / "memorylab").rglob("*.py"), *(ROOT / "pages").rglob("*.py"), ROOT / "app.py"]
    assert [reach for path in sources if path not in BACKENDS for reach in reaches(path)] == []


@pytest.mark.parametrize("line, reach", [
    ("rows = self._store._all_tuples(sql)", True), ("limit = store._NO_LIMIT", True),
    ("lock = self._store._FOR_UPDATE", True), ("rows = self._store.fetch_tuples(sql)", False),
    ("lock = self.dialect.row_lock", False), ("restore._x = 1", False),
])
def test_the_check_tells_a_private_reach_from_a_public_one(line, reach):
    assert bool(PRIVATE_REACH.search(line)) is reach
