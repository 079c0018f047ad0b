"""A running trial arm by arm (runs done, running and waiting) and the time its remaining runs should
take, estimated from the runs so far: what the lab's progress bar and ``memorylab eval`` show."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

from .intervals import mean


@dataclass
class _ArmProgress:
    strategy: str
    total: int
    done: int = 0
    running: int = 0
    errors: int = 0
    seconds: list = field(default_factory=list)

    @property
    def state(self) -> str:
        if self.done == self.total:
            return "done"
        return "running" if self.running else ("waiting" if not self.done else "partly done")


class TrialStatus:
    """The progress of one trial, kept up to date by the runner's threads (``begin``, ``started``,
    ``stopped``, ``finished``) and read from any other (``arms``, ``seconds_left``)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._arms: dict[str, _ArmProgress] = {}
        self.concurrency = 1

    def begin(self, spec, concurrency) -> None:
        with self._lock:
            self._arms = {arm.name: _ArmProgress(arm.strategy, len(spec.cases)) for arm in spec.arms}
            self.concurrency = concurrency

    def started(self, arm) -> None:
        with self._lock:
            self._arms[arm].running += 1

    def stopped(self, arm) -> None:
        """A run of ``arm`` ended without finishing (its trial was cancelled)."""
        with self._lock:
            self._arms[arm].running -= 1

    def finished(self, run) -> None:
        with self._lock:
            progress = self._arms[run["arm"]]
            progress.running -= 1
            progress.done += 1
            progress.errors += run["error"] is not None
            progress.seconds.append(run["latency"])

    @property
    def done(self) -> int:
        return sum(progress.done for progress in self._arms.values())

    @property
    def total(self) -> int:
        return sum(progress.total for progress in self._arms.values())

    def arms(self) -> list[dict]:
        """Per arm, in the spec's order: ``arm``, ``strategy``, ``state`` (waiting, running, partly
        done, done), ``done`` of ``total`` runs, ``running``, ``errors`` and ``seconds`` (mean per run so far)."""
        with self._lock:
            return [{"arm": name, "strategy": p.strategy, "state": p.state, "done": p.done, "total": p.total,
                     "running": p.running, "errors": p.errors, "seconds": mean(p.seconds)}
                    for name, p in self._arms.items()]

    def seconds_left(self) -> float | None:
        """The remaining runs' seconds: each at its arm's mean so far (an arm with none finished: its
        strategy's), shared among the concurrent runs. None while some remaining arm has no such run."""
        with self._lock:
            by_strategy = {}
            for progress in self._arms.values():
                by_strategy.setdefault(progress.strategy, []).extend(progress.seconds)
            total = 0.0
            for progress in self._arms.values():
                if progress.done < progress.total:
                    per_run = mean(progress.seconds) if progress.seconds else mean(by_strategy[progress.strategy])
                    if per_run is None:
                        return None
                    total += (progress.total - progress.done) * per_run
            return total / max(self.concurrency, 1)


def time_left_text(seconds) -> str:
    """An estimate as people say it: ``about 3 min left``; ``estimating…`` while there is none."""
    if seconds is None:
        return "time left: estimating…"
    if seconds < 1:
        return "less than a second left"
    if seconds < 90:
        return f"about {seconds:.0f} s left"
    return f"about {seconds / 60:.0f} min left"
