"""Public benchmark datasets as cases: a LoCoMo or LongMemEval file (small ones written here, in the
datasets' own layout) becomes sessions and a spec of the dataset's questions, which eval runs."""
import json

import pytest
import yaml

from memorylab.cli import main
from memorylab.datasets import import_dataset
from memorylab.errors import ImportFormatError, InvalidInputError
from memorylab.experiments import Experiments
from memorylab.history.session import Session


def turn(speaker, dia_id, text, **extra):
    return {"speaker": speaker, "dia_id": dia_id, "text": text, **extra}


LOCOMO = [{
    "sample_id": "conv-1",
    "conversation": {
        "speaker_a": "Ana", "speaker_b": "Ben",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            turn("Ana", "D1:1", "I joined the VR Club last week, we meet on Fridays."),
            turn("Ben", "D1:2", "Nice! I started pottery classes.",
                 img_url=["https://example.org/bowl.jpg"], blip_caption="a photo of a blue bowl"),
        ],
        "session_2_date_time": "10:00 am on 17 December, 2023",
        "session_2": [
            turn("Ana", "D2:1", "We moved to Lisbon in December 2022."),
            turn("Ben", "D2:2", "I have two dogs now."),
        ],
    },
    "qa": [
        {"question": "Which club did Ana join?", "answer": "VR Club", "evidence": ["D1:1"], "category": 4},
        {"question": "What did Ben start?", "answer": "pottery classes", "evidence": ["D1:2"], "category": 4},
        {"question": "When did Ana move to Lisbon?", "answer": "December 2022", "evidence": ["D2:1"], "category": 2},
        {"question": "What colour is Ben's bowl?", "answer": "blue", "evidence": ["D1:2"], "category": 1},
        {"question": "How many dogs does Ben have?", "answer": 2, "evidence": ["D2:2"], "category": 1},
        {"question": "Does Ben like dogs?", "answer": "Yes, he has two", "evidence": ["D2:2"], "category": 3},
        {"question": "When did Ana join the club?", "answer": "1 May 2023", "evidence": ["D1:1"], "category": 2},
        {"question": "What did Ana sell?", "adversarial_answer": "her car", "evidence": ["D2:1"], "category": 5},
    ],
}]

LONGMEMEVAL = [
    {"question_id": "q-degree", "question_type": "single-session-user", "question": "What degree did I get?",
     "answer": "Business Administration", "question_date": "2023/05/30 (Tue) 23:40",
     "haystack_session_ids": ["s-a", "s-b"], "haystack_dates": ["2023/05/20 (Sat) 02:21", "2023/05/21 (Sun) 09:00"],
     "haystack_sessions": [
         [{"role": "user", "content": "Any tips for a cover letter?"}, {"role": "assistant", "content": "Sure."}],
         [{"role": "user", "content": "I graduated in Business Administration.", "has_answer": True},
          {"role": "assistant", "content": "Congratulations!"}],
     ],
     "answer_session_ids": ["s-b"]},
    {"question_id": "q-pet_abs", "question_type": "single-session-user", "question": "What is my cat's name?",
     "answer": "You did not mention a cat", "question_date": "2023/05/30 (Tue) 23:40",
     "haystack_session_ids": ["s-c"], "haystack_dates": ["2023/05/22 (Mon) 10:00"],
     "haystack_sessions": [[{"role": "user", "content": "I like dogs."}, {"role": "assistant", "content": "Me too."}]],
     "answer_session_ids": []},
]


@pytest.fixture
def locomo_file(tmp_path):
    path = tmp_path / "locomo10.json"
    path.write_text(json.dumps(LOCOMO), encoding="utf-8")
    return path


@pytest.fixture
def longmemeval_file(tmp_path):
    path = tmp_path / "longmemeval_s.json"
    path.write_text(json.dumps(LONGMEMEVAL), encoding="utf-8")
    return path


