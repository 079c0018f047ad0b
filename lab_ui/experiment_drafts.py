"""The Experiments page's draft: the spec being edited, where it came from, and how it is saved.

The page keeps it in ``st.session_state["exp_draft"]``: ``{"origin", "spec", "base", "keys",
"problems", "version"}``. ``spec`` is the spec as edited so far, the plain YAML-like dict
``ExperimentSpec.to_dict`` gives. The editors of a section ("arms": the top-level settings and the
arms; "cases") are built from ``base[section]`` under the widget keys ``keys[section]``; what the
user types stays in the editors' own state. A section is drawn only while its tab is open, and an
editor not drawn in a rerun loses that state, so a section whose editors are gone starts again from
``spec`` under fresh keys. Changes that add or remove rows (duplicate an arm, add a case, add
proposed probes) are returned as functions from the spec dict to a new one, which the page applies
once every open table was read. ``version`` is that of the saved experiment the draft was loaded
from, which its save must still find; ``exp_open``, ``exp_show`` and ``exp_flash`` say what the next
rerun opens and shows.
"""
import copy
import math

import pandas as pd
import streamlit as st
import yaml

from memorylab import MemoryLabError
from memorylab.experiments import parse_spec_yaml
from memorylab.experiments.drafts import empty_spec, free_name
from memorylab.experiments.spec import AUTO
from memorylab.samples import SAMPLE_DIR
from memorylab.store.compare_and_set import MISSING, StaleWriteError

from .escaping import escape_markdown
from .guarded_edits import changed_since_loaded

SAMPLE_SPEC = SAMPLE_DIR / "experiments" / "sample.yaml"
NEW = "New experiment"
FROM_SAMPLE = "New from the sample spec"
UPLOAD = "Upload a YAML spec"
READ_BACK = "saved: read it back"
"""The origin of a draft just saved: the next run loads it back from the store, with its version."""


def page_tenant():
    """The tenant the page's experiments are in: the selected session's."""
    return (st.session_state.get("session_ref") or ("default",))[0]


def plain(value):
    """A cell as the spec wants it: blank is None, a whole float (pandas' integers with blanks) an int."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        return value.strip() or None
    return value


def section_key(draft, section, sentinel):
    """The widget-key suffix of a section's editors. When ``sentinel(key)``, one of its widget keys, is
    not in the session state, its editors were not drawn in the last rerun: they start afresh from
    the spec as edited so far, under a new key."""
    key = draft["keys"].get(section)
    if key is None or sentinel(key) not in st.session_state:
        key = draft["keys"][section] = st.session_state["exp_keys"] = st.session_state.get("exp_keys", 0) + 1
        draft["base"][section] = copy.deepcopy(draft["spec"] if section == "arms" else draft["spec"]["cases"])
    return key


def is_automatic(case) -> bool:
    """A case whose probes, or whose sessions, are chosen when the experiment runs (``probes: auto``,
    ``select:``): shown as written, not in the probe editor."""
    return "select" in case or case.get("probes") == AUTO


def set_draft(origin, spec, version=None):
    """Start editing ``spec`` (a plain dict): every editor starts afresh from it. ``version``: that of
    the saved experiment it was read from, which its save must still find (None: no saved one). A case
    without a tenant is in the page's tenant, and is shown there."""
    cases = spec.get("cases") or ()
    if spec.get("probes") == AUTO:  # every case without probes asks its automatic ones: say so on each
        spec = {k: v for k, v in spec.items() if k != "probes"}
        cases = [case if "probes" in case or "select" in case else case | {"probes": AUTO} for case in cases]
    spec = spec | {"cases": [case if is_automatic(case) else {"tenant": page_tenant()} | case for case in cases]}
    draft = st.session_state["exp_draft"] = {"origin": origin, "spec": spec, "base": {}, "keys": {}, "problems": [],
                                             "version": version}
    return draft


def opened_draft(origin, spec, tab, version=None):
    """A spec just picked, uploaded or loaded, shown on ``tab`` (or the one a link asked for)."""
    st.session_state["exp_tab"] = st.session_state.get("exp_link_tab") or tab
    return set_draft(origin, spec, version)


