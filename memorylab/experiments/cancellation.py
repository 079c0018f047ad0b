"""Where a run sees its trial's Cancel: before each model call it makes, and with the embedded model
also between the pieces of its reply, which is streamed for that. A cancelled trial so stops within
moments, at once when the embedded model is writing (the abandoned reply is closed, freeing the
model for the next call) and within moments of a hosted model's call ending; the run that saw the
cancel is dropped (it did not finish); the runs that finished stay."""
from __future__ import annotations

import threading
from functools import partial

_EMBEDDED_MODEL_TURN = threading.Lock()
"""The embedded model writes one reply at a time: a run waits for its turn here, where a cancel is
seen, rather than inside the model, where the next reply would start before anyone looked."""


class RunCancelled(Exception):
    """Raised inside a run whose trial was cancelled; the runner drops the run, never shows it."""


def stop_if_cancelled(cancel) -> None:
    """Raise RunCancelled once the ``threading.Event`` ``cancel`` (None: never) is set."""
    if cancel is not None and cancel.is_set():
        raise RunCancelled


def complete_unless_cancelled(prompt, *, model, cancel, **completion) -> tuple[str, dict]:
    """``complete_with_usage`` once it is this run's turn, unless the trial was cancelled by then.

    The embedded model's reply is streamed and dropped at the first piece after a cancel. A hosted
    model's is not, nor a mocked one (``mock_response``): streamed, their usage would be litellm's
    estimate wherever the provider reports none in the stream."""
    from ..llm import local_model
    from ..llm.models import complete_with_usage, stream_with_usage

    embedded = isinstance(model, str) and model.startswith(local_model.PROVIDER + "/")
    if not embedded or "mock_response" in completion:
        stop_if_cancelled(cancel)
        return complete_with_usage(prompt, model=model, **completion)
    with _EMBEDDED_MODEL_TURN:
        stop_if_cancelled(cancel)
        return stream_with_usage(prompt, model=model, between_chunks=partial(stop_if_cancelled, cancel), **completion)
