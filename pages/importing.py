"""The Sessions page's import panel: upload another system's memory, preview it, import it."""
import tempfile
from pathlib import Path

import streamlit as st

from memorylab import ImportFormatError, MemoryLabError
from memorylab.importers import FORMATS, detect_format, import_source

from pages.common import escape_markdown, select_session

MAX_UPLOAD_MB = 200
"""The largest file the panel takes (Streamlit's own upload limit is the same by default)."""


def import_panel(store, *, expanded):
    """The panel, and what the last import added (once, after the rerun that shows its sessions)."""
    done = st.session_state.pop("import_done", None)
    if done:
        summary, *sessions = done.splitlines()
        st.success("\n".join([escape_markdown(summary), ""] + [f"- {escape_markdown(line.strip())}" for line in sessions]))
    with st.expander("Import agent memory", icon="📥", expanded=expanded):
        st.caption("Bring in conversations from " + "; ".join(f.label for f in FORMATS.values())
                   + f". The format is told by the file's content. Up to {MAX_UPLOAD_MB} MB here; larger files "
                   "import from the command line: `memorylab import PATH`. Importing a file again adds only "
                   "what it gained since.")
        upload = st.file_uploader("File to import", key="import_file", max_upload_size=MAX_UPLOAD_MB)
        if upload is None:
            return
        path = _saved_upload(upload)
        try:
            source_format = detect_format(path)
        except ImportFormatError as error:
            st.error(_named(error, path, upload.name))
            return
        agent_id = st.text_input("File the sessions under agent", value=source_format.agent_id, key="import_agent",
                                 help="Sessions keep their ids from the source; the agent groups them in the lab.")
        try:
            preview = _preview(store, path, upload.name, source_format.name, agent_id)
        except MemoryLabError as error:
            st.error(_named(error, path, upload.name))
            return
        overlays = f", {preview.overlays_added:,} new compaction overlay(s)" if preview.overlays_added else ""
        st.markdown(f"**{source_format.label}**: {len(preview.sessions)} session(s), {preview.messages_found:,} "
                    f"messages, {preview.messages_added:,} of them new{overlays}.")
        st.dataframe(_preview_rows(preview), hide_index=True, width="stretch")
        if not preview.messages_added and not preview.overlays_added:
            st.info("Everything in this file is in the store already.")
            return
        if st.button(f"Import {preview.messages_added:,} messages", type="primary", key="import_run"):
            _run_import(store, path, upload.name, source_format.name, agent_id, preview.messages_found)


def _saved_upload(upload):
    """The upload as a file the importers can open (SQLite sources need a real file), written once."""
    saved = st.session_state.get("import_saved")
    if saved and saved[0] == upload.file_id and Path(saved[1]).exists():
        return saved[1]
    directory = Path(tempfile.mkdtemp(prefix="memorylab-import-"))
    path = directory / Path(upload.name).name
    path.write_bytes(upload.getbuffer())
    st.session_state["import_saved"] = (upload.file_id, str(path))
    return str(path)


def _preview(store, path, name, format_name, agent_id):
    """A dry run, kept until the file, the agent or the store's contents change."""
    key = (path, agent_id, store.sessions.count())
    cached = st.session_state.get("import_preview")
    if cached and cached[0] == key:
        return cached[1]
    with st.spinner("Reading the file…"):
        report = import_source(store, path, format=format_name, agent_id=agent_id or None, dry_run=True, name=name)
    st.session_state["import_preview"] = (key, report)
    return report


def _preview_rows(report):
    return [
        {"session": s.session_id, "title": s.title or "", "status": s.status, "messages": s.messages_found,
         "new messages": s.messages_added, "branches": s.branches, "overlays": s.overlays_found}
        for s in report.sessions
    ]


def _run_import(store, path, name, format_name, agent_id, total):
    bar = st.progress(0.0, text="Importing…")

    def advance(done):
        bar.progress(min(done / max(total, 1), 1.0), text=f"Importing… {done:,} of {total:,} messages read")

    try:
        report = import_source(store, path, format=format_name, agent_id=agent_id or None, progress=advance,
                               name=name)
    except MemoryLabError as error:
        bar.empty()
        st.error(f"{_named(error, path, name)} Nothing was imported.")
        return
    st.session_state.pop("import_preview", None)
    st.session_state["import_done"] = str(report)
    if report.sessions:
        first = report.sessions[0]
        select_session(("default", first.agent_id, first.session_id))
    st.rerun()


def _named(error, path, name):
    """The error with the upload's temporary path replaced by the name the user knows."""
    return str(error).replace(str(path), name)
