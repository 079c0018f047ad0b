"""An experiment running in a background thread (a ``BackgroundJob``): a lab page or a notebook stays
usable while its arms run, polls ``done`` and ``total`` for progress and may cancel it."""
from ..jobs import BackgroundJob
from .progress import TrialStatus


class ExperimentJob(BackgroundJob):
    """``Experiments.run(spec)`` on a thread of its own, with its progress and a cancel switch.

    ``done`` and ``total`` count runs (an arm on a case); ``status`` (a ``TrialStatus``) holds each
    arm's runs and the time left; ``trial`` is the trial's number once its first run is stored;
    ``results`` is the trial's ``ExperimentResults`` once it finished, ``error`` the reason when it
    could not run. ``cancel()`` stops the runs not yet started and a running one at its next model
    call; those that finished are kept.
    """

    what = "the experiment"

    def __init__(self, spec, work, *, status=None):
        """``work(progress, cancel) -> ExperimentResults`` runs ``spec``'s trial (``Experiments.start``),
        keeping ``status`` up to date."""
        super().__init__(spec.name, len(spec.arms) * len(spec.cases), work, thread_name=f"experiment {spec.name}")
        self.trial = None
        self.status = status or TrialStatus()

    @property
    def results(self):
        return self.result

    def _advance(self, done, total, run):
        super()._advance(done, total)
        self.trial = run["trial"]
