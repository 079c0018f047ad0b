"""Fixtures that several contract test modules share: a scripted litellm provider and an empty llm logs database."""
import copy
import functools

import pytest

USAGE = {"prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12}


@functools.cache
def scripted_model_class(litellm):
    """The ScriptedModel class, built once litellm is imported (it subclasses litellm's CustomLLM)."""

    class ScriptedModel(litellm.CustomLLM):
        """A litellm provider that plays a script: one reply (or exception) per call; keeps every request."""

        def __init__(self, *replies):
            super().__init__()
            self.replies = list(replies)
            self.requests = []

        def _next(self, messages):
            self.requests.append(copy.deepcopy(messages))
            reply = self.replies.pop(0)
            if isinstance(reply, Exception):
                raise reply
            return reply

        def completion(self, *, model, messages, **_):
            reply = self._next(messages)
            message = {"role": "assistant", "content": reply.get("text"), "tool_calls": reply.get("calls")}
            return litellm.ModelResponse(model=model, usage=USAGE, choices=[
                {"index": 0, "message": message, "finish_reason": "tool_calls" if reply.get("calls") else "stop"}])

        def streaming(self, *, model, messages, **_):
            reply = self._next(messages)
            text, calls = reply.get("text", ""), reply.get("calls") or []
            for piece in (text[: len(text) // 2], text[len(text) // 2:]):
                yield {"text": piece, "tool_use": None, "is_finished": False, "finish_reason": "", "usage": None,
                       "index": 0}
            for index, call in enumerate(calls):
                yield {"text": "", "tool_use": {**call, "index": index}, "is_finished": False, "finish_reason": "",
                       "usage": None, "index": 0}
            yield {"text": "", "tool_use": None, "is_finished": True,
                   "finish_reason": "tool_calls" if calls else "stop", "usage": USAGE, "index": 0}

    return ScriptedModel


@pytest.fixture
def script(monkeypatch, litellm):
    """Register a ScriptedModel as litellm provider ``scripted``; call it with the replies."""
    def register(*replies):
        model = scripted_model_class(litellm)(*replies)
        monkeypatch.setattr(litellm, "custom_provider_map",
                            [*litellm.custom_provider_map, {"provider": "scripted", "custom_handler": model}])
        return model
    return register


@pytest.fixture(scope="session")
def empty_logs(tmp_path_factory):
    """A logs.db with llm's tables, as its CLI migrates one before it logs: made once (2.5 s), then copied."""
    import sqlite_utils
    from llm.migrations import migrate

    path = tmp_path_factory.mktemp("llm") / "logs.db"
    migrate(sqlite_utils.Database(path))
    return path
