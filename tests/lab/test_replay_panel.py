"""The replay panel through AppTest, on a page that draws it for the active branch as the Chat page
does: a replay started with a mocked model runs in the background and ends in a side-by-side table."""
import pytest
from streamlit.testing.v1 import AppTest

from memorylab import ChatRunner, Session, Store, compare_branches
from memorylab.llm.replay import replays_of
from tests.lab.test_experiments_page import rerun

SESSION = "replay-lab"
QUESTIONS = ("Hi, I'm Ana.", "What do I drink?", "Thanks, bye.")


def replay_page(session_id):
    from lab_ui.replay_panel import render_replay
    from lab_ui.selection import active_leaf
    from lab_ui.store import open_store
    from memorylab import Session

    session = Session.open(open_store(), session_id)
    render_replay(session, active_leaf(session))


@pytest.fixture
def conversation(lab_db):
    """Three mocked turns on one branch of the lab database; returns its leaf id."""
    with Store(lab_db) as store:
        runner = ChatRunner(Session.create(store, SESSION), model="gpt-4o-mini", mock_response="Original answer.")
        for question in QUESTIONS:
            runner.send(question)
        return runner.last_message["id"]


def open_panel(**state):
    app = AppTest.from_function(replay_page, args=(SESSION,), default_timeout=60)
    app.session_state["model"] = "gpt-4o-mini"
    for key, value in state.items():
        app.session_state[key] = value
    return rerun(app)


def start_replay(app, arguments="{}", model=None):
    app.text_area[0].set_value(arguments)
    if model is not None:
        app.text_input[0].set_value(model)
    (start,) = [b for b in app.button if b.label == "Start the replay"]
    start.click()
    rerun(app)
    if "replay_job" in app.session_state:  # still running when the page drew: wait, then poll once
        assert app.session_state["replay_job"].wait(timeout=30)
        rerun(app)
    return app


def test_a_replay_runs_in_the_background_and_ends_side_by_side(lab_db, conversation):
    app = open_panel()
    assert "single branch" in app.caption[0].value

    start_replay(app, '{"mock_response": "Replayed answer."}', model="claude-haiku-4-5")

    assert "Replayed 3 turns with" in app.success[0].value
    frame = app.dataframe[0].value
    assert list(frame["user"]) == list(QUESTIONS)
    assert set(frame["answer_a"]) == {"Original answer."} and set(frame["answer_b"]) == {"Replayed answer."}
    assert (frame["cost_b"] > frame["cost_a"]).all()  # Haiku's price is above GPT-4o mini's
    with Store(lab_db) as store:
        (replay,) = replays_of(Session.open(store, SESSION), conversation)
    assert app.selectbox[0].value == replay["id"]
    assert any("3 answers" in caption.value for caption in app.caption)

    (open_branch,) = [b for b in app.button if b.label == "Open branch B in the chat"]
    open_branch.click()
    rerun(app)
    assert app.session_state["leaf_id"] == replay["id"]
    assert app.selectbox[0].value == conversation  # the replay is now A, compared with the branch it replays


def test_a_failing_model_stops_the_replay_and_says_what_was_kept(conversation):
    app = start_replay(open_panel(), '{"mock_response": "litellm.RateLimitError"}')
    assert "Turn 1 of 3 failed" in app.warning[0].value and "rate limiting" in app.warning[0].value
    assert "single branch" in app.caption[0].value  # nothing was stored, so there is nothing to compare


def test_wrong_arguments_are_refused_before_anything_runs(conversation):
    app = start_replay(open_panel(), "[1, 2]")
    assert "must be a JSON object" in app.error[0].value
    app = start_replay(app, "{not json")
    assert "not JSON" in app.error[0].value
    app = start_replay(app, '{"api_key": "sk-nope"}')
    assert "api_key is not accepted" in app.error[0].value
    assert "replay_job" not in app.session_state


def test_a_slow_replay_shows_its_progress_and_can_be_cancelled(conversation):
    app = open_panel()
    app.text_area[0].set_value('{"mock_response": "Slow answer.", "mock_delay": 0.4}')
    (start,) = [b for b in app.button if b.label == "Start the replay"]
    start.click()
    rerun(app)
    (bar,) = app.get("progress")
    assert "of 3 with `gpt\\-4o\\-mini`" in bar.proto.text
    (cancel,) = [b for b in app.button if b.label == "Cancel the replay"]
    cancel.click()
    rerun(app)
    assert app.session_state["replay_job"].wait(timeout=30)
    rerun(app)
    assert "Cancelled:" in app.warning[0].value and "of 3 turns were replayed and are kept" in app.warning[0].value
    assert app.selectbox[0].value != conversation and len(app.dataframe[0].value) == 3


def test_the_comparison_reads_the_branches_only_once_opened(lab_db, conversation, monkeypatch):
    with Store(lab_db) as store:
        session = Session.open(store, SESSION)
        first_answer = session.get_history(conversation)[1]
        session.append_message({"role": "assistant", "parts": [{"type": "text", "text": "Another answer."}]},
                               parent_id=first_answer["parent_id"])
    compared = []
    monkeypatch.setattr("lab_ui.replay_panel.compare_branches",
                        lambda *args: compared.append(args[1:]) or compare_branches(*args))
    app = open_panel(leaf_id=conversation)
    (panel,) = [e for e in app.expander if e.label.startswith("Compare this branch with another")]
    assert "(1 other branch)" in panel.label and not app.dataframe and compared == []

    app.session_state["replay_compare_open"] = True
    rerun(app)
    frame = app.dataframe[0].value
    assert compared and compared[0][0] == conversation
    assert list(frame["answer_a"])[0] == "Original answer." and list(frame["answer_b"])[0] == "Another answer."
