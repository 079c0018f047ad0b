"""Where a run sees its trial's Cancel: before each model call it makes. A cancelled trial so stops
within moments of the model call in progress ending, and the run that saw the cancel is dropped (it
did not finish); the runs that finished stay."""
from __future__ import annotations

import threading
from contextlib import nullcontext

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
    """``complete_with_usage`` once it is this run's turn, unless the trial was cancelled by then."""
    from ..llm import local_model
    from ..llm.models import complete_with_usage

    embedded = isinstance(model, str) and model.startswith(local_model.PROVIDER + "/")
    with _EMBEDDED_MODEL_TURN if embedded else nullcontext():
        stop_if_cancelled(cancel)
        return complete_with_usage(prompt, model=model, **completion)
