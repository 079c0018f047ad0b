import math

import pytest

from memorylab.errors import InvalidInputError, InvalidMessageError
from memorylab.validation import (
    check_counts,
    check_identifier,
    check_integer,
    check_number,
    check_page,
    is_integer,
    is_number,
)


@pytest.mark.parametrize("value, integer, number", [
    (0, True, True), (-3, True, True), (10**400, True, True), (1.5, False, True),
    (True, False, False), (False, False, False), (math.nan, False, False), (math.inf, False, False),
    ("3", False, False), (None, False, False),
])
def test_a_bool_is_never_a_count_and_nan_is_never_a_number(value, integer, number):
    assert is_integer(value) is integer and is_number(value) is number


@pytest.mark.parametrize("options, accepted, refused, words", [
    ({}, [0, 7], [-1, True, 1.0, "1"], "must be a non-negative integer"),
    ({"minimum": 1}, [1], [0], "must be a positive integer"),
    ({"minimum": 1024}, [1024], [1023], "must be an integer of at least 1024"),
    ({"minimum": 1, "maximum": 100}, [1, 100], [0, 101], "must be an integer from 1 to 100"),
    ({"minimum": 1, "optional": True}, [None, 3], [0, False], "must be a positive integer or None"),
])
def test_check_integer_returns_what_it_accepts_and_says_what_it_wanted(options, accepted, refused, words):
    for value in accepted:
        assert check_integer(value, "size", **options) is value
    for value in refused:
        with pytest.raises(InvalidInputError, match=f"^size {words}, got {value!r}$"):
            check_integer(value, "size", **options)


def test_check_counts_names_the_first_setting_that_is_not_a_count():
    check_counts(keep=0, chars=10)
    with pytest.raises(InvalidInputError, match="^chars must be a non-negative integer, got -1$"):
        check_counts(keep=0, chars=-1, other=-2)


def test_check_number_takes_ints_and_floats_in_range():
    assert check_number(0.5, "importance", 0, 1) == 0.5 and check_number(10, "score", 0, 10) == 10
    for value in (11, -0.1, math.nan, True, "5"):
        with pytest.raises(InvalidInputError, match=f"^score must be a number from 0 to 10, got {value!r}$"):
            check_number(value, "score", 0, 10)


def test_check_page_checks_limit_then_offset():
    check_page(1000, 0, 1000)
    with pytest.raises(InvalidInputError, match="^limit must be an integer from 1 to 1000, got 1001$"):
        check_page(1001, -1, 1000)
    with pytest.raises(InvalidInputError, match="^offset must be a non-negative integer, got -1$"):
        check_page(10, -1, 1000)


@pytest.mark.parametrize("value, words", [
    ("", "must be a non-empty string"), ("   ", "must be a non-empty string"), (None, "must be a non-empty string"),
    ("x" * 201, "is 201 characters long; the limit is 200"), ("a\nb", "contains control characters"),
    ("a\ud800", "contains an unpaired surrogate"),
])
def test_check_identifier_refuses_what_cannot_be_an_id(value, words):
    with pytest.raises(InvalidInputError, match=words):
        check_identifier(value, "session id")
    with pytest.raises(InvalidMessageError, match=words):
        check_identifier(value, "message id", InvalidMessageError)


def test_check_identifier_returns_a_good_id_unchanged():
    assert check_identifier("support-order-4471 ✓", "session id") == "support-order-4471 ✓"
