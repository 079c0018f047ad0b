"""The ledger's quantities, identifiers and dates as a person reads them: a range, a rate or a duration
in hours and minutes is one quantity, a day written two ways is one date, and what an audit asks a
summary to hold is the fact, not its punctuation."""
import pytest

from memorylab.audit.artifacts import extract_artifacts, message_artifacts
from memorylab.experiments.facts import match_fact


def found(text, kind, role="assistant"):
    message = {"id": "m1", "role": role, "parts": [{"type": "text", "text": text}]}
    return [a.text for a in message_artifacts(message) if a.kind == kind]


@pytest.mark.parametrize(("text", "expected"), [
    ("Taxi or ride-hailing, about €15–20.", ["€15–20"]),
    ("Expect €35–60 per person with wine.", ["€35–60 per person"]),
    ("roughly €150/night for a room", ["€150/night"]),
    ("disk use is down to 58–62% now", ["58–62%"]),
    ("it takes 3-4 days to arrive", ["3-4 days"]),
    ("about 7 MB/s, which is slow", ["7 MB/s"]),
    ("we ingest 17 GB per day", ["17 GB per day"]),
    ("a full copy takes 5h 41m, more than ten times", ["5h 41m"]),
    ("the report takes 2 min 08 s on the full history", ["2 min 08 s"]),
    ("the train takes 2 h 50 min", ["2 h 50 min"]),
    ("the table has 740M rows and 1.2M rows changed", ["740M rows", "1.2M rows"]),
    ("a 30-minute window", ["30-minute"]),
    ("40 orders-api pods restart in 5 minutes", ["5 minutes"]),
    ("The upgrade costs $1 per seat.", ["$1 per seat"]),
])
def test_a_quantity_is_read_whole(text, expected):
    assert found(text, "quantity") == expected


def test_a_query_parameter_in_code_is_no_amount():
    assert found("Placeholders: `?` becomes `$1`, as in `WHERE id = $2`.", "quantity") == []
    assert found("Parking is $2 an hour.", "quantity") == ["$2"]


@pytest.mark.parametrize(("fact", "summary"), [
    ("€150/night", "Hotels cost about €150 a night."),
    ("€35–60 per person", "Dinner runs 35 to 60 euros per person."),
    ("3-4 days", "Delivery takes 3 to 4 days."),
    ("5h 41m", "The first copy took 5 h 41 min."),
    ("5h 41m", "The first copy took 5h 41m."),
    ("7 MB/s", "It copied at 7 MB a second."),
])
def test_an_audit_asks_for_the_quantity_however_a_summary_writes_it(fact, summary):
    artifact, = [a for a in message_artifacts({"id": "m", "role": "user", "parts": [{"type": "text", "text": fact}]})]
    assert match_fact(summary, artifact.match).kept, (artifact.match, summary)


def test_a_different_quantity_is_still_lost():
    artifact, = message_artifacts({"id": "m", "role": "user", "parts": [{"type": "text", "text": "it took 5h 41m"}]})
    assert not match_fact("The copy took 5h 12m.", artifact.match).kept


@pytest.mark.parametrize(("text", "expected"), [
    ("Refund RF-2025-031977 was issued.", ["RF-2025-031977"]),
    ("Patched CVE-2024-3094 today.", ["CVE-2024-3094"]),
    ("Call me on +447700900123 tomorrow.", ["+447700900123"]),
    ("Ticket PAY-2291 and UTF-8 text.", ["PAY-2291"]),
])
def test_identifiers_with_more_groups_or_no_separators(text, expected):
    assert found(text, "identifier") == expected


def test_a_day_of_no_calendar_is_no_date():
    assert found("zero dates ('0000-00-00 00:00:00') in 3 tables, and 2026-13-01 is no month", "date") == []
    assert found("We fly on 2026-06-12.", "date") == ["2026-06-12"]


def test_a_day_written_two_ways_is_listed_once_at_its_first_mention():
    messages = [{"id": f"m{i}", "role": "user", "parts": [{"type": "text", "text": text}]} for i, text in enumerate([
        "We fly out on 12.06.2026 and back on 19 June.",
        "So that's 12 June, then 19.06.2026 home.",
        "Last year it was 2025-06-12, and the year before 12 June 2024.",
    ])]
    ledger = [(a.text, a.message_id) for a in extract_artifacts(messages) if a.kind == "date"]
    assert ledger == [("12.06.2026", "m0"), ("19 June", "m0"), ("2025-06-12", "m2"), ("12 June 2024", "m2")]


def test_a_date_ends_at_its_day_not_at_the_comma_after_it():
    assert found("Out on 12 June, back a week later.", "date") == ["12 June"]
