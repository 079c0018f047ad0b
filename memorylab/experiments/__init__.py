"""Experiments: arms (compaction strategies with their settings) run over cases (session branches
with probes), scored by how much of what a probe needs the compacted context still holds, every run kept.

``Experiments(store).run("spec.yaml")`` from Python, ``memorylab eval spec.yaml`` from the command
line, the Experiments page in the lab.
"""
from .calibration import Agreement, Calibration, cohen_kappa
from .context_comparison import ContextComparison, compare_contexts
from .experiments import Experiments
from .intervals import Comparison, Interval
from .job import ExperimentJob
from .progress import TrialStatus, time_left_text
from .proposals import propose_probes
from .regrading import Regrading
from .results import (
    ExperimentResults,
    against_best_text,
    compare_trials,
    interval_text,
    percent_text,
    score_text,
    whole_percent,
)
from .spec import (
    PROBE_KINDS,
    STRATEGY_DEFAULTS,
    STRATEGY_HELP,
    Arm,
    Case,
    ExperimentSpec,
    Grader,
    Probe,
    load_spec,
    parse_spec,
    parse_spec_yaml,
)
from .strategies import default_tail_budget, plan_for, register_window_handler

__all__ = [
    "PROBE_KINDS", "STRATEGY_DEFAULTS", "STRATEGY_HELP", "Agreement", "Arm", "Calibration", "Case", "Comparison",
    "ContextComparison", "ExperimentJob", "ExperimentResults", "ExperimentSpec", "Experiments", "Grader",
    "Interval", "Probe", "Regrading", "TrialStatus", "against_best_text", "cohen_kappa", "compare_contexts",
    "compare_trials", "default_tail_budget", "interval_text", "load_spec", "parse_spec", "parse_spec_yaml",
    "percent_text", "plan_for", "propose_probes", "register_window_handler", "score_text", "time_left_text",
    "whole_percent",
]
