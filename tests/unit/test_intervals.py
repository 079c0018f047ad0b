"""The bootstrap behind every interval and verdict: checked by what must hold of it (the mean inside,
narrower with more cases, a point for identical scores, the normal approximation on many cases) and
by the one small case whose answer can be worked out by hand."""
import statistics

from memorylab.experiments.intervals import BETTER, UNCLEAR, WORSE, Interval, mean, mean_interval, paired_difference

SCORES = [0.0, 0.25, 0.5, 0.75, 1.0, 0.4]


def width(interval):
    return interval.high - interval.low


def test_the_interval_holds_the_mean_and_stays_within_the_scores():
    for scores in (SCORES, [0.1, 0.1, 0.1, 0.9], [1.0, 0.0], [0.3] * 7 + [0.31]):
        interval = mean_interval(scores)
        assert min(scores) <= interval.low <= mean(scores) <= interval.high <= max(scores), scores


def test_two_cases_scoring_0_and_1_give_the_whole_range():
    # Resampled means are 0, 0.5 and 1 with chances 1/4, 1/2, 1/4: both tails hold far more than 2.5%.
    assert mean_interval([0.0, 1.0]) == Interval(0.0, 1.0)


def test_on_many_cases_it_agrees_with_the_normal_approximation():
    scores = [0.0, 1.0] * 50  # mean 0.5, standard error 0.05: about 0.40 to 0.60
    interval = mean_interval(scores)
    margin = 1.96 * statistics.pstdev(scores) / len(scores) ** 0.5
    assert abs(interval.low - (0.5 - margin)) < 0.02 and abs(interval.high - (0.5 + margin)) < 0.02


def test_the_same_scores_over_more_cases_give_a_narrower_interval():
    few, many = mean_interval(SCORES), mean_interval(SCORES * 10)
    assert width(many) < width(few) / 2  # about 1 / sqrt(10) as wide


def test_identical_scores_give_the_point_and_one_case_gives_none():
    assert mean_interval([0.7] * 5) == Interval(0.7, 0.7)
    assert mean_interval([0.1] * 3) == Interval(mean([0.1] * 3), mean([0.1] * 3))
    assert mean_interval([0.7]) is None and mean_interval([]) is None


def test_the_same_scores_give_the_same_interval_every_time():
    assert mean_interval(SCORES) == mean_interval(list(SCORES)) == mean_interval(tuple(SCORES))
    first = paired_difference(dict(enumerate(SCORES)), dict(enumerate(reversed(SCORES))))
    assert first == paired_difference(dict(enumerate(SCORES)), dict(enumerate(reversed(SCORES))))


def test_clearly_separated_arms_are_better_and_worse_and_the_difference_is_first_minus_second():
    high = {f"case{i}": 0.9 + 0.01 * (i % 3) for i in range(8)}
    low = {f"case{i}": 0.2 + 0.05 * (i % 4) for i in range(8)}
    ahead, behind = paired_difference(high, low), paired_difference(low, high)
    assert ahead.verdict == BETTER and behind.verdict == WORSE
    assert ahead.cases == 8 and ahead.difference == mean(list(high.values())) - mean(list(low.values()))
    assert 0 < ahead.interval.low <= ahead.difference <= ahead.interval.high
    assert behind.difference == -ahead.difference and behind.interval.high < 0


def test_overlapping_arms_show_no_clear_difference():
    first = {"a": 0.5, "b": 0.7, "c": 0.4, "d": 0.6}
    second = {"a": 0.6, "b": 0.5, "c": 0.5, "d": 0.55}  # ahead on two cases, behind on two
    comparison = paired_difference(first, second)
    assert comparison.verdict == UNCLEAR and comparison.interval.low < 0 < comparison.interval.high


def test_pairing_finds_a_small_steady_gain_that_the_two_means_intervals_hide():
    base = {f"case{i}": 0.1 + 0.08 * i for i in range(10)}  # the cases differ far more than the arms do
    better = {case: score + 0.05 for case, score in base.items()}
    shown_apart = mean_interval(list(better.values())), mean_interval(list(base.values()))
    assert shown_apart[0].low < shown_apart[1].high  # the two intervals overlap
    assert paired_difference(better, base).verdict == BETTER


def test_only_the_cases_both_have_are_compared():
    comparison = paired_difference({"a": 1.0, "b": 0.5, "c": 0.5}, {"b": 0.5, "c": 0.5, "d": 0.0})
    assert comparison.cases == 2 and comparison.difference == 0
    assert comparison.interval == Interval(0.0, 0.0) and comparison.verdict == UNCLEAR


def test_one_case_in_common_gives_no_interval_and_no_clear_difference():
    comparison = paired_difference({"a": 1.0, "b": 0.9}, {"a": 0.0})
    assert (comparison.cases, comparison.difference, comparison.interval, comparison.verdict) == (1, 1.0, None, UNCLEAR)
    none = paired_difference({"a": 1.0}, {"b": 0.0})
    assert (none.cases, none.difference, none.interval, none.verdict) == (0, None, None, UNCLEAR)
