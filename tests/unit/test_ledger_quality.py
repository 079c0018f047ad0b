"""The artifact ledger against the hand-labelled spans of tests/data/ledger (see its README): it must
stay precise, kind by kind, and find what it found before. The numbers themselves are printed by
``python benchmarks/ledger_quality.py``; these bounds catch a change that makes the ledger noisy."""
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("ledger_quality", ROOT / "benchmarks" / "ledger_quality.py")
ledger_quality = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ledger_quality)


@pytest.fixture(scope="module")
def measured():
    return ledger_quality.evaluate()


def test_every_kind_is_found_precisely(measured):
    for kind, counts in measured["kinds"].items():
        assert counts["found"], f"the labelled spans hold {kind} artifacts, and none was found"
        assert counts["precision"] >= 0.9, (kind, counts, measured["noise"][kind])
    found = sum(c["found"] for c in measured["kinds"].values())
    right = sum(c["right"] for c in measured["kinds"].values())
    assert right / found >= 0.9


def test_the_ledger_finds_most_of_what_was_labelled_except_reworded_decisions(measured):
    for kind, counts in measured["kinds"].items():
        assert counts["recall"] >= (0.35 if kind == "decision" else 0.6), (kind, counts, measured["missed"][kind])


def test_a_matching_text_in_another_spelling_is_the_same_artifact():
    same = ledger_quality.same
    assert same("path", "summarize.py", "importer/summarize.py")
    assert same("quantity", "300k-row", "300k rows")
    assert same("decision", "We'll use PostgreSQL 16 for the analytics store.",
                "we'll use PostgreSQL 16 for the analytics store")
    assert not same("path", "main.py", "tests/test_x.py")
    assert not same("quantity", "3 GB", "30 GB")
