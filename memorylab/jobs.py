"""Work on a background thread: a lab page or a notebook stays usable while it runs, polls ``done``
and ``total`` for progress and may cancel it."""
import threading
import time

from .errors import MemoryLabError


class BackgroundJob:
    """``work(progress, cancel)`` on a daemon thread of its own, with its progress and a cancel switch.

    ``work`` reports ``progress(done, total)`` as it goes, checks the ``threading.Event`` ``cancel``
    between its steps, and what it returns becomes ``result``. ``error`` is the reason when it raised
    (an exception on a thread would vanish, so the job keeps it for the caller to show); ``elapsed``
    is the seconds it ran, once it ended.
    """

    what = "the job"
    """How messages name the work: "the experiment stopped on an unexpected ..."."""

    def __init__(self, name, total, work, *, thread_name=None):
        self.name = name
        self.total = total
        self.done = 0
        self.result = None
        self.error = None
        self.started = time.perf_counter()
        self.elapsed = None
        self._cancel = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(work,), daemon=True, name=thread_name or name)

    def start(self):
        """Start the thread; returns the job, so ``job = Job(...).start()`` reads in one line."""
        self._thread.start()
        return self

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def cancel(self) -> None:
        """Ask the work to stop at its next check; what it finished is kept."""
        self._cancel.set()

    def wait(self, timeout=None) -> bool:
        """Block until the job ends (or ``timeout`` seconds pass); True when it ended."""
        self._thread.join(timeout)
        return not self.running

    def _advance(self, done, total):
        self.done, self.total = done, total

    def _run(self, work):
        try:
            self.result = work(self._advance, self._cancel)
        except MemoryLabError as error:
            self.error = str(error)
        except Exception as error:  # noqa: BLE001 - a thread's exception would vanish; the caller shows it instead
            self.error = f"{self.what} stopped on an unexpected {type(error).__name__}: {error}"
        finally:
            self.elapsed = time.perf_counter() - self.started
