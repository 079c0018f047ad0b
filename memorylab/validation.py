"""Argument checks the whole engine shares: ids, counts, numbers in a range, pages of a list.

Each ``check_*`` returns the value it accepts, or raises InvalidInputError naming the argument,
what it must be and what it got. All functions here are pure.
"""
import math
import re
import string

from .errors import InvalidInputError

MAX_ID_LENGTH = 200
_CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f]")


def is_integer(value):
    """An int that is not a bool: Python counts True as 1, but no caller means it as a count."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value):
    """A finite int or float that is not a bool: NaN and infinity compare with no threshold sensibly."""
    return is_integer(value) or isinstance(value, float) and math.isfinite(value)


def check_integer(value, name, *, minimum=0, maximum=None, optional=False):
    """An integer from ``minimum`` to ``maximum`` (no upper bound when None); None passes when ``optional``."""
    if optional and value is None:
        return None
    if is_integer(value) and minimum <= value and (maximum is None or value <= maximum):
        return value
    if maximum is not None:
        wanted = f"an integer from {minimum} to {maximum}"
    elif minimum in (0, 1):
        wanted = "a non-negative integer" if minimum == 0 else "a positive integer"
    else:
        wanted = f"an integer of at least {minimum}"
    raise InvalidInputError(f"{name} must be {wanted}{' or None' if optional else ''}, got {value!r}")


def check_counts(**counts):
    """Several settings that must each be a non-negative integer; the error names the first that is not."""
    for name, value in counts.items():
        check_integer(value, name)


def check_number(value, name, minimum, maximum):
    """A finite int or float from ``minimum`` to ``maximum``."""
    if not is_number(value) or not minimum <= value <= maximum:
        raise InvalidInputError(f"{name} must be a number from {minimum} to {maximum}, got {value!r}")
    return value


def check_page(limit, offset, max_limit):
    """``limit`` an integer from 1 to ``max_limit`` and ``offset`` a non-negative integer."""
    check_integer(limit, "limit", minimum=1, maximum=max_limit)
    check_integer(offset, "offset")


def check_identifier(value, what, error=InvalidInputError):
    """Ids and labels are non-empty strings without control characters, at most 200 characters."""
    if not isinstance(value, str) or not value.strip():
        raise error(f"{what} must be a non-empty string, got {value!r}")
    if len(value) > MAX_ID_LENGTH:
        raise error(f"{what} is {len(value)} characters long; the limit is {MAX_ID_LENGTH}")
    if _CONTROL_CHARACTER.search(value):
        raise error(f"{what} {value!r} contains control characters")
    if not value.isascii() and any("\ud800" <= c <= "\udfff" for c in value):
        raise error(f"{what} {value!r} contains an unpaired surrogate and cannot be stored as UTF-8")
    return value


def check_template_fields(template, known, what) -> set:
    """The placeholder names of the str.format ``template``, each one of ``known`` and plain: a
    conversion (``{x!r}``), a format spec (``{x:>1500000000}``), an attribute or an index could fail
    or build a huge text once the template is filled, long after it was accepted."""
    try:
        parsed = [(name, spec, conversion) for _, name, spec, conversion in string.Formatter().parse(template)
                  if name is not None]
    except ValueError as error:
        raise InvalidInputError(f"{what} is not a valid format string: {error} "
                                "(literal braces are written {{ and }})") from None
    allowed = ", ".join("{" + name + "}" for name in known)
    fancy = ["{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
             for name, spec, conversion in parsed if spec or conversion]
    if fancy:
        raise InvalidInputError(f"{what} may hold only plain placeholders ({allowed}), not {', '.join(fancy)}: "
                                "conversions and format specs are refused")
    unknown = sorted({name for name, _, _ in parsed}.difference(known))
    if unknown:
        raise InvalidInputError(f"{what} uses unknown placeholders {', '.join('{' + n + '}' for n in unknown)}: "
                                f"it may hold no placeholder other than {allowed} "
                                "(literal braces are written {{ and }})")
    return {name for name, _, _ in parsed}