def current_draft(experiments, choice, listing):
    """The draft for ``choice``, loaded when the choice changed; None (and what to do) when there is none."""
    draft = st.session_state.get("exp_draft")
    if choice is None:
        _ways_to_start()
        return None
    if choice == UPLOAD:
        return _uploaded_draft(draft)
    if choice == NEW:
        if draft and draft["origin"] == "new":
            return draft
        return opened_draft("new", empty_spec(free_name("my-experiment", set(listing))), "Arms")
    origin = "sample" if choice == FROM_SAMPLE else saved_origin(listing[choice])
    if draft and draft["origin"] == origin:
        return draft
    # The version first: a save landing between the two reads makes the draft look stale, never fresh.
    version = None if choice == FROM_SAMPLE else experiments.version(choice)
    try:
        spec = experiments.spec(SAMPLE_SPEC) if choice == FROM_SAMPLE else experiments.get(choice)
    except MemoryLabError as error:
        st.error(str(error))
        return None
    if draft and draft["spec"].get("name") == choice:  # saved again, by this page or a run it started
        return set_draft(origin, spec.to_dict(), version)
    return opened_draft(origin, spec.to_dict(), "Results" if listing.get(choice, {}).get("trials") else "Arms",
                        version)


def _ways_to_start():
    """What a store without experiments shows: an empty one, the sample spec, or an upload."""
    st.info("No experiment in this store yet. Start an empty one and add your own sessions as cases (here, or with "
            "**Add this branch as a case** on the Chat and Tree pages), start from the sample spec (three sample "
            "conversations, seven arms from the full history to a context window), or pick **Upload a YAML spec** "
            "above; the format is described in sample_data/experiments/README.md.")
    new, sample = st.columns(2)
    for column, start, label in ((new, NEW, "Start an empty experiment"),
                                 (sample, FROM_SAMPLE, "Start from the sample spec")):
        if column.button(label, type="primary" if start == FROM_SAMPLE else "secondary", width="stretch"):
            st.session_state["exp_open"] = start
            st.rerun()


def _uploaded_draft(draft):
    upload = st.file_uploader("Experiment spec (YAML)", type=["yaml", "yml", "json"], key="exp_upload")
    if upload is None:
        st.info("Choose a YAML file with name, arms and cases; sample_data/experiments/sample.yaml is an example.")
        return None
    origin = f"upload:{upload.file_id}"
    if draft and draft["origin"] == origin:
        return draft
    try:
        spec = parse_spec_yaml(upload.getvalue().decode("utf-8"), source=upload.name)
    except UnicodeDecodeError:
        st.error(f"{upload.name} is not UTF-8 text, so it is not a YAML spec.")
        return None
    except MemoryLabError as error:
        st.error(str(error))
        return None
    return opened_draft(origin, spec.to_dict(), "Arms")


def saved_origin(row):
    """A saved experiment's draft stays while it is edited, even when the saved one changes elsewhere:
    its save is then refused (``stale_draft``) until the person reloads or overwrites."""
    return f"saved:{row['name']}"


def checked(experiments, spec_dict, problems):
    """``(spec, None)``, or ``(None, message)`` naming every problem the page or the engine found."""
    try:
        spec = experiments.spec(spec_dict)
    except MemoryLabError as error:
        return None, "\n".join([*(f"- {p}" for p in problems), str(error)])
    if problems:
        return None, "The spec cannot be saved yet:\n" + "\n".join(f"- {p}" for p in problems)
    return spec, None


