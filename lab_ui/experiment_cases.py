"""The Experiments page's Cases and probes tab: one tab per case (its leaf and probe table, probes
proposed by a model, removal), the automatic cases as written, and "Add a case" (see
``experiment_drafts`` for the draft they edit)."""
import pandas as pd
import streamlit as st

from memorylab import DamagedRowError, MemoryLabError, Session
from memorylab.display.treeview import preview
from memorylab.experiments import PROBE_KINDS, plan_for, propose_probes
from memorylab.experiments.drafts import add_probes

from .escaping import escape_markdown
from .experiment_arms import compaction_arm
from .experiment_drafts import is_automatic, plain, section_key
from .models import completion_settings

PROBE_COLUMNS = ("id", "kind", "question", "facts", "answer")
DEFAULT_KIND = "recall"
FACT_SEPARATOR = "; "
COMPACTING = ("summarize", "extractive")
GRID_HEADER, GRID_ROW, BLANK_ROWS, MAX_GRID_HEIGHT = 38, 35, 4, 560
"""The probe grid: its probes and ``BLANK_ROWS`` blank rows to type new ones into (a blank row is no
probe), within ``MAX_GRID_HEIGHT`` pixels, so typing starts in a row already there rather than in the
grid's "add row" line, whose new row reruns the page while the first cell is being typed. No column
is required: a cell left blank is named by the spec's check, never a reason to drop a row."""


def probes_table(probes) -> pd.DataFrame:
    """The probes as the grids edit them: a cell with nothing in it is "", which a grid shows blank
    (None it shows as "None") and ``probes_from_table`` reads back as nothing."""
    rows = [{"id": p["id"], "kind": p.get("kind", DEFAULT_KIND), "question": p.get("question") or "",
             "facts": FACT_SEPARATOR.join(str(f) for f in p.get("facts") or ()), "answer": p.get("answer") or ""}
            for p in probes]
    return pd.DataFrame(rows, columns=PROBE_COLUMNS)


def probes_from_table(frame) -> list[dict]:
    """The editor's rows as probes; a row with nothing but its kind is skipped (the grid's blank rows
    hold the default kind) and a blank id gets the next free one."""
    rows = [{key: plain(value) for key, value in row.items()} for row in frame.to_dict("records")]
    rows = [row for row in rows if any(value is not None for key, value in row.items() if key != "kind")]
    taken = {row["id"] for row in rows}
    free = (f"probe-{n}" for n in range(1, 100_000) if f"probe-{n}" not in taken)
    probes = []
    for row in rows:
        probe = {"id": row["id"] or next(free), "question": row["question"],
                 "facts": [f.strip() for f in (row["facts"] or "").split(";") if f.strip()]}
        probe.update((key, row[key]) for key in ("kind", "answer") if row[key] is not None)
        probes.append(probe)
    return probes


def _automatic_cases(cases, key):
    """The automatic cases as a table, each removable; returns the changes."""
    st.caption("Chosen when the experiment runs: a selection becomes one case per matching session, and each "
               "asks the probes its own branch answers (its paths, commands, ids, numbers, dates, versions, "
               "errors and decisions). The trial saves them, so the next one asks the same.")
    rows = [{"case": case.get("name") or "selection",
             "sessions": ", ".join(f"{k}: {v}" for k, v in case["select"].items()) if "select" in case
             else case["session"], "limit": case.get("limit"), "probes": "auto"} for case in cases]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    removed = st.selectbox("Remove an automatic case", ["(none)", *range(len(cases))], key=f"exp_auto_remove:{key}",
                           format_func=lambda i: i if i == "(none)" else rows[i]["case"] + " · " + rows[i]["sessions"])
    if removed != "(none)" and st.button("Remove it", key=f"exp_auto_remove_button:{key}"):
        gone = cases[removed]
        return [lambda spec: spec | {"cases": [c for c in spec["cases"] if c is not gone and c != gone]}]
    return []


