"""An experiment running in a background thread: a lab page or a notebook stays usable while its
arms run, polls ``done`` and ``total`` for progress and may cancel it."""
import threading
import time

from ..errors import MemoryLabError


class ExperimentJob:
    """``Experiments.run(spec)`` on a thread of its own, with its progress and a cancel switch.

    ``done`` and ``total`` count runs (an arm on a case); ``trial`` is the trial's number once its
    first run is stored; ``results`` is the trial's ``ExperimentResults`` once it finished, ``error``
    the reason when it could not run.
    """

    def __init__(self, spec, work):
        """``work(progress, cancel) -> ExperimentResults`` runs ``spec``'s trial (``Experiments.start``)."""
        self.name = spec.name
        self.total = len(spec.arms) * len(spec.cases)
        self.done = 0
        self.trial = None
        self.results = None
        self.error = None
        self.started = time.perf_counter()
        self.elapsed = None
        self._cancel = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(work,), daemon=True, name=f"experiment {spec.name}")

    def start(self) -> "ExperimentJob":
        self._thread.start()
        return self

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def cancel(self) -> None:
        """Stop the runs not yet started; those running finish and are kept."""
        self._cancel.set()

    def wait(self, timeout=None) -> bool:
        """Block until the job ends (or ``timeout`` seconds pass); True when it ended."""
        self._thread.join(timeout)
        return not self.running

    def _advance(self, done, total, run):
        self.done, self.total, self.trial = done, total, run["trial"]

    def _run(self, work):
        try:
            self.results = work(self._advance, self._cancel)
        except MemoryLabError as error:
            self.error = str(error)
        except Exception as error:  # noqa: BLE001 - a thread's exception would vanish; the caller shows it instead
            self.error = f"the experiment stopped on an unexpected {type(error).__name__}: {error}"
        finally:
            self.elapsed = time.perf_counter() - self.started
