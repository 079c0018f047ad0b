"""What did a compaction forget? The span's artifact ledger against the request that followed it.

An overlay replaces a span of one branch by its summary. The request an agent sent right after that
compaction held the head (what came before the span, itself compacted as it was then), the summary,
the span's pinned messages and the tail (what followed the span and already existed at that moment).
An artifact of the span is **kept** when one of those still holds it, with the experiments'
formatting-tolerant fact matcher, and **lost** only when none does. "At that moment" is the
compaction's own time: an imported compaction's ``metadata.created_at`` (when the agent compacted),
else the overlay's ``created_at``; so later messages that mention an artifact again do not hide that
the summary dropped it, and a compaction by Claude Code, which replaces everything before it, is
judged on its summary alone.
"""
from __future__ import annotations

import sys
import types
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone

from ..errors import NotFoundError
from ..experiments.facts import ContextText, fact_terms, match_fact
from ..history.overlays import SUMMARY_ID_PREFIX, apply_overlays
from ..messages import utc_now_iso
from ..store.core import is_postgres_url
from .artifacts import KINDS, Artifact, extract_artifacts, iter_text

WHERE = ("summary", "pin", "tail", "head")
"""Where a kept artifact was found, in the order an audit looks."""

DECISION_SHARE = 0.6
"""A decision is kept when this share of its terms stand together: summaries reword decisions, while
a path, a command or a number is kept only whole."""


@dataclass
class CompactionAudit:
    """One overlay's audit: its span's size, its summary's size, and each artifact kept (with where)
    or lost."""

    session_id: str
    overlay_id: int
    span_messages: int
    span_tokens: int
    summary_tokens: int
    kept: list[dict] = field(default_factory=list)
    lost: list[dict] = field(default_factory=list)
    agent_id: str = "default"
    tenant_id: str = "default"
    error: str | None = None
    """Why the overlay could not be audited (its span is no stored branch); None when it was."""

    @property
    def retention(self) -> dict[str, float]:
        """Per kind with artifacts in the span: the share kept."""
        kept, lost = Counter(a["kind"] for a in self.kept), Counter(a["kind"] for a in self.lost)
        return {kind: kept[kind] / (kept[kind] + lost[kind]) for kind in KINDS if kept[kind] + lost[kind]}

    def to_dict(self) -> dict:
        plain = {"session_id": self.session_id, "agent_id": self.agent_id, "tenant_id": self.tenant_id,
                 "overlay_id": self.overlay_id, "span_messages": self.span_messages, "span_tokens": self.span_tokens,
                 "summary_tokens": self.summary_tokens, "kept": self.kept, "lost": self.lost,
                 "retention": self.retention}
        return plain | ({"error": self.error} if self.error else {})


def _moment(overlay) -> datetime:
    stamp = (overlay.get("metadata") or {}).get("created_at") or overlay["created_at"]
    return _parse_time(stamp) or datetime.max.replace(tzinfo=timezone.utc)


def _parse_time(stamp):
    if not isinstance(stamp, str):
        return None
    try:
        moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def _existed_by(message, moment) -> bool:
    created = _parse_time(message.get("created_at"))
    return created is None or created <= moment


def _holds(context: ContextText, artifact: Artifact, terms) -> bool:
    """Whether ``context`` keeps ``artifact``, whose match has the fact terms ``terms``."""
    share = DECISION_SHARE if artifact.kind == "decision" else 1
    needed, present = len(terms) * share, 0
    # Terms the context lacks altogether cannot be matched: most lost artifacts end here, at the
    # first term (or the first few of a decision) that it lacks.
    for seen, term in enumerate(terms, 1):
        if context.holds_any(term.pieces[0]):
            present += 1
        elif present + len(terms) - seen < needed:
            return False
    if present < needed or not terms:
        return False
    found = match_fact(context, artifact.match)
    if found.kept:
        return True
    return share < 1 and 1 - len(found.missing) / len(terms) >= share