def edit_cases(store, draft):
    """One tab per case (its leaf and probe table, proposals, removal), the automatic cases as written,
    and the "Add a case" panel. Returns ``(cases, changes)``."""
    key = section_key(draft, "cases", lambda k: f"exp_case_search:{k}")
    cases, changes = [], []
    arms = draft["spec"]["arms"]
    automatic = [case for case in draft["base"]["cases"] if is_automatic(case)]
    base = [case for case in draft["base"]["cases"] if not is_automatic(case)]
    if automatic:
        changes += _automatic_cases(automatic, key)
    if base:
        st.caption("Probes are questions a user could ask later. A probe passes when the arm's context holds "
                   f"every one of its facts (separate facts with “{FACT_SEPARATOR.strip()}”); matching ignores case, "
                   "spacing, punctuation, thousands separators and date formats. Kinds: recall (a stated fact), "
                   "artifact (a file, id or command), continuation (what is still to do), decision (what was "
                   "decided).")
        labels = [f"{c['name']} ({len(c['probes'])})" for c in base]
        for index, (case, tab) in enumerate(zip(base, st.tabs(labels))):
            with tab:
                edited, case_changes = _case_editor(store, case, arms, f"{key}:{index}")
            cases.append(edited)
            changes += case_changes
    elif not automatic:
        st.info("No cases yet: add one below. A case is a session branch and the probes asked of it.")
    changes += _new_case(store, base, key)
    return cases + automatic, changes


def _probe_grid(probes) -> pd.DataFrame:
    """The probes and blank rows after them, as the grid edits them."""
    blank_row = dict.fromkeys(PROBE_COLUMNS, "") | {"kind": DEFAULT_KIND}  # a grid shows a blank choice as "None"
    blank = pd.DataFrame([blank_row] * BLANK_ROWS, columns=PROBE_COLUMNS)
    return pd.concat([probes_table(probes), blank], ignore_index=True).astype(object)


def _grid_height(rows):
    """Pixels for the probe grid: its rows and the "add row" line, up to ``MAX_GRID_HEIGHT``."""
    return min(GRID_HEADER + GRID_ROW * (rows + 1), MAX_GRID_HEIGHT)


def _case_editor(store, case, arms, key):
    st.caption(f"Session `{case['session']}` · agent `{case.get('agent', 'default')}` · "
               f"tenant `{case.get('tenant', 'default')}`")
    leaf = _leaf_picker(store, case, key)
    edited = st.data_editor(
        _probe_grid(case["probes"]), key=f"exp_probes:{key}", num_rows="dynamic", hide_index=True, width="stretch",
        height=_grid_height(len(case["probes"]) + BLANK_ROWS),
        column_config={
            "id": st.column_config.TextColumn(help="Unique in the case (blank: probe-N)"),
            "kind": st.column_config.SelectboxColumn(options=list(PROBE_KINDS), default=DEFAULT_KIND),
            "question": st.column_config.TextColumn(width="large"),
            "facts": st.column_config.TextColumn(width="medium",
                                                 help=f"Short exact phrases, separated by “{FACT_SEPARATOR}”"),
            "answer": st.column_config.TextColumn(
                help="The expected answer (model grading; the one fact when facts is blank)"),
        })
    edited_case = {k: v for k, v in case.items() if k != "leaf"} | ({"leaf": leaf} if leaf else {}) | {
        "probes": probes_from_table(edited)}
    changes = []
    propose, remove = st.columns(2)
    if propose.button("Propose probes with a model", key=f"exp_propose:{key}", width="stretch",
                      help="The sidebar's model reads the span the first summarize or extractive arm drops and "
                           "proposes questions about it; you review them before they are added."):
        _propose(store, edited_case, arms)
    if remove.button("Remove this case", key=f"exp_remove_case:{key}", width="stretch"):
        changes.append(lambda spec: spec | {"cases": [c for c in spec["cases"] if c["name"] != case["name"]]})
    changes += _review_proposals(case["name"], key)
    return edited_case, changes


def _case_session(store, case):
    return Session.open(store, case["session"], tenant_id=case.get("tenant", "default"),
                        agent_id=case.get("agent", "default"))


@st.cache_resource(max_entries=64, show_spinner=False)
def _leaves(key, _session):
    """(leaf id, label) of every branch of a session, newest first, read once per version of it (``key``)."""
    return [(leaf["id"], f"{leaf['id']} · {preview(leaf, 60)}") for leaf in _session.get_leaves()]


def _leaf_picker(store, case, key):
    """The case's leaf: None (the newest leaf whenever it runs) or a fixed one."""
    try:
        session = _case_session(store, case)
    except MemoryLabError as error:
        st.warning(f"{error}. Fix the case's session in the YAML, or remove the case.")
        return case.get("leaf")
    version = (store.path, session.tenant_id, session.agent_id, session.session_id, session.info["updated_at"])
    leaves = _leaves(version, session)
    newest = leaves[0][0] if leaves else "none yet"
    labels = {f"the newest leaf, whichever it is when the experiment runs ({newest})": None}
    labels |= {label: leaf_id for leaf_id, label in leaves}
    if case.get("leaf") and case["leaf"] not in labels.values():
        labels[_unlisted_leaf_label(session, case["leaf"])] = case["leaf"]
    names = list(labels)
    current = list(labels.values()).index(case.get("leaf"))
    return labels[st.selectbox("Branch (by its leaf)", names, index=current, key=f"exp_leaf:{key}")]


