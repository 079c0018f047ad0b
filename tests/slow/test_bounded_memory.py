"""The bounded reads hold a page, not the session: on a 20,000-message session (the scale benchmark's,
a tenth of its --memory size) iter_history, write_export and Session.plan_compaction each grow a fresh
process's peak memory by a fraction of what get_history grows it by, and by less than a fixed bound
(the benchmark measures the 200,000-message session: benchmarks/run.py --scale --memory); and
``memorylab check`` walks its long branch in seconds, within that bound too. About 30 s a backend,
most of it writing the session: slow."""
import sys
from pathlib import Path

import pytest

from memorylab import Store

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
from scale import add_long_session, memory_growth  # noqa: E402  (benchmarks/scale.py)

MESSAGES = 20_000
BOUND_MIB = 24
"""At 20,000 messages get_history grows the peak by about 37 MiB; the bounded reads by 6 to 13 (most of
it SQLite's page cache, which the file's 9 MB bounds)."""
BOUNDED = ("iter_history", "write_export", "Session.plan_compaction")


@pytest.fixture
def long_store(store_target):
    with Store(store_target) as store:
        add_long_session(store, MESSAGES)
    return store_target


def test_the_bounded_reads_grow_memory_by_a_fraction_of_get_history(long_store):
    whole = memory_growth("get_history", long_store)["mib"]
    assert whole > 2 * BOUND_MIB / 3, f"get_history grew the peak by only {whole:.0f} MiB: the probe measures nothing"
    for operation in BOUNDED:
        grown = memory_growth(operation, long_store)["mib"]
        assert grown < BOUND_MIB and grown < whole / 2, f"{operation}: {grown:.1f} MiB against {whole:.1f} MiB"



CHECK_SECONDS = 60
"""``memorylab check`` takes under a second here; PostgreSQL's hashed recursive walk took minutes."""


def test_check_walks_a_long_branch_quickly_and_in_bounded_memory(long_store):
    whole = memory_growth("get_history", long_store)["mib"]
    checked = memory_growth("memorylab check", long_store, timeout=CHECK_SECONDS)
    assert checked["seconds"] is not None, f"memorylab check ran past {CHECK_SECONDS} s on {MESSAGES:,} messages"
    assert checked["mib"] < BOUND_MIB and checked["mib"] < whole, f"{checked['mib']:.1f} MiB against {whole:.1f} MiB"
