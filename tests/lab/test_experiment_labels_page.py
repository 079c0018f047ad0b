"""Labelling probe verdicts on the Experiments page through AppTest: marks are saved with who, the
leaderboard says how far each score can be trusted, and the calibration shows beside the table."""
from memorylab import Store
from memorylab.experiments import Experiments
from tests.lab.test_experiments_page import click, leaderboard, ran_once, rerun, run_page  # noqa: F401

EDITOR = "exp_labels:sample:1:support:full-history"


def mark(app, marks):
    app.session_state[EDITOR] = {"edited_rows": marks, "added_rows": [], "deleted_rows": []}
    return rerun(app)


def test_a_person_marks_verdicts_and_the_page_shows_the_trust_it_gives(ran_once):  # noqa: F811
    app = run_page(exp_labeller="ana")
    (editor,) = [e for e in app.data_editor if e.key == EDITOR]
    table = editor.value
    assert {"probe", "scored", "mark", "grade", "label"} <= set(table.columns) and set(table["mark"]) == {""}
    assert all(v.startswith("pass") for v in table["scored"]), "the full history keeps every support probe"
    assert any("No labels on this trial's outputs yet" in c.value for c in app.caption)

    mark(app, {0: {"mark": "right"}, 1: {"mark": "right", "grade": 0.5}, 2: {"mark": "wrong"}})
    click(app, "Save labels")
    assert any(s.value == "Saved 3 labels." for s in app.success)
    board = leaderboard(app).set_index("arm")
    assert board.loc["full-history", "trust"] == "matcher agrees with 2 of 3 labels, kappa 0.00"
    assert board.loc["window-8k", "trust"] == "matcher: no labels yet"
    assert any("How far each scorer can be trusted" in m.value for m in app.markdown)
    (calibration,) = [t.value for t in app.dataframe if "kappa" in t.value.columns]
    assert calibration.iloc[0][["scorer", "kind", "labelled", "agreed", "false_pass"]].tolist() == [
        "matcher", "all", 3, 2, 1]
    (editor,) = [e for e in app.data_editor if e.key == EDITOR]
    assert list(editor.value["mark"][:3]) == ["right", "right", "wrong"]
    assert editor.value["label"][2].startswith("should fail — ana")

    with Store(ran_once) as store:
        labels = Experiments(store).results("sample").labels
    probes = list(table["probe"][:3])
    assert [(labels[("support", "full-history", p)]["correct"], labels[("support", "full-history", p)]["labelled_by"])
            for p in probes] == [(True, "ana"), (True, "ana"), (False, "ana")]
    assert labels[("support", "full-history", probes[1])]["grade"] == 0.5
