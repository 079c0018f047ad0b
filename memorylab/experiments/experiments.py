"""``Experiments``: a tenant's experiments in a store, saved, run and read back."""
from __future__ import annotations

import dataclasses
import getpass
from typing import TYPE_CHECKING

from ..errors import ApiHostNotAllowedError, InvalidInputError, NotFoundError
from ..history.session import Session
from ..llm.api_hosts import allowed_api_hosts, api_host_refusal
from ..messages import utc_now_iso
from ..shapes import Messages
from ..store.compare_and_set import MISSING, StaleWriteError, check_expected
from ..validation import check_identifier, check_integer
from .calibration import Calibration, labelled_verdicts
from .case_selection import select_cases
from .context_comparison import ContextComparison, compare_contexts
from .job import ExperimentJob
from .labels import output_digest, probe_outputs, trial_labels
from .progress import TrialStatus
from .regrading import Regrading, regrade_runs
from .results import ExperimentResults, compare_trials
from .runner import resolve_cases, run_trial
from .spec import ExperimentSpec, load_spec, parse_spec
from .strategies import MODEL_STRATEGIES

if TYPE_CHECKING:
    import pandas as pd


def _definition(spec) -> dict:
    """The rows ``store.experiments.save`` writes for ``spec``."""
    return {
        "name": spec.name, "description": spec.description,
        "settings": {"concurrency": spec.concurrency, "min_score": spec.min_score,
                     "grader": spec.grader.to_dict() if spec.grader else None},
        "arms": [{"name": arm.name, "strategy": arm.strategy, "settings": arm.settings, "min_score": arm.min_score}
                 for arm in spec.arms],
        "cases": [{"name": case.name, "tenant_id": case.tenant, "agent_id": case.agent, "session_id": case.session,
                   "leaf_id": case.leaf, "probes": [p.to_dict() | {"answer": p.answer} for p in case.probes]}
                  for case in spec.cases],
    }


def _spec(definition) -> ExperimentSpec:
    settings = definition["settings"] or {}
    data = {
        "name": definition["name"], "description": definition["description"],
        "concurrency": settings.get("concurrency", 4), "min_score": settings.get("min_score"),
        "grader": settings.get("grader"),
        "arms": [{"name": arm["name"], "strategy": arm["strategy"], "min_score": arm["min_score"], **arm["settings"]}
                 for arm in definition["arms"]],
        "cases": [{"name": case["name"], "session": case["session_id"], "agent": case["agent_id"],
                   "tenant": case["tenant_id"], "leaf": case["leaf_id"],
                   "probes": [{k: v for k, v in probe.items() if v is not None} for probe in case["probes"]]}
                  for case in definition["cases"]],
    }
    return parse_spec({k: v for k, v in data.items() if v is not None},
                      source=f"stored experiment {definition['name']!r}")


def _refuse(spec, problems, error):
    if problems:
        lines = "\n".join(f"  - {problem}" for problem in problems)
        raise error(f"experiment {spec.name!r} cannot run; nothing was run or saved:\n{lines}")


def _gone(message_id):
    return {"id": message_id, "role": "system", "parent_id": None, "created_at": "", "metadata": {}, "tokens": 0,
            "parts": [{"type": "text", "text": f"(message {message_id} is no longer stored in its session)"}]}


