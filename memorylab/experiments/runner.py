"""Running an experiment: every arm on every case, concurrently, each run stored as it finishes.

Runs overlap up to the spec's ``concurrency``, the arms that need no model first (milliseconds each),
so their results are in before the first model call ends. Runs are written from the calling thread,
one transaction each, so a cancelled or interrupted experiment keeps every run that finished. A run
whose model call fails is stored with its error and scores nothing; the others go on.
"""
from __future__ import annotations

import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass

from ..errors import InvalidInputError, MemoryLabError
from ..history.overlays import is_summary_message
from ..history.session import Session
from ..messages import utc_now_iso
from .cancellation import RunCancelled
from .decay import decay_output
from .progress import TrialStatus
from .scoring import score_probes
from .strategies import MODEL_STRATEGIES, apply_arm, branch_tokens


@dataclass(frozen=True)
class CaseBranch:
    """A case resolved against the store: its branch as stored (what the arms compact) and as the
    session reads it, its overlays applied (what a ``recorded`` arm replays)."""

    case: object
    leaf_id: str
    history: list
    recorded: list


def resolve_cases(store, spec) -> dict[str, CaseBranch]:
    """Each case's branch, read once; one InvalidInputError naming every case whose session or leaf
    is not in the store."""
    problems, branches = [], {}
    for case in spec.cases:
        try:
            session = Session.open(store, case.session, tenant_id=case.tenant, agent_id=case.agent)
        except MemoryLabError as error:
            problems.append(f"case {case.name!r}: {error}")
            continue
        leaf_id = case.leaf or session.get_latest_leaf_id()
        if leaf_id is None or session.get_message(leaf_id) is None:
            problems.append(f"case {case.name!r}: session {case.session!r} has no message {case.leaf!r}"
                            if case.leaf else f"case {case.name!r}: session {case.session!r} holds no messages")
            continue
        history = session.get_history(leaf_id, apply_compactions=False)
        recorded = session.get_history(leaf_id) if session.get_compactions() else history
        branches[case.name] = CaseBranch(case, leaf_id, history, recorded)
    if problems:
        lines = "\n".join(f"  - {problem}" for problem in problems)
        raise InvalidInputError(f"experiment {spec.name!r} cannot run; nothing was run or saved:\n{lines}")
    return branches


def run_one(arm, branch, grader=None, *, allowed_hosts=(), cancel=None) -> dict | None:
    """One arm on one case, as the row ``store.experiments.add_run`` stores (``trial`` left to the caller).
    ``latency`` is the strategy's own time, its model calls included; scoring is not part of it. Model
    calls go only to the hosts ``allowed_api_hosts(allowed_hosts)`` allows. None when the
    ``threading.Event`` ``cancel`` was set before one of its model calls: the run did not finish."""
    case = branch.case
    run = {
        "arm": arm.name, "strategy": arm.strategy, "arm_settings": dict(arm.settings), "case_name": case.name,
        "tenant_id": case.tenant, "agent_id": case.agent, "session_id": case.session, "leaf_id": branch.leaf_id,
        "context": [], "summary": None, "request": None,
        "scores": [], "score": None, "tokens_before": branch_tokens(branch.history),
        "tokens_after": 0, "summary_tokens": 0, "usage": {}, "cost": None, "latency": 0.0, "model": None,
        "error": None, "started_at": utc_now_iso(),
    }
    started = time.perf_counter()
    try:
        history = branch.recorded if arm.strategy == "recorded" else branch.history
        output, retention = _arm_output(arm, history, case.probes, allowed_hosts, cancel)
        scores, grading = score_probes(output.context, case.probes, grader=grader, allowed_hosts=allowed_hosts,
                                       cancel=cancel)
        for score in scores:
            score.update({"rounds": retention[score["probe"]]} if score["probe"] in retention else {})
    except RunCancelled:
        return None
    except MemoryLabError as error:
        run.update(error=f"{type(error).__name__}: {error}", latency=time.perf_counter() - started,
                   finished_at=utc_now_iso())
        return run
    usage = {"summary": output.usage} if output.usage else {}
    cost = output.cost
    if grading:
        usage["grading"] = grading["usage"]
        cost = None if cost is None or grading["cost"] is None else cost + grading["cost"]
    run.update(
        context=referenced_context(output.context, history), summary=output.summary,
        request=output.request, scores=scores,
        score=sum(s["score"] for s in scores) / len(scores), tokens_before=output.tokens_before,
        tokens_after=output.tokens_after, summary_tokens=output.summary_tokens, usage=usage, cost=cost,
        latency=output.latency, model=output.model, finished_at=utc_now_iso(),
    )
    return run


