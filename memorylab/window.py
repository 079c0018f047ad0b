"""Context window policies (seed 002): the whole chat kept, a bounded window of it sent.

A ``ContextWindow`` holds ``full_context`` (every message ever added) and ``context_window`` (what
goes into the next request), plus a free-form ``memo`` that policies may keep notes in. Length is
a character count of the serialized messages, not tokens: cheap, and the same on every machine.
Policies are plain functions: analysis handlers pick a strategy by name, resize handlers apply it.
"""
import copy
import json
import warnings

import yaml

from .errors import ImportFormatError, InvalidInputError, InvalidMessageError
from .truncation import longest_fitting

SIMPLE_CUT = "simple_cut"
STATE_FIELDS = ("full_context", "context_window", "memo", "max_length", "auto_resize")


def message_length(message):
    return len(json.dumps({"role": message["role"], "content": message["content"]},
                          ensure_ascii=False, separators=(",", ":")))


def length(messages):
    """Summed characters of each message's compact ``{"role", "content"}`` JSON."""
    return sum(message_length(message) for message in messages)


def simple_cut(full_context, context_window, memo, settings):
    """Keep the newest messages that fit ``settings["max_length"]``; when even the newest is too long
    alone, keep it with only the end of its content (the latest words matter most)."""
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
    content = newest["content"]

    def fits(chars):
        return message_length({**newest, "content": content[len(content) - chars:]}) <= max_length

    chars = longest_fitting(len(content), fits) or 0
    return None, [{**newest, "content": content[len(content) - chars:]}], None


def _check_messages(messages, where):
    if not isinstance(messages, list):
        raise InvalidMessageError(f"{where} must be a list of messages, got {type(messages).__name__}")
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise InvalidMessageError(f"{where}[{index}] must be a dict, got {type(message).__name__}")
        for key in ("role", "content"):
            if not isinstance(message.get(key), str):
                raise InvalidMessageError(
                    f"{where}[{index}] needs a string {key!r} (OpenAI chat shape), got {message.get(key)!r}"
                )
        _check_json(message, f"{where}[{index}]")
    return copy.deepcopy(messages)


def _check_json(value, where):
    try:
        json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError) as error:
        raise InvalidInputError(f"{where} must be JSON-serializable: {error}") from None


def _check_max_length(value):
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidInputError(f"max_length must be a positive integer, got {value!r}")
    return value


class ContextWindow:
    """A chat history and the bounded window of it that is sent to the model.

    Reads return copies, so nothing outside changes the window except its methods. With
    ``auto_resize`` every ``add_chat_history`` and ``set_chat_history`` runs the policy.
    ``load_json`` and ``load_yaml`` are classmethods returning a new window, so a failed import
    cannot damage a window in use; handlers are code, not state, and are registered on it again.
    """

    def __init__(self, *, max_length=12000, auto_resize=True):
        self.max_length = max_length
        self.auto_resize = bool(auto_resize)
        self._full_context = []
        self._context_window = []
        self._memo = None
        self._analysis_handlers = []
        self._resize_handlers = {SIMPLE_CUT: simple_cut}

    @property
    def max_length(self):
        return self._max_length

    @max_length.setter
    def max_length(self, value):
        self._max_length = _check_max_length(value)

    @property
    def full_context(self):
        return copy.deepcopy(self._full_context)

    @property
    def context_window(self):
        return copy.deepcopy(self._context_window)

    @property
    def memo(self):
        return copy.deepcopy(self._memo)

    @memo.setter
    def memo(self, value):
        _check_json(value, "memo")
        self._memo = copy.deepcopy(value)

    @property
    def settings(self):
        """What handlers receive as their fourth argument."""
        return {"max_length": self.max_length, "auto_resize": self.auto_resize}

    @property
    def window_length(self):
        return length(self._context_window)

    length = staticmethod(length)

    def add_chat_history(self, message_or_messages):
        """Append one message or a list to both the history and the window, then run the policy."""
        messages = message_or_messages if isinstance(message_or_messages, list) else [message_or_messages]
        messages = _check_messages(messages, "message")
        self._full_context.extend(messages)
        self._context_window.extend(copy.deepcopy(messages))
        if self.auto_resize:
            self.resize()

    def set_chat_history(self, messages):
        """Replace the history and the window with ``messages`` (the memo stays), then run the policy."""
        messages = _check_messages(messages, "chat history")
        self._full_context = messages
        self._context_window = copy.deepcopy(messages)
        if self.auto_resize:
            self.resize()

    def reset_chat_history(self):
        """Forget every message and the memo, which describes them."""
        self._full_context, self._context_window, self._memo = [], [], None

    def register_analysis_handler(self, handler):
        """``handler(full_context, context_window, memo, settings) -> strategy name | None``; the first
        handler to name a strategy wins."""
        self._analysis_handlers.append(handler)

    def register_resize_handler(self, name, handler):
        """``handler(full_context, context_window, memo, settings) -> (full_context, context_window, memo)``,
        each None to leave it unchanged. Registering ``"simple_cut"`` replaces the built-in one."""
        self._resize_handlers[name] = handler

    def resize(self):
        """Run the policy now; returns the strategy applied, or None.

        Without a strategy from the analysis handlers, ``simple_cut`` runs when the window is over
        ``max_length``. An unknown strategy is warned about and changes nothing.
        """
        strategy = None
        for analyse in self._analysis_handlers:
            strategy = analyse(*self._handler_arguments())
            if strategy is not None:
                break
        if strategy is None and self.window_length > self.max_length:
            strategy = SIMPLE_CUT
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

    def to_dict(self):
        """The state that export and import carry (handlers are code, so they are not part of it)."""
        return {
            "full_context": self.full_context, "context_window": self.context_window, "memo": self.memo,
            "max_length": self.max_length, "auto_resize": self.auto_resize,
        }

    def to_json(self):
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=2)

    def to_yaml(self):
        return yaml.safe_dump(self.to_dict(), allow_unicode=True, sort_keys=False)

    @classmethod
    def from_dict(cls, state):
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

    @classmethod
    def load_json(cls, text):
        """A new window from ``to_json`` output; an existing window is never touched."""
        return cls._load(text, json.loads, ValueError, "JSON")

    @classmethod
    def load_yaml(cls, text):
        """A new window from ``to_yaml`` output; an existing window is never touched."""
        return cls._load(text, yaml.safe_load, yaml.YAMLError, "YAML")

    @classmethod
    def _load(cls, text, parse, parse_error, format_name):
        try:
            state = parse(text)
        except parse_error as error:
            raise ImportFormatError(f"the context window export is not valid {format_name}: {error}") from None
        return cls.from_dict(state)