def next_step(spec_dict) -> str | None:
    """What a draft still lacks before it can run (arms, cases, a case's probes), said as what to add
    where; None when it has them all (what else is wrong is then the spec check's to say)."""
    steps = []
    if not spec_dict.get("arms"):
        steps.append("add an arm on the **Arms** tab (a row in its table)")
    if not spec_dict.get("cases"):
        steps.append("add a case on **Cases and probes**, or with **Add this branch as a case** on the Chat and "
                     "Tree pages")
    bare = [case.get("name", "?") for case in spec_dict.get("cases") or () if case.get("probes") == []]
    if bare:
        steps.append(f"write a probe for {', '.join(f'“{escape_markdown(name)}”' for name in bare)} on **Cases and "
                     "probes** (a question and the facts its answer holds), or propose some with a model")
    return f"Next: {'; '.join(steps)}. Then **Run** it (or **Save** it)." if steps else None


def saved(spec, *, message=None, tab=None):
    """After a save or a run: the box shows the experiment, the editors start from what was saved."""
    set_draft(READ_BACK, spec.to_dict())  # the next run loads what is stored now, and its version
    st.session_state["exp_open"] = spec.name
    if message:
        st.session_state["exp_flash"] = message
    if tab:
        st.session_state["exp_show"] = tab
    st.rerun()


def editable_draft(experiments):
    """The draft the Chat and Tree pages add cases and probes to: the one being edited (loaded back
    first when it was just saved), else a new empty one."""
    draft = st.session_state.get("exp_draft")
    if draft and draft["origin"] == READ_BACK:
        name = draft["spec"]["name"]
        version = experiments.version(name)  # first: a save landing between the reads looks stale, never fresh
        return set_draft(saved_origin({"name": name}), experiments.get(name).to_dict(), version)
    if draft and (draft["origin"] in ("new", "sample") or draft["origin"].startswith("saved:")):
        return draft
    names = {row["name"] for row in experiments.listing()}
    return set_draft("new", draft["spec"] if draft else empty_spec(free_name("my-experiment", names)))


def draft_choice(draft):
    """What the Experiments page's box shows for ``draft``, so that it opens on it."""
    origin = draft["origin"]
    return origin.removeprefix("saved:") if origin.startswith("saved:") else FROM_SAMPLE if origin == "sample" else NEW


def guarded_version(draft, spec):
    """The version a save of ``spec`` must find: that of the saved experiment the draft was loaded
    from, while it keeps its name (None: a new name, saved as the note below the buttons says)."""
    name = spec.name if spec else draft["spec"].get("name")
    return draft["version"] if draft["version"] and draft["origin"] == f"saved:{name}" else None


def save_draft(experiments, spec, expected):
    """Save; True when refused because the saved experiment is no longer at ``expected``."""
    try:
        experiments.save(spec, expected=expected)
    except StaleWriteError:
        return True
    except MemoryLabError as failure:
        st.error(str(failure))
        return False
    saved(spec, message=f"Saved “{escape_markdown(spec.name)}”.")


def run_draft(experiments, spec, expected):
    """Save and start a run; True when refused because the saved experiment is no longer at ``expected``."""
    try:  # saved first, and refused at once when a case's session or leaf is missing
        st.session_state["exp_job"] = experiments.start(spec, expected=expected)
    except StaleWriteError:
        return True
    except MemoryLabError as failure:
        st.error(str(failure))
        return False
    saved(spec, tab="Results")


def reload_draft(_editor):
    """Drop the draft: the next run loads the saved experiment as it is now."""
    st.session_state.pop("exp_draft", None)
    st.rerun()


def stale_draft(experiments, draft, spec, refused):
    """While the saved experiment is not the version the draft was loaded from: both as YAML, their
    diff, and reload (take the saved one) or overwrite (save the draft over it on purpose)."""
    expected = guarded_version(draft, spec)
    name = spec.name if spec else draft["spec"]["name"]
    version = experiments.version(name) if expected else None
    if not (refused or expected != version):
        return
    stored = None if version == MISSING else experiments.get(name).to_yaml()
    yours = spec.to_yaml() if spec else yaml.safe_dump(draft["spec"], sort_keys=False, allow_unicode=True)
    changed_since_loaded("exp", f"The saved experiment “{escape_markdown(name)}”", stored=stored, version=version,
                         yours=yours, refused=refused, reload=reload_draft,
                         overwrite=lambda shown: spec is not None and save_draft(experiments, spec, shown))
