"""Cohen's kappa against a hand-computed example, and a calibration's counts per scorer and kind."""
import pytest

from memorylab.experiments.calibration import Calibration, cohen_kappa


def test_kappa_matches_the_hand_computed_value():
    # scorer passed / people passed: 4 both, 2 scorer only, 1 people only, 3 neither.
    # observed 7/10; chance 0.6 * 0.5 + 0.4 * 0.5 = 0.5; kappa (0.7 - 0.5) / (1 - 0.5) = 0.4
    pairs = [(True, True)] * 4 + [(True, False)] * 2 + [(False, True)] + [(False, False)] * 3
    assert cohen_kappa(pairs) == pytest.approx(0.4)
    assert cohen_kappa([(True, True), (False, False)]) == 1.0
    assert cohen_kappa([(True, False), (False, True)]) == -1.0
    assert cohen_kappa([(True, True)] * 3) is None, "both always said pass: undefined"
    assert cohen_kappa([]) is None


def item(probe, kind, correct, matcher):
    return {"case": "c", "arm": "a", "probe": probe, "kind": kind, "correct": correct,
            "verdicts": {"matcher": matcher}}


def test_a_calibration_counts_each_kind_and_names_false_passes_and_fails():
    calibration = Calibration([item("p1", "recall", True, True), item("p2", "recall", False, True),
                               item("p3", "decision", True, False), item("p4", "decision", False, False)])
    every = calibration.agreement("matcher")
    assert (every.labelled, every.agreed, every.kappa) == (4, 2, 0.0)
    assert every.false_pass == (("c", "a", "p2"),) and every.false_fail == (("c", "a", "p3"),)
    assert every.text() == "matcher agrees with 2 of 4 labels, kappa 0.00"
    frame = calibration.frame().set_index(["scorer", "kind"])
    assert frame.loc[("matcher", "recall"), "agreed"] == 1 and frame.loc[("matcher", "decision"), "false_fail"] == 1
    assert calibration.summary_lines() == [every.text()]
