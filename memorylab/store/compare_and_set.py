"""Compare-and-set: the version a stored thing was read at, and the check a guarded write makes.

What the lab edits comes with a ``version`` (a context block, a KV entry, a long-term record, an
experiment). A write given it back as ``expected=`` locks the row, compares, and writes only while
the stored version is still that one, all in one transaction; otherwise it raises
``StaleWriteError`` carrying what is stored now, and nothing is written. A write without
``expected`` stays a plain last-writer-wins write.
"""
import hashlib
import json

from ..errors import MISSING_VERSION, InvalidInputError, StaleWriteError

MISSING = MISSING_VERSION
"""The version of something not stored: ``expected=MISSING`` writes only when nothing is there yet."""


def version_of(*values) -> str:
    """A 16-hex-digit fingerprint of stored values: equal values, equal versions, on either backend."""
    text = json.dumps(values, ensure_ascii=False, separators=(",", ":"), sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def check_expected(expected) -> str | None:
    """``expected`` as a guarded write takes it: None (no check) or a version string."""
    if expected is not None and not isinstance(expected, str):
        raise InvalidInputError(f"expected must be a version string from a read (or None), got {expected!r}")
    return expected


def check_version(what, expected, version, stored) -> None:
    """Refuse a guarded write (``StaleWriteError``) when the stored ``version`` is not ``expected``."""
    if expected is not None and expected != version:
        raise StaleWriteError(what, expected=expected, version=version, stored=stored)
