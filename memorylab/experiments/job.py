"""An experiment running in a background thread (a ``BackgroundJob``): a lab page or a notebook stays
usable while its arms run, polls ``done`` and ``total`` for progress and may cancel it."""
from ..jobs import BackgroundJob


class ExperimentJob(BackgroundJob):
    """``Experiments.run(spec)`` on a thread of its own, with its progress and a cancel switch.

    ``done`` and ``total`` count runs (an arm on a case); ``trial`` is the trial's number once its
    first run is stored; ``results`` is the trial's ``ExperimentResults`` once it finished, ``error``
    the reason when it could not run. ``cancel()`` stops the runs not yet started; those running
    finish and are kept.
    """

    what = "the experiment"

    def __init__(self, spec, work):
        """``work(progress, cancel) -> ExperimentResults`` runs ``spec``'s trial (``Experiments.start``)."""
        super().__init__(spec.name, len(spec.arms) * len(spec.cases), work, thread_name=f"experiment {spec.name}")
        self.trial = None

    @property
    def results(self):
        return self.result

    def _advance(self, done, total, run):
        super()._advance(done, total)
        self.trial = run["trial"]
