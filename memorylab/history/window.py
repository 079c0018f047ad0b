"""Context window policies: the whole chat kept, a bounded window of it sent.

A ``ContextWindow`` holds ``full_context`` (every message ever added) and ``context_window`` (what
goes into the next request), plus a free-form ``memo`` that policies may keep notes in. Length is
a character count of the serialized messages, not tokens: cheap, and the same on every machine.
Policies are plain functions: the analysis handler picks a strategy by name, resize handlers apply it.
"""
from __future__ import annotations

import copy
import functools
import json
import re
import warnings
from typing import Any

import yaml

from ..errors import ImportFormatError, InvalidInputError, InvalidMessageError
from ..validation import check_integer
from .truncation import longest_fitting

SIMPLE_CUT = "simple_cut"
STATE_FIELDS = ("full_context", "context_window", "memo", "max_length", "auto_resize")
_YAML_FOLDED = re.compile("[\x85\u2028\u2029]")
"""Line breaks that YAML's plain and single-quoted styles fold into spaces on reading."""


def message_length(message) -> int:
    return len(json.dumps({"role": message["role"], "content": message["content"]},
                          ensure_ascii=False, separators=(",", ":")))


def length(messages) -> int:
    """Summed characters of each message's compact ``{"role", "content"}`` JSON."""
    return sum(message_length(message) for message in messages)


def simple_cut_when_too_long(full_context, context_window, memo, settings) -> str | None:
    """The default analysis handler: ``simple_cut`` when the window is over ``max_length``."""
    return SIMPLE_CUT if length(context_window) > settings["max_length"] else None


def simple_cut(full_context, context_window, memo, settings) -> tuple[None, list[dict], None]:
    """Keep the newest messages that fit ``settings["max_length"]``; when even the newest is too long
    alone, keep it with only the end of its content (the latest words matter most): the last
    characters of a text, the last whole parts of a list of parts, and when not one part fits, the
    last characters of the parts' text as a string, as Agently keeps the end of a message as text."""
    max_length = settings["max_length"]
    kept, total = [], 0
    for message in reversed(context_window):
        total += message_length(message)
        if total > max_length:
            break
        kept.append(message)
    if kept or not context_window:
        return None, kept[::-1], None
    newest = context_window[-1]
    content = _end_that_fits(newest, newest["content"], max_length)
    if not content and isinstance(content, list):
        content = _end_that_fits(newest, _parts_text(newest["content"]), max_length)
    return None, [{**newest, "content": content}], None


def _end_that_fits(message, content, max_length):
    """The longest end of ``content`` (characters of a text, parts of a list) with which ``message``
    fits ``max_length``."""
    def fits(count):
        return message_length({**message, "content": content[len(content) - count:]}) <= max_length

    count = longest_fitting(len(content), fits) or 0
    return content[len(content) - count:]


def _parts_text(parts) -> str:
    """The text of a list of content parts: its text parts, newline-joined (other parts have none)."""
    return "\n".join(part["text"] for part in parts
                     if part.get("type") == "text" and isinstance(part.get("text"), str))


def _as_messages(value, method):
    """One message or a list or tuple of them, as a list (what ``add_chat_history`` and
    ``set_chat_history`` take)."""
    if isinstance(value, dict):
        return [value]
    if isinstance(value, (list, tuple)):
        return list(value)
    raise InvalidMessageError(f"{method} takes one message (a dict) or a list of them, got {type(value).__name__}")


def _check_messages(messages, where):
    if not isinstance(messages, (list, tuple)):
        raise InvalidMessageError(f"{where} must be a list of messages, got {type(messages).__name__}")
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise InvalidMessageError(f"{where}[{index}] must be a dict, got {type(message).__name__}")
        if not isinstance(message.get("role"), str):
            raise InvalidMessageError(
                f"{where}[{index}] needs a string 'role' (OpenAI chat shape), got {message.get('role')!r}"
            )
        content = message.get("content")
        if not isinstance(content, str) and not (
                isinstance(content, list) and all(isinstance(part, dict) for part in content)):
            raise InvalidMessageError(
                f"{where}[{index}] needs a 'content' that is a string or a list of content parts (dicts), "
                f"got {content!r}"
            )
        _check_json(message, f"{where}[{index}]")
    return copy.deepcopy(list(messages))


