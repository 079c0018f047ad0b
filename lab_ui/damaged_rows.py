"""Damaged rows a page's reads skip, named in one banner at the top of the page, not the server log."""
import threading
import warnings
from contextlib import contextmanager

import streamlit as st

from memorylab.errors import DamagedRowWarning

from .escaping import escape_markdown

_page_run = threading.local()
"""The page run on this thread (Streamlit runs each session's script on a thread of its own): its
banner, the damaged rows it named, and the reads recording them for a cache."""


def report_damaged_rows(store):
    """Name every row a read skips during this page run (a ``DamagedRowWarning``) in one banner at the
    top of the page, instead of the server log."""
    warnings.filterwarnings("always", category=DamagedRowWarning)  # every run shows them, not the first
    if warnings.showwarning is not _show_warning:  # again after a warnings.catch_warnings put its own back
        _show_warning.passed_on = warnings.showwarning
        warnings.showwarning = _show_warning
    _page_run.banner, _page_run.skipped, _page_run.recorders = st.empty(), [], []
    _page_run.database = store.path


def _show_warning(message, category, filename, lineno, file=None, line=None):
    if issubclass(category, DamagedRowWarning) and getattr(_page_run, "banner", None) is not None:
        damaged_row_skipped(str(message))
    else:
        _show_warning.passed_on(message, category, filename, lineno, file, line)


def damaged_row_skipped(text):
    """Add one skipped row to the page's banner, or to the cached read recording them (it may draw
    nothing: Streamlit would replay the drawing on a cache hit, outside the page's banner)."""
    if _page_run.recorders:
        _page_run.recorders[-1].append(text)
        return
    if text in _page_run.skipped:
        return
    _page_run.skipped.append(text)
    lines = "\n".join(f"- {escape_markdown(skipped)}" for skipped in _page_run.skipped)
    _page_run.banner.warning(
        f"**Damaged rows were skipped here; everything else is shown.**\n{lines}\n\n"
        f"`memorylab --db {_page_run.database} check` lists every damaged row, and "
        f"`memorylab --db {_page_run.database} check --repair` moves them aside (nothing is deleted).", icon="🩹")


@contextmanager
def recording_damaged_rows():
    """The damaged rows skipped inside the block, for a cached read to name again on every run."""
    skipped = []
    recorders = getattr(_page_run, "recorders", None)
    if recorders is None:
        yield skipped
        return
    recorders.append(skipped)
    try:
        yield skipped
    finally:
        recorders.remove(skipped)


def named_again(result_and_skipped):
    """The result of a cached read made inside ``recording_damaged_rows`` (``(result, skipped)``), the rows
    it skipped named in this run's banner: a cache hit reads nothing, so it would name none."""
    result, skipped = result_and_skipped
    for text in skipped:
        damaged_row_skipped(text)
    return result
