"""Experiment drafts: specs being written, as the plain dicts ``ExperimentSpec.to_dict`` gives. A new
one starts empty; cases and probes join it from where a person is (a branch they are looking at, a
message of it). Pure functions: each returns a new dict and leaves the one given as it was; the
draft is checked (``parse_spec``) when it is saved or run."""


def empty_spec(name) -> dict:
    """A spec with no arms and no cases yet."""
    return {"name": name, "arms": [], "cases": []}


def free_name(name, taken) -> str:
    """``name``, or ``name-2``, ``name-3``... : the first not in ``taken``."""
    candidates = (name, *(f"{name}-{n}" for n in range(2, len(taken) + 3)))
    return next(candidate for candidate in candidates if candidate not in taken)


def _branch(case):
    return (case.get("tenant", "default"), case.get("agent", "default"), case.get("session"), case.get("leaf"))


def case_for_branch(spec, tenant_id, agent_id, session_id, leaf_id) -> dict | None:
    """The case of ``spec`` on the branch ending at ``leaf_id`` (None: the newest leaf), or None."""
    branch = (tenant_id, agent_id, session_id, leaf_id)
    return next((case for case in spec["cases"] if "session" in case and _branch(case) == branch), None)


def with_branch_case(spec, tenant_id, agent_id, session_id, leaf_id) -> tuple[dict, str]:
    """``spec`` with a case for the branch ending at ``leaf_id`` (None: the session's newest leaf
    whenever it runs), and that case's name; a branch already there is not added twice."""
    existing = case_for_branch(spec, tenant_id, agent_id, session_id, leaf_id)
    if existing is not None:
        return spec, existing["name"]
    name = free_name(session_id, {case.get("name") for case in spec["cases"]})
    case = {"name": name, "session": session_id, "agent": agent_id, "tenant": tenant_id} | (
        {"leaf": leaf_id} if leaf_id else {}) | {"probes": []}
    return spec | {"cases": [*spec["cases"], case]}, name


def add_probes(spec, case_name, probes) -> dict:
    """``spec`` with ``probes`` appended to case ``case_name``, ids made unique within the case."""
    cases = []
    for case in spec["cases"]:
        if case["name"] == case_name:
            taken = {p["id"] for p in case["probes"]}
            added = []
            for probe in probes:
                probe_id = free_name(probe["id"], taken)
                taken.add(probe_id)
                added.append(probe | {"id": probe_id})
            case = case | {"probes": [*case["probes"], *added]}
        cases.append(case)
    return spec | {"cases": cases}


def with_message_probe(spec, branch, question, fact) -> tuple[dict, str]:
    """``spec`` with a recall probe asking ``question`` whose fact is ``fact`` (a message's text, as
    the person trimmed it) on the case of ``branch`` (tenant, agent, session, leaf; added when
    missing), and that case's name."""
    spec, case_name = with_branch_case(spec, *branch)
    probe = {"id": "probe-1", "kind": "recall", "question": question.strip(), "facts": [fact.strip()]}
    return add_probes(spec, case_name, [probe]), case_name
