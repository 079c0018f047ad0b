"""Message rows decoded a batch at a time (``messages_from_rows``, what every branch read uses) give
exactly the messages their stored JSON holds, and refuse exactly the rows ``memorylab check`` lists,
whichever of its short or full paths a row takes."""
import json
import re

import pytest

from memorylab import Session, load_samples
from memorylab.errors import DamagedRowError
from memorylab.store.rows import MESSAGE_COLUMNS, messages_from_rows, unreadable_message

PLAIN = '[{"type":"text","text":"hello"}]'
DAMAGED_PARTS = {
    "truncated": ('[{"type":"text","te', "its stored parts is not readable JSON"),
    "text after it": (PLAIN + " ", "its stored parts is not readable JSON (text after the value"),
    "another kind": ('{"type":"text","text":"hello"}', "its stored parts is a JSON dict, not a list"),
    "a text that is no string": ('[{"type":"text","text":7}]', "parts[0].text must be a string"),
    "a later type key wins": ('[{"type":"text","text":"a","type":"tool-read"}]', "parts[0].toolCallId"),
    "a bad second part": (PLAIN[:-1] + ',{"type":""}]', "parts[1] must be a dict with a non-empty string"),
}
DAMAGED_METADATA = {
    "truncated": ('{"a":', "its stored metadata is not readable JSON"),
    "another kind": ("[]", "its stored metadata is a JSON list, not a dict"),
}


def rows_of(store):
    return store.fetch_tuples(f"SELECT {MESSAGE_COLUMNS} FROM messages ORDER BY seq")


def stored_as_is(row):
    """What a row holds, decoded by the standard library: the message a read must give for it."""
    message_id, parent_id, role, parts, created_at, metadata, tokens = row
    return {"id": message_id, "role": role, "parts": json.loads(parts), "created_at": created_at,
            "metadata": json.loads(metadata), "parent_id": parent_id, "tokens": tokens}


@pytest.fixture
def one_row(store):
    """A stored message row (one text part, no metadata: the short path), as a tuple to vary."""
    Session.create(store, "s").append_message({"id": "m1", "role": "user", "parts": [{"type": "text",
                                                                                       "text": "hello"}]})
    (row,) = rows_of(store)
    assert row[3] == PLAIN and row[5] == "{}"
    return row


def test_every_sample_message_reads_as_its_stored_json(store):
    load_samples(store)
    session = Session.create(store, "shapes")
    session.append_message({"id": "r1", "role": "assistant", "metadata": {"model": "m"}, "parts": [
        {"type": "reasoning", "text": "think"}, {"type": "text", "text": "a"}, {"type": "text", "text": "b"}]})
    session.append_message({"id": "e1", "role": "user", "parts": []})
    rows = rows_of(store)
    assert {len(json.loads(row[3])) for row in rows} >= {0, 1, 2, 3}  # empty, plain, tool and multi-part rows
    assert any(row[5] != "{}" for row in rows)
    assert messages_from_rows(rows) == [stored_as_is(row) for row in rows]


@pytest.mark.parametrize("damage", DAMAGED_PARTS)
def test_a_damaged_parts_document_is_refused_as_check_refuses_it(one_row, damage):
    parts, problem = DAMAGED_PARTS[damage]
    row = one_row[:3] + (parts,) + one_row[4:]
    with pytest.raises(DamagedRowError, match=f"message 'm1': .*{re.escape(problem)}") as refused:
        messages_from_rows([one_row, row, one_row])
    assert str(refused.value) == unreadable_message(row)


@pytest.mark.parametrize("damage", DAMAGED_METADATA)
def test_damaged_metadata_beside_plain_parts_is_refused(one_row, damage):
    metadata, problem = DAMAGED_METADATA[damage]
    row = one_row[:5] + (metadata,) + one_row[6:]
    with pytest.raises(DamagedRowError, match=f"message 'm1': {re.escape(problem)}"):
        messages_from_rows([row])


def test_a_missing_document_is_refused(one_row):
    for at in (3, 5):
        with pytest.raises(DamagedRowError, match="is not readable JSON"):
            messages_from_rows([one_row[:at] + (None,) + one_row[at + 1:]])