def _regions(request, overlay_id) -> dict[str, list]:
    """The request cut where the audited overlay stands: head, summary, pins (the span's messages
    read back whole after it) and tail."""
    summary_id = f"{SUMMARY_ID_PREFIX}{overlay_id}"
    at = next((i for i, m in enumerate(request) if m["id"] == summary_id), None)
    if at is None:  # hidden by an older overlay that covers its whole span
        return {"summary": [], "pin": [], "tail": [], "head": list(request)}
    kept = set(request[at]["metadata"]["compaction"].get("kept_pinned") or ())
    after = at + 1 + sum(1 for m in request[at + 1:at + 1 + len(kept)] if m["id"] in kept)
    return {"summary": [request[at]], "pin": request[at + 1:after], "tail": request[after:], "head": request[:at]}


class _Branch:
    """A session's stored messages, read once and walked per overlay."""

    def __init__(self, session):
        self.session = session
        self.messages = {m["id"]: m for m in session.get_all_messages()}
        self.children: dict = {}
        for message in self.messages.values():
            self.children.setdefault(message.get("parent_id"), []).append(message)
        self.overlays = session.get_compactions()
        self.pinned_ids = frozenset(pin["message_id"] for pin in session.get_pins())
        self.moments: dict = {}

    def moment(self, overlay) -> datetime:
        """``_moment`` of ``overlay``, parsed once per session however many overlays are audited."""
        if overlay["id"] not in self.moments:
            self.moments[overlay["id"]] = _moment(overlay)
        return self.moments[overlay["id"]]

    def path_to(self, message_id) -> list:
        path, seen = [], set()
        while message_id is not None and message_id in self.messages and message_id not in seen:
            seen.add(message_id)
            path.append(self.messages[message_id])
            message_id = self.messages[message_id].get("parent_id")
        return path[::-1]

    def tail_after(self, message_id, moment) -> list:
        """The newest line of messages under ``message_id`` that existed at ``moment``."""
        tail = []
        while True:
            children = [m for m in self.children.get(message_id, ()) if _existed_by(m, moment)]
            if not children:
                return tail
            newest = max(children, key=lambda m: (m.get("created_at") or "", m["id"]))
            tail.append(newest)
            message_id = newest["id"]

    def audit(self, overlay) -> CompactionAudit:
        path = self.path_to(overlay["to_id"])
        start = next((i for i, m in enumerate(path) if m["id"] == overlay["from_id"]), None)
        if start is None:
            raise NotFoundError(f"overlay {overlay['id']} of session {self.session.session_id!r}: its span "
                                f"{overlay['from_id']!r}..{overlay['to_id']!r} is not one stored branch")
        moment = self.moment(overlay)
        earlier = [o for o in self.overlays if o["id"] < overlay["id"] and self.moment(o) <= moment]
        # The span as the agent read it when it compacted: earlier summaries stand in their ranges, so
        # what an earlier compaction already dropped is charged to it, not to this one.
        span = apply_overlays(path[start:], earlier, self.pinned_ids)
        request = apply_overlays(path + self.tail_after(overlay["to_id"], moment), [*earlier, overlay],
                                 self.pinned_ids)
        regions = _regions(request, overlay["id"])
        ledger = extract_artifacts(span)
        forms = {form for artifact in ledger for term in fact_terms(artifact.match) for piece in term.pieces
                 for form in piece}
        contexts = {}
        for where in WHERE:  # each context indexed once for every form the ledger's terms hold
            contexts[where] = ContextText([text for m in regions[where] for text in iter_text(m)])
            contexts[where].gather(forms)
        audit = CompactionAudit(
            self.session.session_id, overlay["id"], len(span), sum(m.get("tokens", 0) for m in span),
            regions["summary"][0]["tokens"] if regions["summary"] else 0, agent_id=self.session.agent_id,
            tenant_id=self.session.tenant_id)
        for artifact in ledger:
            terms = fact_terms(artifact.match)
            where = next((w for w in WHERE if _holds(contexts[w], artifact, terms)), None)
            entry = {"kind": artifact.kind, "text": artifact.text, "message_id": artifact.message_id}
            if where is None:
                audit.lost.append(entry)
            else:
                audit.kept.append({**entry, "where": where})
        return audit


def audit_compaction(session, overlay_id) -> CompactionAudit:
    """What the overlay ``overlay_id`` of ``session`` kept and lost (see the module docstring)."""
    branch = _Branch(session)
    overlay = next((o for o in branch.overlays if o["id"] == overlay_id), None)
    if overlay is None:
        raise NotFoundError(f"session {session.session_id!r} has no overlay {overlay_id!r}")
    return branch.audit(overlay)


