"""The Pareto chart reads as its table does: the x axis spans every arm's saving (an arm that adds
tokens shows left of 0, one that saves 100% is not cut), labels of arms close together go different
ways, a long name is shortened beside its point and whole in its hover, and the hover rounds a saving
as the table does."""
from memorylab.display.viz import LABEL_CHARS, pareto_figure


def arm(name, saved, score, strategy="extractive"):
    return {"arm": name, "strategy": strategy, "saved_pct": saved, "score": score, "spread": 0.0,
            "tokens_after": 100}


def points(figure):
    return [(x, text, position, data) for trace in figure.data if trace.mode == "markers+text"
            for x, text, position, data in zip(trace.x, trace.text, trace.textposition, trace.customdata)]


def test_an_arm_that_adds_tokens_is_inside_the_axis():
    figure = pareto_figure([arm("full", 0.0, 1.0, "none"), arm("recorded", -38.0, 0.9, "recorded"),
                            arm("extractive", 100.0, 0.4)])
    low, high = figure.layout.xaxis.range
    assert low < -38.0 and high > 100.0


def test_the_axis_fits_savings_well_under_100():
    low, high = pareto_figure([arm("a", 10.0, 0.5), arm("b", 30.0, 0.4)]).layout.xaxis.range
    assert low < 0 < 30 < high < 60


def test_labels_of_close_arms_go_different_ways_and_long_names_are_whole_on_hover():
    name = "extractive-with-a-very-long-descriptive-name"
    figure = pareto_figure([arm(name, 50.0, 0.80), arm("extractive-2", 51.0, 0.82), arm("far", 5.0, 0.1)])
    shown = {data[0]: (text, position) for _, text, position, data in points(figure)}
    assert shown[name][1] != shown["extractive-2"][1]
    assert len(shown[name][0]) == LABEL_CHARS and shown[name][0].endswith("…")
    assert name in shown


def test_the_hover_rounds_a_saving_as_the_table_does():
    (point,) = points(pareto_figure([arm("a", 26.5, 0.5)]))
    assert point[3][3] == "27%" and "%{customdata[3]}" in pareto_figure([arm("a", 26.5, 0.5)]).data[0].hovertemplate