class Experiments:
    """The experiments of one tenant: ``Experiments(store).run("sample.yaml")``.

    A spec is a path to a YAML file, a dict as YAML would give it, or an ``ExperimentSpec``. Running
    saves it under its name (replacing the arms, cases and probes saved before, never the runs) and
    adds a trial; ``results(name)`` reads the newest trial back, ``results(name, trial=1)`` an older one.

    A spec is data its author may not be trusted with: its cases read this tenant's sessions only
    (``case_tenants`` names the other tenants they may read), and its model calls go to a provider's
    own host, or to an ``api_base`` whose host is in ``allowed_hosts`` or MEMORYLAB_ALLOWED_API_HOSTS.
    """

    def __init__(self, store, *, tenant_id="default", allowed_hosts=(), case_tenants=()):
        self.store = store
        self.tenant_id = check_identifier(tenant_id, "tenant id")
        self.allowed_hosts = tuple(allowed_hosts)
        self.case_tenants = frozenset(check_identifier(tenant, "case tenant") for tenant in case_tenants)

    def __repr__(self):
        return f"<Experiments of {self.store!r}, tenant {self.tenant_id!r}>"

    @staticmethod
    def spec(spec) -> ExperimentSpec:
        """``spec`` checked and read: a path, a dict or an ``ExperimentSpec``."""
        if isinstance(spec, (dict, ExperimentSpec)):
            return parse_spec(spec)
        return load_spec(spec)

    def save(self, spec, *, expected=None) -> ExperimentSpec:
        """Check ``spec`` against the store (its sessions and leaves exist) and save it.

        ``expected``: the ``version(name)`` the spec was read at (``MISSING``: none was saved). A saved
        experiment changed, created or removed since is a ``StaleWriteError`` whose ``stored`` is the
        saved spec (or None), and nothing is written."""
        spec = self._selected(self.spec(spec))
        resolve_cases(self.store, spec)
        self._save(spec, expected)
        return spec

    def _selected(self, spec) -> ExperimentSpec:
        """``spec`` scoped to this tenant, its selections turned into cases and its automatic probes
        drawn (``select_cases``), the cases they add scoped too."""
        return self._scoped(select_cases(self.store, self._scoped(spec), self.tenant_id))

    def _scoped(self, spec) -> ExperimentSpec:
        """``spec`` as it runs here, its cases without a tenant in this one; refused when a case reads a
        tenant the caller did not name or a model call names a host the user did not allow."""
        cases = tuple(dataclasses.replace(case, tenant=case.tenant or self.tenant_id) for case in spec.cases)
        foreign = [f"case {case.name!r} reads tenant {case.tenant!r}, not this experiment's {self.tenant_id!r}: "
                   f"pass case_tenants=[{case.tenant!r}] (memorylab eval --case-tenant {case.tenant}) to allow it"
                   for case in cases if case.tenant != self.tenant_id and case.tenant not in self.case_tenants]
        _refuse(spec, foreign, InvalidInputError)
        allowed = allowed_api_hosts(self.allowed_hosts)
        calls = [(f"arm {arm.name!r}", arm.settings["completion"]) for arm in spec.arms
                 if arm.strategy in MODEL_STRATEGIES]
        calls += [("grader", spec.grader.completion)] if spec.grader else []
        _refuse(spec, [f"{where}: {refusal}" for where, completion in calls
                       if (refusal := api_host_refusal(completion, allowed))], ApiHostNotAllowedError)
        return dataclasses.replace(spec, cases=cases)


    def _save(self, spec, expected):
        try:
            return self.store.experiments.save(self.tenant_id, _definition(spec), now=utc_now_iso(),
                                               expected=check_expected(expected))
        except StaleWriteError as stale:
            raise StaleWriteError(f"experiment {spec.name!r}", expected=expected, version=stale.version,
                                  stored=stale.stored and _spec(stale.stored)) from None

    def get(self, name) -> ExperimentSpec:
        return _spec(self._definition(name))

    def version(self, name) -> str:
        """The saved experiment's version, what ``save(..., expected=)`` compares (``MISSING``: none)."""
        definition = self.store.experiments.definition(self.tenant_id, name)
        return MISSING if definition is None else definition["version"]

    def listing(self) -> list[dict]:
        """Every experiment of the tenant with its counts of arms, cases, probes, trials and runs."""
        return self.store.experiments.listing(self.tenant_id)

    def delete(self, name) -> bool:
        """Remove the experiment and all its runs; False when there was none."""
        return self.store.experiments.delete(self.tenant_id, name)

    def run(self, spec, *, progress=None, cancel=None, concurrency=None, expected=None,
            status=None) -> ExperimentResults:
        """Run every arm on every case as a new trial and return its results.

        Nothing runs or is saved when the spec or a case is wrong. The arms that need no model run
        first. ``progress(done, total, run)`` is called as each run is stored, and ``status`` (a
        ``TrialStatus``: each arm's runs and the time left) kept up to date; setting the
        ``threading.Event`` ``cancel`` stops the runs not yet started and a running one at its next
        model call, and what finished is kept (``results.complete`` is then False). ``expected``
        guards the save as in ``save``.
        """
        return self._trial(*self._prepare(spec, concurrency, expected), progress=progress, cancel=cancel,
                           status=status)

    def start(self, spec, *, concurrency=None, expected=None) -> ExperimentJob:
        """``run`` on a background thread: the returned job counts ``done`` of ``total`` runs, can be
        cancelled, and holds ``results`` (or ``error``) when it ends. The spec is checked against the
        store and saved here, so a wrong one is refused at once."""
        prepared, status = self._prepare(spec, concurrency, expected), TrialStatus()
        return ExperimentJob(prepared[0], lambda progress, cancel: self._trial(*prepared, progress=progress,
                                                                               cancel=cancel, status=status),
                             status=status).start()

    def _prepare(self, spec, concurrency, expected=None):
        """``(spec, branches, key, concurrency)``: the spec checked, each case's branch read once, the
        definition saved."""
        check_integer(concurrency, "concurrency", minimum=1, optional=True)
        spec = self._selected(self.spec(spec))
        branches = resolve_cases(self.store, spec)
        pk = self._save(spec, expected)
        return spec, branches, pk, concurrency

    def _trial(self, spec, branches, pk, concurrency, *, progress, cancel, status) -> ExperimentResults:
        trial, runs = run_trial(self.store, pk, spec, branches, concurrency=concurrency, progress=progress,
                                cancel=cancel, allowed_hosts=self.allowed_hosts, status=status)
        arms = {arm.name: position for position, arm in enumerate(spec.arms)}
        cases = {case.name: position for position, case in enumerate(spec.cases)}
        runs.sort(key=lambda run: (arms[run["arm"]], cases[run["case_name"]]))  # the order a read gives
        labels = self.store.experiments.labels(pk)
        read = self.store.experiments.runs(pk, trial=trial, with_context=True) if labels else None
        return self._results(spec, pk, trial, runs, read, labels)

    def trials(self, name) -> list[dict]:
        """``[{"trial", "runs", "errors", "score", "started_at", "finished_at"}]``, oldest first."""
        return self.store.experiments.trials(self._definition(name)["pk"])

    def results(self, name, trial=None) -> ExperimentResults:
        """A trial's results (default: the newest). NotFoundError when the experiment never ran."""
        definition = self._definition(name)
        labels = self.store.experiments.labels(definition["pk"])
        read = self._runs(definition, trial, with_context=bool(labels))  # the labels judge the runs' contexts
        runs = [{key: value for key, value in run.items() if key != "context"} for run in read]
        return self._results(_spec(definition), definition["pk"], read[0]["trial"], runs, read, labels)

    def _runs(self, definition, trial, *, with_context=False):
        """The runs of ``trial`` (None: the newest); NotFoundError when there are none."""
        if trial is None:
            trial = self.store.experiments.next_trial(definition["pk"]) - 1
            if trial == 0:
                raise NotFoundError(f"experiment {definition['name']!r} has not been run yet")
        runs = self.store.experiments.runs(definition["pk"], trial=trial, with_context=with_context)
        if not runs:
            raise NotFoundError(f"experiment {definition['name']!r} has no trial {trial}")
        return runs

    # -- labels, calibration and re-grading ------------------------------------------------------------

    def label(self, experiment, trial, case, arm, probe_id, correct, *, grade=None, by=None) -> dict:
        """A person's verdict on probe ``probe_id`` of ``arm``'s output on ``case`` in ``trial``: ``correct``
        True when that output truly keeps (graded: answers) what the probe asks, so the probe should
        pass; ``grade`` the person's own 0-1 grade of a graded answer; ``by`` who (default: this OS
        user). It replaces the label given before on the same output, and shows on every trial whose
        run leaves that output (``labels.output_digest``). Returns the label stored."""
        if not isinstance(correct, bool):
            raise InvalidInputError(f"correct must be True or False, got {correct!r}")
        if grade is not None and (isinstance(grade, bool) or not isinstance(grade, (int, float))
                                  or not 0 <= grade <= 1):
            raise InvalidInputError(f"grade must be a number from 0 to 1, got {grade!r}")
        definition = self._definition(experiment)
        run = next((r for r in self._runs(definition, trial) if r["case_name"] == case and r["arm"] == arm), None)
        if run is None or run["error"] is not None:
            raise NotFoundError(f"trial {trial} of {experiment!r} has no finished run of arm {arm!r} on case {case!r}")
        score = next((s for s in run["scores"] if s["probe"] == probe_id), None)
        if score is None:
            raise NotFoundError(f"case {case!r} of {experiment!r} has no probe {probe_id!r} in trial {trial}; its "
                                f"probes: {', '.join(s['probe'] for s in run['scores'])}")
        output = output_digest(self.store.experiments.run_context(run["pk"]), score)  # that run's context only
        label = {"case_name": case, "arm": arm, "probe_id": probe_id, "output": output,
                 "trial": run["trial"], "correct": correct, "grade": None if grade is None else float(grade),
                 "labelled_by": by or _os_user(), "labelled_at": utc_now_iso()}
        self.store.experiments.save_label(definition["pk"], label)
        return label

    def calibration(self, experiment, trial=None) -> Calibration:
        """Each scorer's (the matcher's, each judge model's) agreement with the labels on ``trial``'s
        outputs (default: the newest trial), per probe kind (``Calibration``)."""
        definition = self._definition(experiment)
        runs = self._runs(definition, trial, with_context=True)
        labels = self.store.experiments.labels(definition["pk"])
        return self._labelled(definition["pk"], runs[0]["trial"], runs, labels)[1]

    def regrade(self, experiment, judge_model, *, trial=None, completion=None, cancel=None) -> Regrading:
        """Judge the answers a finished trial's grader got (default: the newest trial) again with
        ``judge_model`` (``completion``: its litellm arguments): no summary or answer is made anew.
        The verdicts are stored with the trial, so ``calibration`` and the results show that judge
        too; the returned ``Regrading`` says how far each arm's scores move."""
        definition = self._definition(experiment)
        runs = self._runs(definition, trial)
        grades = regrade_runs(runs, _spec(definition), runs[0]["trial"], judge_model, completion=completion,
                              allowed_hosts=self.allowed_hosts, cancel=cancel)
        self.store.experiments.save_grades(definition["pk"], grades)
        return Regrading.of(runs, grades, judge_model)

    def compare(self, name, first_trial, second_trial) -> pd.DataFrame:
        """Two trials of ``name`` side by side (``compare_trials``)."""
        return compare_trials(self.results(name, first_trial), self.results(name, second_trial))

    def context(self, run) -> Messages:
        """The compacted context a run produced (the messages the model would see next turn). Messages
        it kept from its branch are read back from the session; one no longer stored shows as a note."""
        stored = self.store.experiments.run_context(run["pk"]) or []
        refs = [m["ref"] for m in stored if "ref" in m]
        kept = {}
        if refs:
            try:
                session = Session.open(self.store, run["session_id"], tenant_id=run["tenant_id"],
                                       agent_id=run["agent_id"])
            except NotFoundError:
                session = None
            if session is not None and session.get_message(run["leaf_id"]) is not None:
                kept = {m["id"]: m for m in session.get_history(run["leaf_id"], apply_compactions=False)}
            for ref in set(refs).difference(kept) if session is not None else ():  # the branch changed since
                found = session.get_message(ref)
                if found is not None:
                    kept[ref] = found
        return Messages(kept.get(m["ref"]) or _gone(m["ref"]) if "ref" in m else m for m in stored)

    def compare_runs(self, first, second) -> ContextComparison:
        """The contexts two runs left (``context``), compared message by message (``compare_contexts``)."""
        return compare_contexts(self.context(first), self.context(second), first["arm"], second["arm"])

    def _definition(self, name) -> dict:
        definition = self.store.experiments.definition(self.tenant_id, name)
        if definition is None:
            raise NotFoundError(f"no experiment named {name!r} in tenant {self.tenant_id!r}")
        return definition

    def _results(self, spec, pk, trial, runs, read, labels) -> ExperimentResults:
        """``runs`` with the ``labels`` shown on them and its ``Calibration`` (None when the experiment has
        no label); ``read``: the runs read with their context, needed (and read) only when it has some."""
        thresholds = {arm.name: spec.threshold(arm) for arm in spec.arms}
        shown, calibration = self._labelled(pk, trial, read, labels) if labels else ({}, None)
        return ExperimentResults(spec.name, trial, runs, thresholds=thresholds,
                                 expected_runs=len(spec.arms) * len(spec.cases), labels=shown, calibration=calibration)

    def _labelled(self, pk, trial, runs, labels) -> tuple[dict, Calibration]:
        """The ``labels`` shown on ``trial``'s probes (``runs``, read with their context) and its
        scorers' ``Calibration`` against them."""
        shown = trial_labels(probe_outputs(runs), labels)
        return shown, Calibration(labelled_verdicts(runs, shown, self.store.experiments.grades(pk, trial)))


def _os_user():
    """Who labels when the caller does not say: the OS user, else "someone"."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "someone"