def _check_json(value, where):
    try:
        json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError) as error:
        raise InvalidInputError(f"{where} must be JSON-serializable: {error}") from None


class _ExportDumper(yaml.SafeDumper):
    """YAML for exports: strings holding a line break that YAML folds are written double-quoted,
    the one style that escapes them, so they come back as they went."""


def _represent_text(dumper, text):
    style = '"' if _YAML_FOLDED.search(text) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_ExportDumper.add_representer(str, _represent_text)


class _new_or_into:
    """A loader that, called on the class, returns a new window and, called on a window, loads into
    that window and returns it; either way a failed load changes nothing."""

    def __init__(self, load):
        self.load = load

    def __get__(self, window, cls):
        @functools.wraps(self.load)
        def load(text):
            loaded = self.load(cls, text)
            if window is None:
                return loaded
            window._take_state(loaded)
            return window

        return load


class ContextWindow:
    """A chat history and the bounded window of it that is sent to the model.

    Reads return copies, so nothing outside changes the window except its methods. With
    ``auto_resize`` every ``add_chat_history`` and ``set_chat_history`` runs the policy.
    ``ContextWindow.load_json(text)`` returns a new window and ``window.load_json(text)`` loads into
    ``window``, keeping its handlers (code, not state: a new window needs them registered again).
    """

    def __init__(self, *, max_length=12000, auto_resize=True):
        self.max_length = max_length
        self.auto_resize = bool(auto_resize)
        self._full_context = []
        self._context_window = []
        self._memo = None
        self._analysis_handler = simple_cut_when_too_long
        self._resize_handlers = {SIMPLE_CUT: simple_cut}

    @property
    def max_length(self) -> int:
        return self._max_length

    @max_length.setter
    def max_length(self, value) -> None:
        self._max_length = check_integer(value, "max_length", minimum=1)

    @property
    def full_context(self) -> list[dict]:
        return copy.deepcopy(self._full_context)

    @property
    def context_window(self) -> list[dict]:
        return copy.deepcopy(self._context_window)

    @property
    def memo(self) -> Any:
        return copy.deepcopy(self._memo)

    @memo.setter
    def memo(self, value) -> None:
        _check_json(value, "memo")
        self._memo = copy.deepcopy(value)

    @property
    def settings(self) -> dict:
        """What handlers receive as their fourth argument."""
        return {"max_length": self.max_length, "auto_resize": self.auto_resize}

    @property
    def window_length(self) -> int:
        return length(self._context_window)

    length = staticmethod(length)

    def add_chat_history(self, message_or_messages) -> None:
        """Append one message or a list to both the history and the window, then run the policy."""
        messages = _check_messages(_as_messages(message_or_messages, "add_chat_history"), "message")
        self._full_context.extend(messages)
        self._context_window.extend(copy.deepcopy(messages))
        if self.auto_resize:
            self.resize()

    def set_chat_history(self, messages) -> None:
        """Replace the history and the window with ``messages`` (one message or a list; the memo
        stays), then run the policy."""
        messages = _check_messages(_as_messages(messages, "set_chat_history"), "chat history")
        self._full_context = messages
        self._context_window = copy.deepcopy(messages)
        if self.auto_resize:
            self.resize()

    def reset_chat_history(self) -> None:
        """Forget every message. The memo stays: it is the application's notes, which may outlive
        the messages (``window.memo = None`` forgets it too)."""
        self._full_context, self._context_window = [], []

    def register_analysis_handler(self, handler) -> None:
        """``handler(full_context, context_window, memo, settings) -> strategy name | None`` replaces
        the analysis handler, the default included: it alone decides when the window is resized.
        ``None`` restores the default, ``simple_cut_when_too_long``."""
        if handler is not None and not callable(handler):
            raise InvalidInputError(f"an analysis handler must be callable or None, got {handler!r}")
        self._analysis_handler = simple_cut_when_too_long if handler is None else handler

    def register_resize_handler(self, name, handler) -> None:
        """``handler(full_context, context_window, memo, settings) -> (full_context, context_window, memo)``,
        each None to leave it unchanged. Registering ``"simple_cut"`` replaces the built-in one."""
        self._resize_handlers[name] = handler

    def resize(self) -> str | None:
        """Run the policy now: the strategy the analysis handler names is applied and returned (None:
        nothing to do). An unknown strategy is warned about and changes nothing."""
        strategy = self._analysis_handler(*self._handler_arguments())
        if strategy is None:
            return None
        handler = self._resize_handlers.get(strategy)
        if handler is None:
            warnings.warn(
                f"no resize handler is registered for strategy {strategy!r}; the context window is left "
                "unchanged (register one with register_resize_handler)",
                stacklevel=2,
            )
            return None
        self._apply(strategy, handler(*self._handler_arguments()))
        return strategy

    def _handler_arguments(self):
        return self.full_context, self.context_window, self.memo, self.settings

    def _apply(self, strategy, result):
        if not isinstance(result, (tuple, list)) or len(result) != 3:
            raise InvalidInputError(
                f"resize handler {strategy!r} must return (full_context, context_window, memo), got {result!r}"
            )
        full_context, context_window, memo = result
        if full_context is not None:
            full_context = _check_messages(full_context, f"full_context from {strategy!r}")
        if context_window is not None:
            context_window = _check_messages(context_window, f"context_window from {strategy!r}")
        if memo is not None:
            _check_json(memo, f"memo from {strategy!r}")
        if full_context is not None:
            self._full_context = full_context
        if context_window is not None:
            self._context_window = context_window
        if memo is not None:
            self._memo = copy.deepcopy(memo)

    def to_dict(self) -> dict:
        """The state that export and import carry (handlers are code, so they are not part of it)."""
        return {
            "full_context": self.full_context, "context_window": self.context_window, "memo": self.memo,
            "max_length": self.max_length, "auto_resize": self.auto_resize,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=2)

    def to_yaml(self) -> str:
        return yaml.dump(self.to_dict(), Dumper=_ExportDumper, allow_unicode=True, sort_keys=False)

    @classmethod
    def from_dict(cls, state) -> ContextWindow:
        """A new window holding ``state`` as ``to_dict`` wrote it; ImportFormatError on a wrong shape.

        The policy does not run on load: the window comes back exactly as it was saved.
        """
        if not isinstance(state, dict):
            raise ImportFormatError(f"a context window export is a mapping, got {type(state).__name__}")
        missing = [key for key in ("full_context", "context_window") if key not in state]
        if missing:
            raise ImportFormatError(f"the context window export has no {' or '.join(missing)}")
        unknown = sorted(set(state).difference(STATE_FIELDS), key=str)
        if unknown:
            raise ImportFormatError(f"the context window export has unknown fields {unknown}")
        if not isinstance(state.get("auto_resize", True), bool):
            raise ImportFormatError(f"auto_resize must be true or false, got {state['auto_resize']!r}")
        try:
            window = cls(max_length=state.get("max_length", 12000), auto_resize=state.get("auto_resize", True))
            window._full_context = _check_messages(state["full_context"], "full_context")
            window._context_window = _check_messages(state["context_window"], "context_window")
            window.memo = state.get("memo")
        except InvalidInputError as error:
            raise ImportFormatError(f"the context window export is not valid: {error}") from None
        return window

    @_new_or_into
    def load_json(cls, text) -> ContextWindow:
        """The state in ``to_json`` output: a new window from the class, loaded into a window from it."""
        return cls._load(text, json.loads, ValueError, "JSON")

    @_new_or_into
    def load_yaml(cls, text) -> ContextWindow:
        """The state in ``to_yaml`` output: a new window from the class, loaded into a window from it."""
        return cls._load(text, yaml.safe_load, yaml.YAMLError, "YAML")

    @classmethod
    def _load(cls, text, parse, parse_error, format_name):
        try:
            state = parse(text)
        except parse_error as error:
            raise ImportFormatError(f"the context window export is not valid {format_name}: {error}") from None
        return cls.from_dict(state)

    def _take_state(self, other):
        """Hold ``other``'s state (which it does not share); the handlers stay this window's."""
        self._full_context, self._context_window, self._memo = other._full_context, other._context_window, other._memo
        self._max_length, self.auto_resize = other._max_length, other.auto_resize
