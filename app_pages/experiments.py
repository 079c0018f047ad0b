# Experiments: arms (compaction strategies with their settings) x cases (branches with probes), run in
# the background, scored, every trial kept.
#
# State: ``exp_choice`` (the experiment picked), ``exp_draft`` (the spec being edited, with the
# ``version`` of the saved experiment it was loaded from; see lab_ui/experiment_drafts.py), ``exp_job``
# (the run in progress, an ``ExperimentJob``; ``exp_followed`` the one whose trial the picker moved to,
# ``exp_job_seen`` its runs the page last drew), ``exp_tab`` (the open tab), ``exp_open`` (an experiment
# another page or a save wants shown next, on its Results tab) and ``exp_flash`` (a message for the
# next rerun). A link's query parameters open an experiment, tab and trial (lab_ui/deep_links.py).
import streamlit as st
import yaml

from lab_ui.deep_links import follow_experiment_link, stop_showing_view
from lab_ui.escaping import escape_markdown
from lab_ui.experiment_arms import edit_arms
from lab_ui.experiment_cases import edit_cases
from lab_ui.experiment_drafts import (
    FROM_SAMPLE,
    NEW,
    UPLOAD,
    checked,
    current_draft,
    guarded_version,
    next_step,
    page_tenant,
    run_draft,
    save_draft,
    saved_origin,
    set_draft,
    stale_draft,
)
from lab_ui.experiment_progress import trial_progress, unfinished_arms
from lab_ui.experiment_results import results_panel
from lab_ui.models import sidebar_api_hosts
from lab_ui.sidebar import setup_page
from memorylab import MemoryLabError
from memorylab.experiments import Experiments

TABS = ["Results", "Arms", "Cases and probes", "YAML"]


def pick_experiment(listing):
    """The experiment box: the saved ones, newest change first, then the three ways to start one."""
    if "exp_open" in st.session_state:
        st.session_state["exp_choice"] = st.session_state.pop("exp_open")
    if "exp_show" in st.session_state:
        st.session_state["exp_tab"] = st.session_state.pop("exp_show")
    options = [*listing, NEW, FROM_SAMPLE, UPLOAD]
    if st.session_state.get("exp_choice") not in options:
        st.session_state.pop("exp_choice", None)
        if listing:
            st.session_state["exp_choice"] = options[0]
    return st.selectbox("Experiment", options, index=None, key="exp_choice",
                        placeholder="Pick an experiment, or start a new one")


def job_outcome():
    """The job's progress while it runs; once it ended, what came of it (shown once). Returns the running job."""
    job = st.session_state.get("exp_job")
    if job is None:
        return None
    if job.running:
        trial_progress(job)
        return job
    del st.session_state["exp_job"]
    if job.trial is not None:  # the trial picker opens on the new trial (the browser keeps the old choice)
        st.session_state[f"exp_trial:{job.name}"] = job.trial
    if job.error:
        st.error(job.error)
    elif job.results is None or not job.results.complete:
        kept = len(job.results.runs) if job.results else 0
        st.warning(f"Cancelled: {kept} of {job.total} runs finished and are kept as a trial. Not finished: "
                   f"{escape_markdown(unfinished_arms(job))}.")
    else:
        st.success(f"Trial {job.results.trial} of “{escape_markdown(job.name)}”: {job.total} runs in "
                   f"{job.elapsed:.1f} s.")
    return None


def action_bar(experiments, draft, spec, error, listing, job):
    hint = None if draft["problems"] else next_step(draft["spec"])
    if hint:
        st.info(hint, icon="👉")
    elif error:
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
        trials = follow_running_trial(job, trials)
        if not trials:
            return
    stamp = (store.path, experiments.tenant_id, choice, row["runs"], row["last_run"])
    branches = {case["name"]: (case.get("tenant", "default"), case.get("agent", "default"), case["session"])
                for case in draft["spec"]["cases"]}
    results_panel(experiments, choice, trials, stamp, branches)


def follow_running_trial(job, trials):
    """The trials to show while ``job`` runs: its own once its first run is stored (picked once, so
    the user may look at another), else those before it."""
    if job.trial is None:
        st.info(f"Trial {trials + 1} is running; its results show here as soon as its first run finishes.")
        return trials
    if st.session_state.get("exp_followed") is not job:
        st.session_state["exp_followed"] = job
        st.session_state[f"exp_trial:{job.name}"] = job.trial
    return job.trial


def yaml_tab(spec, spec_dict):
    text = spec.to_yaml() if spec else yaml.safe_dump(spec_dict, sort_keys=False, allow_unicode=True)
    st.caption("The spec as edited, for `memorylab eval SPEC.yaml` or to keep in a repository.")
    st.download_button("Download the spec", text, f"{spec_dict.get('name') or 'experiment'}.yaml", "application/yaml",
                       on_click="ignore", icon="⬇️")
    st.code(text, language="yaml", height=600)


store, session = setup_page("Experiments")
tenant = page_tenant()
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
    stop_showing_view()
follow_experiment_link(listing, TABS)
choice = pick_experiment(listing)
if choice in listing:
    row = listing[choice]
    st.caption(f"{escape_markdown(row['description'] or 'No description.')} · {row['arms']} arms × "
               f"{row['cases']} cases, {row['probes']} probes · "
               f"{row['trials']} trial{'' if row['trials'] == 1 else 's'}")
running = job_outcome()
draft = current_draft(experiments, choice, listing)
if draft is None:
    stop_showing_view()

bar = st.container()
# Only the open tab is drawn: a large experiment's editors cost as much as its results.
results, arms_tab, cases_tab, yaml_view = st.tabs(TABS, key="exp_tab", on_change="rerun")
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
