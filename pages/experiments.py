"""Experiments: arms (compaction strategies with their settings) x cases (branches with probes), run in
the background, scored, every trial kept.

State: ``exp_choice`` (the experiment picked), ``exp_draft`` (the spec being edited, see
pages/experiment_editor.py, with the ``version`` of the saved experiment it was loaded from), ``exp_job`` (the run in progress, an ``ExperimentJob``), ``exp_tab`` (the
open tab), ``exp_open`` (an experiment another page or a save wants shown next, on its Results tab)
and ``exp_flash`` (a message for the next rerun).
"""
import streamlit as st
import yaml

from memorylab import MemoryLabError
from memorylab.experiments import Experiments, parse_spec_yaml
from memorylab.experiments.spec import AUTO
from memorylab.samples import SAMPLE_DIR
from memorylab.store.compare_and_set import MISSING, StaleWriteError

from pages.common import changed_since_loaded, escape_markdown, job_progress, setup_page, sidebar_api_hosts
from pages.experiment_editor import edit_arms, edit_cases, is_automatic
from pages.experiment_results import results_panel

SAMPLE_SPEC = SAMPLE_DIR / "experiments" / "sample.yaml"
FROM_SAMPLE = "New from the sample spec"
UPLOAD = "Upload a YAML spec"


def pick_experiment(listing):
    """The experiment box: the saved ones, newest change first, then the two ways to start one."""
    if "exp_open" in st.session_state:
        st.session_state["exp_choice"] = st.session_state.pop("exp_open")
    if "exp_show" in st.session_state:
        st.session_state["exp_tab"] = st.session_state.pop("exp_show")
    options = [*listing, FROM_SAMPLE, UPLOAD]
    if st.session_state.get("exp_choice") not in options:
        st.session_state.pop("exp_choice", None)
        if listing:
            st.session_state["exp_choice"] = options[0]
    return st.selectbox("Experiment", options, index=None, key="exp_choice",
                        placeholder="Pick an experiment, or start from the sample spec")


def set_draft(origin, spec, version=None):
    """Start editing ``spec`` (a plain dict): every editor starts afresh from it. ``version``: that of
    the saved experiment it was read from, which its save must still find (None: no saved one). A case
    without a tenant is in the page's tenant, and is shown there."""
    cases = spec.get("cases") or ()
    if spec.get("probes") == AUTO:  # every case without probes asks its automatic ones: say so on each
        spec = {k: v for k, v in spec.items() if k != "probes"}
        cases = [case if "probes" in case or "select" in case else case | {"probes": AUTO} for case in cases]
    spec = spec | {"cases": [case if is_automatic(case) else {"tenant": tenant} | case for case in cases]}
    draft = st.session_state["exp_draft"] = {"origin": origin, "spec": spec, "base": {}, "keys": {}, "problems": [],
                                             "version": version}
    return draft


def opened_draft(origin, spec, tab, version=None):
    """A spec just picked, uploaded or loaded, shown on ``tab``."""
    st.session_state["exp_tab"] = tab
    return set_draft(origin, spec, version)


def current_draft(experiments, choice, listing):
    """The draft for ``choice``, loaded when the choice changed; None (and what to do) when there is none."""
    if choice is None:
        st.info("No experiment in this store yet. Start from the sample spec (three sample conversations, five arms "
                "from the full history to a context window), or pick **Upload a YAML spec** above; the format is "
                "described in sample_data/experiments/README.md.")
        if st.button("Start from the sample spec", type="primary"):
            st.session_state["exp_open"] = FROM_SAMPLE
            st.rerun()
        return None
    draft = st.session_state.get("exp_draft")
    if choice == UPLOAD:
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


def job_outcome():
    """The job's bar while it runs; once it ended, what came of it (shown once). Returns the running job."""
    job = st.session_state.get("exp_job")
    if job is None:
        return None
    if job.running:
        job_progress(job, lambda job: f"Running “{escape_markdown(job.name)}”: {job.done} of {job.total} runs",
                     cancel_key="exp_cancel",
                     cancel_help="Runs not yet started are skipped; those that finished are kept as the trial.")
        return job
    del st.session_state["exp_job"]
    if job.trial is not None:  # the trial picker opens on the new trial (the browser keeps the old choice)
        st.session_state[f"exp_trial:{job.name}"] = job.trial
    if job.error:
        st.error(job.error)
    elif job.results is None or not job.results.complete:
        kept = len(job.results.runs) if job.results else 0
        st.warning(f"Cancelled: {kept} of {job.total} runs finished and are kept as a trial.")
    else:
        st.success(f"Trial {job.results.trial} of “{escape_markdown(job.name)}”: {job.total} runs in "
                   f"{job.elapsed:.1f} s.")
    return None


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


def saved(spec, *, message=None, tab=None):
    """After a save or a run: the box shows the experiment, the editors start from what was saved."""
    set_draft("saved: read it back", spec.to_dict())  # the next run loads what is stored now, and its version
    st.session_state["exp_open"] = spec.name
    if message:
        st.session_state["exp_flash"] = message
    if tab:
        st.session_state["exp_show"] = tab
    st.rerun()


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