def _unlisted_leaf_label(session, leaf_id):
    """A case's leaf that ends no branch of its session: a message inside one (the case reads the
    branch up to it, as the Tree's "the selected message" does), or gone."""
    try:
        message = session.get_message(leaf_id)
    except DamagedRowError:
        return f"{leaf_id} · a message that cannot be read"
    if message is None:
        return f"{leaf_id} · not in the session any more"
    return f"{leaf_id} · {preview(message, 60)} (inside a branch: read up to it)"


def _propose(store, case, arms):
    """Ask the sidebar's model for probes about what the first compacting arm drops; kept for review."""
    arm = next((a for a in arms if a["strategy"] in COMPACTING), None)
    if arm is None:
        st.error("Proposals come from the span a summarize or extractive arm drops: add one to the arms first.")
        return
    model = st.session_state.get("model")
    try:
        plan = plan_for(compaction_arm(arm), _case_session(store, case).get_history(case.get("leaf")))
        if plan is None:
            st.error(f"Arm “{arm['name']}” keeps this whole branch, so there is no dropped span to ask about: "
                     "lower its tail_token_budget or protect_head.")
            return
        with st.spinner(f"{model} is reading the {len(plan.middle)} messages arm “{arm['name']}” drops…"):
            probes = propose_probes(plan.middle, model=model, **completion_settings())
    except MemoryLabError as error:
        st.error(str(error))
        return
    st.session_state[f"exp_proposed:{case['name']}"] = {"arm": arm["name"], "model": model,
                                                        "probes": [p.to_dict() for p in probes]}


def _review_proposals(case_name, key):
    """The proposed probes to edit and tick before they join the case; returns the change that adds them."""
    proposed = st.session_state.get(f"exp_proposed:{case_name}")
    if not proposed:
        return []
    st.markdown(f"**Proposed by {escape_markdown(proposed['model'])}** from the span arm "
                f"“{escape_markdown(proposed['arm'])}” drops. Untick what "
                "should not be added; edit the rest.")
    table = probes_table(proposed["probes"])
    table.insert(0, "add", True)
    reviewed = st.data_editor(table, key=f"exp_review:{key}", hide_index=True, width="stretch",
                              column_config={"add": st.column_config.CheckboxColumn(),
                                             "kind": st.column_config.SelectboxColumn(options=list(PROBE_KINDS))})
    chosen = probes_from_table(reviewed[reviewed["add"]].drop(columns="add"))
    add, discard = st.columns(2)
    if discard.button("Discard the proposals", key=f"exp_discard:{key}", width="stretch"):
        st.session_state.pop(f"exp_proposed:{case_name}")
        st.rerun()
    if add.button(f"Add {len(chosen)} probes to the case", key=f"exp_add_proposed:{key}", type="primary",
                  disabled=not chosen, width="stretch"):
        st.session_state.pop(f"exp_proposed:{case_name}")
        return [lambda spec: add_probes(spec, case_name, chosen)]
    return []


def _new_case(store, cases, key):
    """Pick a session (searched like the Sessions page) and add it as a case with no probes yet."""
    with st.expander("Add a case", icon="➕", expanded=not cases):
        search = st.text_input("Find a session", key=f"exp_case_search:{key}",
                               placeholder="part of an id or a title")
        rows = store.sessions.list(search=search.strip() or None, limit=50)
        if not rows:
            st.info(f"No session's id or title holds “{escape_markdown(search)}”." if search.strip()
                    else "The store holds no session.")
            return []
        labels = {f"{row['metadata'].get('title') or row['session_id']} · {row['message_count']} msgs "
                  f"[{row['session_id']}]": row for row in rows}
        row = labels[st.selectbox("Session", list(labels), key="exp_case_session")]
        taken = {case["name"] for case in cases}
        default = next(name for name in (row["session_id"], *(f"{row['session_id']}-{n}" for n in range(2, 1000)))
                       if name not in taken)
        name = st.text_input("Case name", default, key=f"exp_case_name:{row['session_id']}")
        st.caption("It starts on the session's newest leaf with no probes: pick a branch and write or propose "
                   "probes in its tab once it is added.")
        if not st.button("Add the case", key="exp_add_case"):
            return []
        case = {"name": name.strip(), "session": row["session_id"], "agent": row["agent_id"],
                "tenant": row["tenant_id"], "probes": []}
        return [lambda spec: spec | {"cases": [*spec["cases"], case]}]