def audit_proposal(session, summary, from_id, to_id) -> CompactionAudit:
    """What a summary would keep and lose if it were written now over ``from_id .. to_id``: the
    audit of an overlay not yet stored (the Compaction lab shows it before a summary is accepted)."""
    branch = _Branch(session)
    proposed = {"id": max((o["id"] for o in branch.overlays), default=0) + 1, "from_id": from_id, "to_id": to_id,
                "summary": summary, "created_at": utc_now_iso(), "metadata": {}}
    branch.overlays.append(proposed)
    return branch.audit(proposed)


def audit_session(session) -> list[CompactionAudit]:
    """Every overlay of ``session``, superseded ones included, oldest first; one that cannot be
    audited comes back with its ``error``, so the others still are."""
    branch = _Branch(session)
    audits = []
    for overlay in branch.overlays:
        try:
            audits.append(branch.audit(overlay))
        except NotFoundError as error:
            audits.append(CompactionAudit(session.session_id, overlay["id"], 0, 0, 0, agent_id=session.agent_id,
                                          tenant_id=session.tenant_id, error=str(error)))
    return audits


def retention_totals(audits: Iterable[CompactionAudit]) -> dict[str, dict[str, int]]:
    """``{kind: {"kept": n, "lost": n}}`` over ``audits``, for the kinds that occur."""
    totals = {kind: Counter() for kind in KINDS}
    for audit in audits:
        for verdict in ("kept", "lost"):
            for artifact in getattr(audit, verdict):
                totals[artifact["kind"]][verdict] += 1
    return {kind: {"kept": c["kept"], "lost": c["lost"]} for kind, c in totals.items() if c}


PARALLEL_FROM = 40
"""Sessions from which ``iter_store_audits`` shares the work among processes."""
_CHUNK = 10


def _session_keys(store, session_ids, tenant_id) -> list[tuple]:
    """(session id, tenant, agent) of every session to audit, in the store's listing order."""
    keys = store.sessions.keys(tenant_id=tenant_id)
    wanted = set(session_ids) if session_ids else None
    if wanted:
        missing = wanted - {session_id for session_id, _, _ in keys}
        if missing:
            raise NotFoundError(f"no session {', '.join(sorted(missing))} in {store.path}")
    return [key for key in keys if wanted is None or key[0] in wanted]


def _audits_of(store, keys) -> list[CompactionAudit]:
    from ..history.session import Session

    audits = []
    for session_id, tenant_id, agent_id in keys:
        session = Session(store, session_id, tenant_id=tenant_id, agent_id=agent_id)
        if session.get_compactions():
            audits += audit_session(session)
    return audits


def _audits_in(target, keys) -> list[CompactionAudit]:
    """``_audits_of`` in a worker process, on its own connection to the store file ``target``."""
    from ..store import Store

    with Store(target) as store:
        return _audits_of(store, keys)


@contextmanager
def _plain_main():
    """The program's main module hidden while worker processes start: a spawned worker imports the
    parent's main module, which under a server or a test runner may be a page script."""
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


def _audits_in_chunk(job) -> list[CompactionAudit]:
    return _audits_in(*job)


def iter_store_audits(store, session_ids=None, *, tenant_id=None, workers=1) -> Iterator[CompactionAudit]:
    """The audits of every overlay in ``store`` (or in the sessions ``session_ids``), session by
    session in the store's order, in bounded memory. ``workers`` above 1 (``memorylab audit`` gives
    one per core) shares a SQLite file of many sessions among that many processes, a few sessions
    each, each on its own connection; the audits still come back in order."""
    keys = _session_keys(store, session_ids, tenant_id)
    if workers <= 1 or len(keys) < PARALLEL_FROM or store.path in (":memory:", "") or is_postgres_url(store.path):
        for key in keys:
            yield from _audits_of(store, [key])
        return
    import multiprocessing  # here: only a store of many sessions needs it

    jobs = [(store.path, keys[i:i + _CHUNK]) for i in range(0, len(keys), _CHUNK)]
    with _plain_main():  # every worker starts here, before the first audit is handed out
        pool = multiprocessing.get_context("spawn").Pool(workers)
    try:
        for audits in pool.imap(_audits_in_chunk, jobs):
            yield from audits
    finally:
        pool.terminate()
