"""Who the conversation is with: ``identify(...)`` binds an identity, and a ``Memory`` without a
memory key of its own uses it.

The identity lives in a ``contextvars.ContextVar``, not a module global: each thread and each
asyncio task sees the identity it set, so a loop or a server handling many users at once never
writes one user's messages under another's key. The memory key is ``"<type>:<value>"``
(``"phone:+5511999999999"``); a bare value's type is detected, and values are normalized so the
same person always gets the same key, whether it comes from ``identify`` or is written out
(``normalize_memory_key``).
"""
import re
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from ..errors import InvalidInputError
from ..validation import check_identifier

_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s.]+")
# A phone needs its country code: "+" and digits, optionally grouped by spaces, dots, dashes and
# parentheses. Without "+" a run of digits is more often an order or customer number than a phone.
_PHONE = re.compile(r"\+[\d\s().-]+")
_E164_DIGITS = (7, 15)
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+")
_PATTERNS = {"email": _EMAIL, "uuid": _UUID, "url": _URL}
_TYPE = re.compile(r"[a-z][a-z0-9_-]{0,31}")
_KEY = re.compile(r"([a-z][a-z0-9_-]{0,31}):(.+)", re.DOTALL)

_current = ContextVar("memorylab_identity", default=None)


@dataclass(frozen=True)
class Identity:
    type: str
    value: str

    @property
    def key(self) -> str:
        """The memory key: ``"<type>:<value>"``."""
        return f"{self.type}:{self.value}"


def normalize_phone(value) -> str:
    """``"+55 (11) 99999-9999"`` -> ``"+5511999999999"`` (E.164); InvalidInputError when it is not a phone."""
    digits = re.sub(r"\D", "", value)
    low, high = _E164_DIGITS
    if not _PHONE.fullmatch(value.strip()) or not low <= len(digits) <= high or digits[0] == "0":
        raise InvalidInputError(
            f"{value!r} is not a phone number: write it with its country code, e.g. +5511999999999 "
            "or +55 (11) 99999-9999"
        )
    return "+" + digits


def _normalize(kind, value):
    """The canonical form of a value of a known type; other types keep the value as given."""
    if kind == "phone":
        return normalize_phone(value)
    pattern = _PATTERNS.get(kind)
    if pattern is not None and not pattern.fullmatch(value):
        raise InvalidInputError(f"{value!r} is not a valid {kind}")
    return value.lower() if kind in ("email", "uuid") else value


def detect_type(value) -> str:
    """``"email"``, ``"uuid"``, ``"url"``, ``"phone"`` or ``"id"`` for a bare identity value."""
    value = value.strip()
    for kind, pattern in _PATTERNS.items():
        if pattern.fullmatch(value):
            return kind
    try:
        normalize_phone(value)
    except InvalidInputError:
        return "id"
    return "phone"


def _visible_text(value, what):
    """``value`` in NFC without surrounding spaces; InvalidInputError for invisible formatting
    characters (U+202E and the like), with which two keys that read alike would be two memories."""
    value = unicodedata.normalize("NFC", check_identifier(value, what).strip())
    hidden = sorted({f"U+{ord(c):04X}" for c in value if unicodedata.category(c) == "Cf"})
    if hidden:
        raise InvalidInputError(
            f"{what} {value!r} contains invisible formatting characters ({', '.join(hidden)}); write it without them"
        )
    return value


def make_identity(value, type=None) -> Identity:
    """The normalized Identity for ``value``, its type detected unless ``type`` is given."""
    value = _visible_text(value, "identity value")
    if type is None:
        type = detect_type(value)
    elif not isinstance(type, str) or not _TYPE.fullmatch(type):
        raise InvalidInputError(
            f"identity type must be a lowercase word (letters, digits, _ or -, at most 32), got {type!r}"
        )
    identity = Identity(type, _normalize(type, value))
    check_identifier(identity.key, "memory key")
    return identity


@contextmanager
def identify(value=None, *, type=None) -> Iterator[Identity]:
    """Bind an identity for the code inside the ``with`` block (this thread or task only).

    ``identify("+55 (11) 99999-9999")`` detects the type; ``identify(type="user", value="123")``
    names it. Yields the Identity; the previous one (if any) is back after the block.
    """
    token = _current.set(make_identity(value, type))
    try:
        yield _current.get()
    finally:
        _current.reset(token)


def current_identity() -> Identity | None:
    """The identity bound by the innermost ``identify`` block around this code, or None."""
    return _current.get()


def normalize_memory_key(key) -> str:
    """The canonical form of an explicit memory key: ``" phone:+55 (11) 99999-9999"`` and
    ``identify("+5511999999999")`` name one memory. A ``"<type>:<value>"`` key is normalized as
    ``identify(type=..., value=...)`` does; any other key, or one whose value is not of its type
    (``"phone:123"``, which memories written before normalization may use), only loses its
    surrounding spaces."""
    key = _visible_text(key, "memory key")
    kind, value = parse_memory_key(key)
    if kind is None:
        return key
    try:
        return make_identity(value, kind).key
    except InvalidInputError:
        return key


def parse_memory_key(key) -> tuple[str | None, str | None]:
    """``(type, value)`` of a ``"type:value"`` key, or ``(None, None)`` for a key of another form."""
    match = _KEY.fullmatch(key)
    return (match.group(1), match.group(2)) if match else (None, None)
