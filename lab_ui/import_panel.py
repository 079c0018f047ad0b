"""The Sessions page's import panel: upload another system's memory, preview it, import it."""
import shutil
import tempfile
from pathlib import Path

import streamlit as st

from memorylab import ImportFormatError, MemoryLabError
from memorylab.importers import FORMATS, detect_format, import_source

from .escaping import escape_markdown
from .selection import select_session

MAX_UPLOAD_MB = 200
"""The largest file the panel takes (Streamlit's own upload limit is the same by default)."""


def import_panel(store, *, expanded):
    """The panel, and what the last import added (once, after the rerun that shows its sessions)."""
    done = st.session_state.pop("import_done", None)
    if done:
        summary, *sessions = done.splitlines()
        lines = [f"- {escape_markdown(line.strip())}" for line in sessions]
        st.success("\n".join([escape_markdown(summary), ""] + lines))
    with st.expander("Import agent memory", icon="📥", expanded=expanded):
        st.caption("Bring in conversations from " + "; ".join(f.label for f in FORMATS.values())
                   + f". The format is told by the file's content. Up to {MAX_UPLOAD_MB} MB here; larger files "
                   "import from the command line: `memorylab import PATH`. Importing a file again adds only "
                   "what it gained since.")
        upload = st.file_uploader("File to import", key="import_file", max_upload_size=MAX_UPLOAD_MB)
        if upload is None:
            return
        on_disk = UploadOnDisk(upload)
        try:
            _offer_import(store, upload, on_disk)
        finally:
            on_disk.remove()


def _offer_import(store, upload, on_disk):
    """The upload's format, its preview and the import button; the file is read only when it has to be."""
    try:
        source_format = _detected_format(upload, on_disk)
    except ImportFormatError as error:
        st.error(on_disk.named(error))
        return
    agent_id = st.text_input("File the sessions under agent", value=source_format.agent_id, key="import_agent",
                             placeholder="the agent the file names",
                             help="Sessions keep their ids from the source; the agent groups them in the lab.")
    try:
        preview = _preview(store, upload, on_disk, source_format.name, agent_id)
    except MemoryLabError as error:
        st.error(on_disk.named(error))
        return
    overlays = f", {preview.overlays_added:,} new compaction overlay(s)" if preview.overlays_added else ""
    st.markdown(f"**{source_format.label}**: {len(preview.sessions)} session(s), {preview.messages_found:,} "
                f"messages, {preview.messages_added:,} of them new{overlays}.")
    st.dataframe(_preview_rows(preview), hide_index=True, width="stretch")
    if not preview.messages_added and not preview.overlays_added:
        st.info("Everything in this file is in the store already.")
        return
    if st.button(f"Import {preview.messages_added:,} messages", type="primary", key="import_run"):
        _run_import(store, upload, on_disk, source_format.name, agent_id, preview.messages_found)


class UploadOnDisk:
    """The upload as a file the importers can open (SQLite sources need a real file): written on first use,
    deleted by ``remove()``, so nothing of an upload outlives the script run that read it, whatever happened."""

    def __init__(self, upload):
        self.upload = upload
        self._directory = None

    @property
    def path(self) -> str:
        if self._directory is None:
            self._directory = Path(tempfile.mkdtemp(prefix="memorylab-import-"))
            (self._directory / self._name()).write_bytes(self.upload.getbuffer())
        return str(self._directory / self._name())

    def _name(self):
        return Path(self.upload.name).name

    def named(self, error) -> str:
        """The error with the temporary path replaced by the name the user knows."""
        text = str(error)
        return text.replace(str(self._directory / self._name()), self.upload.name) if self._directory else text

    def remove(self):
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)
            self._directory = None


def _detected_format(upload, on_disk):
    """The upload's format, told once per upload."""
    cached = st.session_state.get("import_format")
    if cached and cached[0] == upload.file_id:
        return cached[1]
    source_format = detect_format(on_disk.path)
    st.session_state["import_format"] = (upload.file_id, source_format)
    return source_format


def _preview(store, upload, on_disk, format_name, agent_id):
    """A dry run, kept until the file, the agent or the store's contents change."""
    key = (upload.file_id, agent_id, store.sessions.count())
    cached = st.session_state.get("import_preview")
    if cached and cached[0] == key:
        return cached[1]
    with st.spinner("Reading the file…"):
        report = import_source(store, on_disk.path, format=format_name, agent_id=agent_id or None, dry_run=True,
                               name=upload.name)
    st.session_state["import_preview"] = (key, report)
    return report


def _preview_rows(report):
    return [
        {"session": s.session_id, "title": s.title or "", "status": s.status, "messages": s.messages_found,
         "new messages": s.messages_added, "branches": s.branches, "overlays": s.overlays_found}
        for s in report.sessions
    ]


def _run_import(store, upload, on_disk, format_name, agent_id, total):
    bar = st.progress(0.0, text="Importing…")

    def advance(done):
        bar.progress(min(done / max(total, 1), 1.0), text=f"Importing… {done:,} of {total:,} messages read")

    try:
        report = import_source(store, on_disk.path, format=format_name, agent_id=agent_id or None,
                               progress=advance, name=upload.name)
    except MemoryLabError as error:
        bar.empty()
        st.error(f"{on_disk.named(error)} Nothing was imported.")
        return
    st.session_state.pop("import_preview", None)
    st.session_state["import_done"] = str(report)
    if report.sessions:
        first = report.sessions[0]
        select_session(("default", first.agent_id, first.session_id))
    st.rerun()

