"""A running trial on the Experiments page: its bar with the time left, each arm's progress, and
Cancel, redrawn on their own; the whole page reruns as each run is stored, so the leaderboard and the
probe matrix fill in while the rest runs."""
import streamlit as st

from memorylab.experiments import time_left_text

from .escaping import escape_markdown

POLL_SECONDS = 0.5
SEEN_KEY = "exp_job_seen"
"""The runs the page last drew results for: a fragment seeing more reruns the whole page."""


def trial_progress(job):
    st.session_state[SEEN_KEY] = job.done
    _live_progress(job)


@st.fragment(run_every=POLL_SECONDS)
def _live_progress(job):
    if not job.running or job.done != st.session_state.get(SEEN_KEY):
        st.rerun()
    st.progress(job.done / max(job.total, 1), text=_bar_text(job))
    st.dataframe(_arm_rows(job), hide_index=True, width="stretch",
                 column_config={"seconds": st.column_config.TextColumn(
                     "s per run", help="Each run's seconds on average, once the arm's first run finished")})
    st.button("Cancelling…" if job.cancelled else "Cancel", key="exp_cancel", disabled=job.cancelled,
              on_click=job.cancel,  # before the redraw, so it already says "Cancelling"
              help="Runs not yet started are skipped and a model arm stops at its next model call; the runs "
                   "that finished are kept as the trial.")


def _bar_text(job):
    done = f"Running “{escape_markdown(job.name)}”: {job.done} of {job.total} runs"
    if job.cancelled:
        return f"{done}. Cancelling: waiting for the model call in progress to end…"
    return f"{done}, {time_left_text(job.status.seconds_left())}"


def _arm_rows(job):
    return [{"arm": arm["arm"], "strategy": arm["strategy"], "state": arm["state"],
             "runs": f"{arm['done']} of {arm['total']}" + (f" ({arm['errors']} failed)" if arm["errors"] else ""),
             "seconds": "" if arm["seconds"] is None else f"{arm['seconds']:.2f}"} for arm in job.status.arms()]


NAMED_ARMS = 5
"""Unfinished arms a cancelled trial names; the rest are counted."""


def unfinished_arms(job) -> str:
    """The arms a cancelled trial did not finish, as ``a (1 of 3), b (0 of 3)`` (``and 4 more``)."""
    arms = [f"{arm['arm']} ({arm['done']} of {arm['total']})" for arm in job.status.arms() if arm["state"] != "done"]
    more = f" and {len(arms) - NAMED_ARMS} more" if len(arms) > NAMED_ARMS else ""
    return ", ".join(arms[:NAMED_ARMS]) + more
