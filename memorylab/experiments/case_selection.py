"""Cases nobody had to list: a spec's selections turned into cases, and automatic probes filled in.

A selection (``{select: {source: claude-code, min_messages: 200}, limit: 100}``) becomes one case per
matching session, ordered by session id so the same store always gives the same cases; a session
whose branch states nothing to ask about is left out. Each case that
asks for ``probes: auto`` gets the probes ``auto_probes`` draws from its stored branch (the messages
as written, before any compaction). The spec that runs, and is saved, holds them all, so a trial's
results name every case and probe it scored.
"""
from __future__ import annotations

import dataclasses

from ..errors import InvalidInputError, MemoryLabError
from ..history.session import Session
from .auto_probes import auto_probes
from .spec import Case, ExperimentSpec


def _matches(row, select) -> bool:
    source = (row.get("metadata") or {}).get("source") or {}
    search = str(select.get("search", "")).lower()
    title = str((row.get("metadata") or {}).get("title") or "")
    return (select.get("source") in (None, source.get("format"))
            and select.get("agent") in (None, row["agent_id"])
            and row["message_count"] >= select.get("min_messages", 0)
            and (not search or search in row["session_id"].lower() or search in title.lower()))


def _branch_probes(store, case, tenant_id):
    """The automatic probes of ``case``'s branch; None when its session is not in the store (as
    ``resolve_cases`` then says, with every other missing one)."""
    try:
        session = Session.open(store, case.session, tenant_id=case.tenant or tenant_id, agent_id=case.agent)
    except MemoryLabError:
        return None
    leaf = case.leaf or session.get_latest_leaf_id()
    return auto_probes(session.get_history(leaf, apply_compactions=False)) if leaf else ()


def _selected(store, selection, tenant_id, taken) -> list[Case]:
    """The cases of one selection: its sessions by id, those whose branch gives no probe left out."""
    tenant = selection.select.get("tenant") or tenant_id
    rows = sorted((row for row in store.sessions.list(tenant_id=tenant) if _matches(row, selection.select)),
                  key=lambda row: (row["session_id"], row["agent_id"]))
    cases = []
    for row in rows:
        if selection.limit is not None and len(cases) == selection.limit:
            break
        name = row["session_id"] if row["session_id"] not in taken else f"{row['agent_id']}/{row['session_id']}"
        case = Case(name=name, session=row["session_id"], probes=(), agent=row["agent_id"],
                    tenant=selection.select.get("tenant"), auto_probes=True)
        probes = _branch_probes(store, case, tenant_id)
        if probes:
            taken.add(name)
            cases.append(dataclasses.replace(case, probes=probes))
    if not cases:
        raise InvalidInputError(
            f"the selection {selection.to_dict()['select']} matches no session of tenant {tenant!r} "
            f"whose branch states something to ask about ({len(rows)} matched); nothing was run or saved")
    return cases


def _with_probes(store, case, tenant_id) -> Case:
    probes = _branch_probes(store, case, tenant_id)
    if probes is None:
        return case
    if not probes:
        raise InvalidInputError(f"case {case.name!r}: its branch states nothing automatic probes can ask about "
                                "(no path, command, URL, identifier, number, date, version, error or decision "
                                "before its last messages); write its probes by hand")
    return dataclasses.replace(case, probes=probes)


def select_cases(store, spec: ExperimentSpec, tenant_id: str) -> ExperimentSpec:
    """``spec`` with its selections replaced by the cases they select in ``store`` and each automatic
    case's probes drawn from its branch; a spec with neither comes back as it is."""
    if not spec.selections and not any(case.auto_probes and not case.probes for case in spec.cases):
        return spec
    taken = {case.name for case in spec.cases}
    cases = list(spec.cases)
    for selection in spec.selections:
        cases += _selected(store, selection, tenant_id, taken)
    cases = [_with_probes(store, case, tenant_id) if case.auto_probes and not case.probes else case for case in cases]
    return dataclasses.replace(spec, cases=tuple(cases), selections=())
