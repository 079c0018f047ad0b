"""Pausing Python's cyclic garbage collector while a read builds thousands of objects.

Decoding a long branch makes a few containers per message, and every few hundred of them the
collector runs; the older generations it then walks hold the whole heap (in the lab: Streamlit,
pandas, plotly), so a 20,000-message read spent half its time collecting garbage it had not made.
The objects a read builds hold no cycles, so nothing is missed while it is paused. The collector
is process-wide: pauses from several threads nest, and it comes back on when the last one ends,
unless it was off before the first (a caller that turned it off keeps it off).
"""
import gc
import threading
from contextlib import contextmanager

_lock = threading.Lock()
_pauses = 0
_resume = False


@contextmanager
def collector_paused():
    """The block runs with the cyclic garbage collector off (see the module's docstring)."""
    global _pauses, _resume
    with _lock:
        if not _pauses:
            _resume = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _lock:
            _pauses -= 1
            if not _pauses and _resume:
                gc.enable()
