"""One arm's settings checked before anything runs: each kind of setting refused with a sentence saying why."""
import pytest

from memorylab.experiments import STRATEGY_DEFAULTS
from memorylab.experiments.spec import arm_setting_problems


def problems(strategy, **settings):
    return arm_setting_problems(strategy, {**STRATEGY_DEFAULTS[strategy], **settings})


@pytest.mark.parametrize("strategy", STRATEGY_DEFAULTS)
def test_every_strategys_defaults_pass(strategy):
    assert problems(strategy) == []


@pytest.mark.parametrize("strategy, settings, expected", [
    ("summarize", {"template": 7}, "template must be non-empty text, got 7"),
    ("summarize", {"model": " "}, "model must be non-empty text, got ' '"),
    ("summarize", {"completion": "fast"}, "completion must be a mapping of completion arguments, got 'fast'"),
    ("summarize", {"model": "http://host/model"}, "model 'http://host/model' names a host: "),
    ("summarize", {"template": "{transcript!r}"}, "the summary prompt template may hold only plain placeholders"),
    ("extractive", {"protect_head": -1}, "protect_head must be a non-negative integer, got -1"),
    ("truncate", {"keep_recent": None}, "keep_recent must be a non-negative integer, got None"),
    ("window", {"max_length": 0}, "max_length must be at least 1 character"),
    ("window", {"handler": "nope"}, "handler 'nope' is not registered; the registered ones are "),
])
def test_a_bad_setting_is_refused_by_name(strategy, settings, expected):
    (problem,) = problems(strategy, **settings)
    assert problem.startswith(expected), problem


def test_an_optional_count_may_be_left_out():
    assert problems("extractive", tail_token_budget=None) == []


def test_a_windows_length_is_compared_only_once_its_other_settings_are_valid():
    found = problems("window", max_length=0, handler="")
    assert found[0] == "handler must be non-empty text, got ''"
    assert not any(problem.startswith("max_length") for problem in found), found