def test_a_locomo_conversation_becomes_one_session_with_its_speakers_dates_and_images(store, locomo_file):
    import_dataset(store, "locomo", locomo_file)
    messages = Session.open(store, "locomo-conv-1", agent_id="locomo").get_all_messages()
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    assert [m["metadata"]["speaker"] for m in messages] == ["Ana", "Ben", "Ana", "Ben"]
    assert [m["metadata"]["session_date"] for m in messages][1:3] == ["1:56 pm on 8 May, 2023",
                                                                     "10:00 am on 17 December, 2023"]
    assert messages[0]["created_at"].startswith("2023-05-08T13:56") and messages[2]["created_at"] < messages[3][
        "created_at"]
    assert "[Ben shares an image: a photo of a blue bowl]" in messages[1]["parts"][0]["text"]
    assert messages[1]["metadata"]["image_url"] == ["https://example.org/bowl.jpg"]


def test_the_spec_asks_the_judgeable_questions_and_counts_what_it_left_out(store, locomo_file):
    result = import_dataset(store, "locomo", locomo_file)
    spec = yaml.safe_load(result.spec_path.read_text(encoding="utf-8"))
    (case,) = spec["cases"]
    assert case["session"] == "locomo-conv-1" and case["agent"] == "locomo"
    assert [(p["kind"], p["facts"]) for p in case["probes"]] == [
        ("single-hop", ["VR Club"]), ("single-hop", ["pottery classes"]), ("temporal", ["December 2022"]),
        ("multi-hop", ["blue"])]
    assert dict(result.left_out) == {"count": 1, "yes/no": 1, "derived": 1, "unanswerable": 1}
    header = result.spec_path.read_text(encoding="utf-8")
    assert "#   1 bare counts" in header and "(derived by the annotators)" in spec["description"]
    assert result.probes == 4 and "left out 1: yes/no answers" in str(result)


def test_eval_runs_the_written_spec_offline_with_full_history_as_the_ceiling(store, locomo_file):
    result = import_dataset(store, "locomo", locomo_file)
    results = Experiments(store).run(str(result.spec_path))
    arms = {arm["arm"]: arm for arm in results.arm_summaries()}
    assert arms["full-history"]["score"] == 1.0
    assert arms["window-8k"]["tokens_after"] <= arms["full-history"]["tokens_after"]


def test_a_longmemeval_question_becomes_a_session_of_its_haystack(store, longmemeval_file):
    result = import_dataset(store, "longmemeval", longmemeval_file)
    messages = Session.open(store, "longmemeval-q-degree", agent_id="longmemeval").get_all_messages()
    assert [m["metadata"]["haystack_session"] for m in messages] == ["s-a", "s-a", "s-b", "s-b"]
    assert messages[2]["metadata"]["has_answer"] is True and messages[2]["created_at"].startswith("2023-05-21T09:00")
    spec = yaml.safe_load(result.spec_path.read_text(encoding="utf-8"))
    assert [c["name"] for c in spec["cases"]] == ["longmemeval-q-degree"]
    assert spec["cases"][0]["probes"][0]["kind"] == "single-session-user"
    assert dict(result.left_out) == {"unanswerable": 1}


def test_importing_again_adds_no_message_and_rewrites_the_spec(store, locomo_file):
    import_dataset(store, "locomo", locomo_file)
    again = import_dataset(store, "locomo", locomo_file)
    assert again.imported.messages_added == 0 and again.probes == 4


def test_a_file_of_another_shape_is_refused_by_place(store, tmp_path):
    path = tmp_path / "wrong.json"
    path.write_text(json.dumps([{"sample_id": "x"}]), encoding="utf-8")
    with pytest.raises(ImportFormatError, match="sample 0: expected LoCoMo sample"):
        import_dataset(store, "locomo", path)
    with pytest.raises(InvalidInputError, match="unknown dataset 'squad'"):
        import_dataset(store, "squad", path)


def test_the_command_imports_and_writes_the_spec_it_names(tmp_path, locomo_file, capsys):
    db, spec = tmp_path / "bench.db", tmp_path / "out.yaml"
    assert main(["--db", str(db), "datasets", "import", "locomo", str(locomo_file), "--spec", str(spec)]) == 0
    printed = capsys.readouterr().out
    assert f"spec {spec}: 4 probes in 1 cases" in printed and "left out 1: bare counts" in printed
    assert main(["--db", str(db), "eval", str(spec)]) == 0
    assert "| full-history | none | 1.00 |" in capsys.readouterr().out
