"""A background job's progress bar and Cancel button, redrawn on their own while it runs."""
import streamlit as st

JOB_POLL_SECONDS = 0.5


@st.fragment(run_every=JOB_POLL_SECONDS)
def job_progress(job, describe, *, cancel_key, cancel_help, cancel_label="Cancel"):
    """A background job's bar and Cancel (``memorylab.jobs.BackgroundJob``), redrawn on their own until
    it ends, then the whole page once. ``describe(job)`` is the bar's text."""
    if not job.running:
        st.rerun()
    st.progress(job.done / max(job.total, 1), text=describe(job) + (" (cancelling…)" if job.cancelled else ""))
    if st.button(cancel_label, key=cancel_key, disabled=job.cancelled, help=cancel_help):
        job.cancel()