def _arm_output(arm, history, probes, allowed_hosts, cancel):
    """``(output, retention)``: the arm's context, and a decay arm's early probes' scores per round ({} else)."""
    if arm.settings.get("rounds"):
        return decay_output(arm, history, probes, allowed_hosts=allowed_hosts, cancel=cancel)
    return apply_arm(arm, history, allowed_hosts=allowed_hosts, cancel=cancel), {}


def referenced_context(context, history) -> list[dict]:
    """``context`` as a run stores it: each stored message kept unchanged from ``history`` as
    ``{"ref": id}``; what the strategy wrote, and summaries of the session's own overlays, in full."""
    kept = {id(message) for message in history if not is_summary_message(message)}
    return [{"ref": message["id"]} if id(message) in kept else message for message in context]


def run_trial(store, experiment_pk, spec, branches, *, concurrency=None, progress=None,
              cancel=None, allowed_hosts=(), status=None) -> tuple[int, list]:
    """Run every arm on every case as the experiment's next trial. Returns ``(trial, runs)``: the runs
    stored, each as ``store.experiments.runs`` reads it back (its key, no context), in the order they finished.

    ``progress(done, total, run)`` is called after each run is stored, and ``status`` (a ``TrialStatus``)
    kept up to date. Setting the ``cancel`` event stops the runs that have not started, and a running
    one at its next model call (it is dropped); those that finished are kept. The trial's number is
    taken by its first stored run, so trials started at once number themselves apart; one that stored
    no run reports the number its first run would have taken.
    """
    tasks = sorted(((arm, branches[case.name]) for arm in spec.arms for case in spec.cases),
                   key=lambda task: task[0].strategy in MODEL_STRATEGIES)  # no run waits behind a model call
    cancel, status = cancel or threading.Event(), status or TrialStatus()
    workers = concurrency or spec.concurrency
    status.begin(spec, workers)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="experiment") as pool:
        pending = {pool.submit(_unless_cancelled, cancel, status, arm, branch, spec.grader, allowed_hosts)
                   for arm, branch in tasks}
        try:
            trial, runs = _store_as_finished(store, experiment_pk, pending, len(tasks), status, progress,
                                             cancel)
        except BaseException:  # an interrupt or a failed write: runs not started never start
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    return (store.experiments.next_trial(experiment_pk) if trial is None else trial), runs


def _unless_cancelled(cancel, status, arm, branch, grader, allowed_hosts):
    """``run_one``, or None when the experiment was cancelled before this run could finish."""
    if cancel.is_set():
        return None
    status.started(arm.name)
    run = run_one(arm, branch, grader, allowed_hosts=allowed_hosts, cancel=cancel)
    if run is None:
        status.stopped(arm.name)
    return run


def _store_as_finished(store, experiment_pk, pending, total, status, progress, cancel):
    """``(trial, runs)``: each run stored as it finishes, the first opening the trial (None: none stored)."""
    trial, stored = None, []
    while pending:
        finished, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
        for future in finished:
            if future.cancelled() or future.result() is None:
                continue
            if trial is None:
                pk, trial = store.experiments.open_trial(experiment_pk, future.result())
            else:
                pk = store.experiments.add_run(experiment_pk, future.result() | {"trial": trial})
            run = future.result() | {"trial": trial}
            stored.append({"pk": pk} | {key: value for key, value in run.items() if key != "context"})
            status.finished(run)
            if progress is not None:
                progress(len(stored), total, run)
        if cancel.is_set():
            for future in pending:
                future.cancel()
    return trial, stored
