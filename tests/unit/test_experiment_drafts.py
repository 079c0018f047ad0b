"""Experiment drafts built from where a person is: an empty spec, a branch as a case, a message as a probe."""
from memorylab.experiments import parse_spec
from memorylab.experiments.drafts import (
    add_probes,
    case_for_branch,
    empty_spec,
    free_name,
    with_branch_case,
    with_message_probe,
)

BRANCH = ("acme", "bot", "s1", "m7")


def test_a_new_draft_is_empty_and_names_are_made_free():
    assert empty_spec("mine") == {"name": "mine", "arms": [], "cases": []}
    assert free_name("s1", set()) == "s1"
    assert free_name("s1", {"s1", "s1-2"}) == "s1-3"


def test_a_branch_joins_as_one_case_however_often_it_is_added():
    spec, name = with_branch_case(empty_spec("mine"), *BRANCH)
    assert name == "s1" and spec["cases"] == [
        {"name": "s1", "session": "s1", "agent": "bot", "tenant": "acme", "leaf": "m7", "probes": []}]
    assert case_for_branch(spec, *BRANCH) is spec["cases"][0]
    assert case_for_branch(spec, "acme", "bot", "s1", None) is None
    again, same = with_branch_case(spec, *BRANCH)
    assert again == spec and same == "s1"
    other, second = with_branch_case(spec, "acme", "bot", "s1", None)  # the newest leaf: another branch
    assert second == "s1-2" and "leaf" not in other["cases"][1]


def test_a_message_becomes_a_probe_of_its_branchs_case_with_its_text_as_the_fact():
    start = empty_spec("mine")
    spec, case_name = with_message_probe(start, BRANCH, " Which order? ", " Order 4471 was refunded. ")
    assert start == empty_spec("mine")  # the draft given is left as it was
    (case,) = spec["cases"]
    assert case_name == "s1" and case["probes"] == [
        {"id": "probe-1", "kind": "recall", "question": "Which order?", "facts": ["Order 4471 was refunded."]}]
    spec, _ = with_message_probe(spec, BRANCH, "When?", "Tuesday")
    assert [p["id"] for p in spec["cases"][0]["probes"]] == ["probe-1", "probe-1-2"]
    spec = spec | {"arms": [{"name": "all", "strategy": "none"}]}
    assert [p.facts for p in parse_spec(spec).cases[0].probes] == [("Order 4471 was refunded.",), ("Tuesday",)]


def test_added_probes_get_ids_unique_in_their_case():
    spec, _ = with_branch_case(empty_spec("mine"), *BRANCH)
    spec = add_probes(spec, "s1", [{"id": "p", "question": "q", "facts": ["f"]}] * 3)
    assert [p["id"] for p in spec["cases"][0]["probes"]] == ["p", "p-2", "p-3"]