def action_bar(experiments, draft, spec, error, listing, job):
    if error:
        st.error(error)
    save, run, note = st.columns([1, 1, 5], vertical_alignment="center")
    busy = job is not None
    expected = guarded_version(draft, spec)
    refused = save.button("Save", disabled=spec is None or busy, width="stretch",
                          help="Store the arms, cases and probes under the spec's name; its trials stay.") and \
        save_draft(experiments, spec, expected)
    refused = run.button("Run", type="primary", disabled=spec is None or busy, width="stretch",
                         help="Save, then run every arm on every case as a new trial, in the background.") and \
        run_draft(experiments, spec, expected) or refused
    stale_draft(experiments, draft, spec, refused)
    if spec is not None:
        row = listing.get(spec.name)
        replaces = row is not None and draft["origin"] != saved_origin(row)
        note.caption(f"{len(spec.arms)} arms × {len(spec.cases)} cases = {len(spec.arms) * len(spec.cases)} runs, "
                     f"as trial {(row['trials'] if row else 0) + 1} of “{escape_markdown(spec.name)}”."
                     + (" Saving replaces the saved arms and cases of that name; its trials stay." if replaces else ""))


def results_tab(experiments, store, choice, listing, draft, job):
    """The trials of the chosen experiment; one still running shows once it ends."""
    if choice not in listing:
        name = draft["spec"].get("name")
        st.info("This spec is not saved yet: press **Run** above to run it (it is saved first) or **Save**."
                + (f" A saved experiment named “{name}” exists: pick it in the box above to see its trials."
                   if name in listing else ""))
        return
    row, trials = listing[choice], listing[choice]["trials"]
    if job is not None and job.name == choice:
        running = job.trial or trials + 1  # None until its first run is stored
        st.info(f"Trial {running} is running; its results show here when it ends.")
        trials = running - 1
        if not trials:
            return
    stamp = (store.path, experiments.tenant_id, choice, row["runs"], row["last_run"])
    branches = {case["name"]: (case.get("tenant", "default"), case.get("agent", "default"), case["session"])
                for case in draft["spec"]["cases"]}
    results_panel(experiments, choice, trials, stamp, branches)


def yaml_tab(spec, spec_dict):
    text = spec.to_yaml() if spec else yaml.safe_dump(spec_dict, sort_keys=False, allow_unicode=True)
    st.caption("The spec as edited, for `memorylab eval SPEC.yaml` or to keep in a repository.")
    st.download_button("Download the spec", text, f"{spec_dict.get('name') or 'experiment'}.yaml", "application/yaml",
                       on_click="ignore", icon="⬇️")
    st.code(text, language="yaml", height=600)


store, session = setup_page("Experiments")
tenant = (st.session_state.get("session_ref") or ("default",))[0]
experiments = Experiments(store, tenant_id=tenant, allowed_hosts=sidebar_api_hosts())
st.title("Experiments")
st.caption(f"Arms (ways of fitting a history into a prompt) run on cases (session branches with probes: questions a "
           f"user could ask later). Each run keeps what the arm's context still holds, its tokens and cost; every "
           f"trial stays. Tenant `{tenant}`.")
flash = st.session_state.pop("exp_flash", None)
if flash:
    st.success(flash)

try:
    listing = {row["name"]: row for row in experiments.listing()}
except MemoryLabError as failure:
    st.error(str(failure))
    st.stop()
choice = pick_experiment(listing)
if choice in listing:
    row = listing[choice]
    st.caption(f"{escape_markdown(row['description'] or 'No description.')} · {row['arms']} arms × "
               f"{row['cases']} cases, {row['probes']} probes · {row['trials']} trial{'' if row['trials'] == 1 else 's'}")
running = job_outcome()
draft = current_draft(experiments, choice, listing)
if draft is None:
    st.stop()

bar = st.container()
# Only the open tab is drawn: a large experiment's editors cost as much as its results.
results, arms_tab, cases_tab, yaml_view = st.tabs(["Results", "Arms", "Cases and probes", "YAML"], key="exp_tab",
                                                   on_change="rerun")
changes = []
if arms_tab.open:
    with arms_tab:
        draft["spec"], draft["problems"], changes = edit_arms(draft)
if cases_tab.open:
    with cases_tab:
        draft["spec"]["cases"], changes = edit_cases(store, draft)
spec, error = checked(experiments, draft["spec"], draft["problems"])
with bar:
    action_bar(experiments, draft, spec, error, listing, running)
if results.open:
    with results:
        results_tab(experiments, store, choice, listing, draft, running)
if yaml_view.open:
    with yaml_view:
        yaml_tab(spec, draft["spec"])

if changes:
    spec_dict = draft["spec"]
    for change in changes:
        spec_dict = change(spec_dict)
    set_draft(draft["origin"], spec_dict, draft["version"])
    st.rerun()
