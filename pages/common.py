"""What every page shares: the cached store, the selected session and leaf, the sidebar.

Selection lives in ``st.session_state``, so it survives page switches: ``database`` (the target
picked in the sidebar), ``session_ref`` (tenant_id, agent_id, session_id), ``leaf_id`` (None = the
newest leaf) and ``model``; ``editor_versions`` holds what each editing form was loaded from (see
``loaded_version``). Every page calls ``setup_page`` first, which also makes it runnable on its own.
"""
import difflib
import json
import os
import threading
import warnings
from contextlib import contextmanager
from urllib.parse import parse_qsl, urlsplit

import streamlit as st

from memorylab import DamagedRowError, MemoryLabError, NotFoundError, Session, Store, load_samples
from memorylab.errors import DamagedRowWarning
from memorylab.store.compare_and_set import StaleWriteError
from memorylab.samples import with_sample_context
from memorylab.llm.api_hosts import api_base_host
from memorylab.shapes import SessionRows
from memorylab.store import is_postgres_url

PREFERRED_SESSION = "support-order-4471"
PICKER_SIZE = 50
"""Sessions the sidebar lists at once; a larger store is searched instead of listed."""


def database_target():
    """The database the lab shows: the one opened in the sidebar, else ``$MEMORYLAB_DB``, else ``lab.db``."""
    return st.session_state.get("database") or os.environ.get("MEMORYLAB_DB", "lab.db")


def open_store():
    return _open_store(database_target())


@st.cache_resource(show_spinner="Opening the lab database…")
def _open_store(target):
    """One Store per database for the whole server. A new SQLite file gets the sample data; a
    PostgreSQL database is shared, so it only gets them when asked."""
    store = Store(target)
    if not is_postgres_url(target) and not store.sessions.count():
        load_samples(store)
    return store


def _has_password(target):
    parts = urlsplit(target)
    return bool(parts.password) or any(key == "password" for key, _ in parse_qsl(parts.query))


def _database_picker(store):
    """Switch the lab to another SQLite file or a PostgreSQL URL; a failure keeps the current one."""
    with st.sidebar.expander("Open another database", expanded=False):
        # Cleared on submit: a URL typed with a password in it does not stay on the screen.
        with st.form("open_database", border=False, clear_on_submit=True):
            typed = st.text_input(
                "SQLite file or PostgreSQL URL", placeholder="lab.db or postgresql://user@host/db",
                help="A PostgreSQL password comes from PGPASSWORD or ~/.pgpass, never from this box.")
            opened = st.form_submit_button("Open")
        typed = typed.strip()
        if not opened or not typed:
            return
        if is_postgres_url(typed) and _has_password(typed):
            st.error("Leave the password out of the URL: set PGPASSWORD or add it to ~/.pgpass, which the "
                     "lab reads without ever showing it. The current database stays open.")
            return
        try:
            _open_store(typed)
        except MemoryLabError as error:
            st.error(f"Could not open it, so the current database stays open: {error}")
            return
        st.session_state["database"] = typed
        st.session_state.pop("session_ref", None)
        st.session_state["leaf_id"] = None
        st.rerun()


def lab_session(store, ref):
    """The selected session with the demo's context blocks and a persisted frozen prompt."""
    tenant_id, agent_id, session_id = ref
    session = Session.open(store, session_id, tenant_id=tenant_id, agent_id=agent_id)
    return with_sample_context(session).with_cached_prompt()


def _ref(row):
    return (row["tenant_id"], row["agent_id"], row["session_id"])


def select_session(ref):
    """Make ``ref`` the session every page shows, starting at its newest leaf."""
    st.session_state["session_ref"] = ref
    st.session_state["leaf_id"] = None


def select_leaf(leaf_id):
    st.session_state["leaf_id"] = leaf_id


def session_row(store, ref):
    """The listing row of one session, or None when it is gone."""
    rows = store.sessions.list(tenant_id=ref[0], agent_id=ref[1], session_id=ref[2])
    return rows[0] if rows else None


def _session_picker(store):
    """The sidebar's session choice. A store with more sessions than ``PICKER_SIZE`` gets a search box:
    the list shows the newest matches (filtered and paged in SQL), plus the session already chosen."""
    total = store.sessions.count()
    if not total:
        st.sidebar.info("No sessions yet.")
        return None
    search = ""
    if total > PICKER_SIZE:
        search = st.sidebar.text_input("Find a session", key="session_search", placeholder="id or title",
                                       help=f"{total:,} sessions: type part of an id or a title, then Enter.")
    rows = store.sessions.list(search=search.strip() or None, limit=PICKER_SIZE)
    current = st.session_state.get("session_ref")
    current_row = next((row for row in rows if _ref(row) == current), None)
    if current_row is None and current is not None:
        current_row = session_row(store, current) or session_gone(current, rows)
    if current_row is None:
        current_row = session_row(store, ("default", "support-bot", PREFERRED_SESSION)) or (
            rows or store.sessions.list(limit=1))[0]
        select_session(_ref(current_row))
        current = _ref(current_row)
    if current_row not in rows:
        rows = SessionRows([current_row, *rows])
    if search and len(rows) > 1:
        st.sidebar.caption(f"{store.sessions.count(search=search.strip()):,} of {total:,} sessions match.")

    def describe(row):
        title = row["metadata"].get("title") or row["session_id"]
        return (f"{title} · {row['message_count']} msgs · {row['branch_count']} branches · {row['tokens']:,} tok"
                f" [{row['session_id']}]")

    # Options are plain strings (AppTest and the browser both handle them); each maps back to a ref.
    labels = {describe(row): _ref(row) for row in rows}
    names = list(labels)
    choice = st.sidebar.selectbox("Session", names, index=list(labels.values()).index(current),
                                  help="Every page shows this session. Its id, agent and tenant are below.")
    chosen = labels[choice]
    if chosen != current:
        select_session(chosen)
    st.sidebar.caption(f"`{chosen[2]}` · agent `{chosen[1]}` · tenant `{chosen[0]}`")
    return chosen


@st.cache_data(ttl=30, show_spinner=False)
def _usable_models():
    """The picker's choices; probing local servers is cheap but not free, so once per 30 s."""
    from memorylab.llm.models import usable_models

    return usable_models()


def _model_picker():
    from memorylab.llm.models import DEFAULT_LOCAL_MODEL

    models = _usable_models()
    usable = [m for m in models if m["usable"]]
    options = [m["model"] for m in usable] or [DEFAULT_LOCAL_MODEL]
    current = st.session_state.get("model")
    if current not in options:
        current = st.session_state["model"] = options[0]
    labels = {m["model"]: m["label"] for m in models}
    names = {labels.get(model, model): model for model in options}
    choice = st.sidebar.selectbox(
        "Model", list(names), index=options.index(current),
        help="Models with a key in the environment, a reachable local server, or the embedded one.",
    )
    st.session_state["model"] = names[choice]
    if st.session_state["model"] == DEFAULT_LOCAL_MODEL:
        st.sidebar.caption("SmolLM2-135M runs offline on this machine. It is tiny: good enough to prove "
                           "the loop, not to write good summaries. Set an API key to use a stronger model.")
    with st.sidebar.expander("Other models"):
        custom = st.text_input("Any litellm model string", placeholder="e.g. ollama/llama3.2 or gpt-4o-mini",
                               help="Keys come from the environment; they are never stored or shown.")
        if custom.strip():
            st.session_state["model"] = custom.strip()
        raw = st.text_area(
            "Completion arguments (JSON)", json.dumps(completion_settings()),
            help='Passed to litellm.completion for chat and summaries, e.g. {"temperature": 0.2, '
                 '"max_tokens": 256, "api_base": "http://localhost:8000/v1"}. Never put keys here.')
        try:
            parsed = json.loads(raw or "{}")
            if not isinstance(parsed, dict):
                raise ValueError("it must be a JSON object")
            st.session_state["completion_kwargs"] = parsed
        except ValueError as error:
            st.error(f"Ignored: not a JSON object ({error})")
        for model in models:
            if not model["usable"]:
                st.caption(f"{model['label']}: {model['reason']}")


def completion_settings():
    """Extra ``litellm.completion`` arguments for chat and summaries, as set in the sidebar."""
    return dict(st.session_state.get("completion_kwargs") or {})


def sidebar_api_hosts():
    """The host of the sidebar's ``api_base``: the lab's user named it, so experiments may call it too
    (besides those in MEMORYLAB_ALLOWED_API_HOSTS)."""
    host = api_base_host(completion_settings().get("api_base"))
    return [host] if host else []


def session_gone(ref, rows):
    """The selected session was deleted (by another process or person) while a page showed it: say
    so, offer the others, and stop the page before it writes anything."""
    choices = {f"{row['metadata'].get('title') or row['session_id']} [{row['session_id']}]": _ref(row)
               for row in rows if _ref(row) != ref}
    choice = st.sidebar.selectbox("Session", list(choices), index=None, placeholder="Pick another session",
                                  help="The session selected before no longer exists.")
    if choice is not None:
        select_session(choices[choice])
        st.rerun()
    st.error(f"Session `{ref[2]}` (agent `{ref[1]}`, tenant `{ref[0]}`) no longer exists: it was deleted while "
             "this page was open. Nothing was written. Pick another session in the sidebar.", icon="🗑️")
    st.stop()


def setup_page(title, *, wide=True):
    """Page config, the sidebar and the shared state; returns (store, session or None). A page whose
    selected session was deleted stops here (``session_gone``); damaged rows the page's reads skip
    are named in a banner at its top (``report_damaged_rows``)."""
    st.set_page_config(page_title=f"{title} · memorylab", page_icon="🧠", layout="wide" if wide else "centered")
    store = open_store()
    report_damaged_rows(store)
    st.session_state.setdefault("leaf_id", None)
    st.sidebar.markdown("### 🧠 memorylab")
    st.sidebar.caption(f"Database `{store.path}`")
    _database_picker(store)
    ref = _session_picker(store)
    _model_picker()
    if ref is None:
        return store, None
    try:
        return store, lab_session(store, ref)
    except NotFoundError:  # deleted between the picker's read and this one
        session_gone(ref, store.sessions.list(limit=PICKER_SIZE))


def session_page(title, caption=None):
    """``setup_page`` plus the title and caption; stops the page when there is no session to show."""
    store, session = setup_page(title)
    st.title(title)
    if caption:
        st.caption(caption)
    if session is None:
        offer_samples(store)
    return store, session


def offer_samples(store):
    """What an empty database shows: how to fill it, and a button for the sample data. Stops the page."""
    st.info(f"`{store.path}` holds no session yet. Load the sample conversations here, run "
            f"`memorylab --db {store.path} demo`, or import your agent's memory on the Sessions page or with "
            f"`memorylab --db {store.path} import PATH`.")
    if st.button("Load the sample conversations", type="primary"):
        with st.spinner("Loading the samples…"):
            load_samples(store)
        st.rerun()
    st.stop()


# -- damaged rows: one banner per page -------------------------------------------------------------

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


# -- editing forms: what each was loaded from ------------------------------------------------------

EDITOR_VERSIONS = "editor_versions"


def table_key(name, ids):
    """The widget key of a selectable table that lists the rows ``ids``, new whenever they change (a
    filter, a delete, a list reordered by someone else's write): a selection is row numbers, which
    would otherwise pick whatever moved into those rows. Unchanged rows keep ``name`` and the selection."""
    ids = list(ids)
    if st.session_state.get(f"{name}:ids", ids) != ids:
        st.session_state[f"{name}:version"] = st.session_state.get(f"{name}:version", 0) + 1
    st.session_state[f"{name}:ids"] = ids
    version = st.session_state.get(f"{name}:version", 0)
    return name if not version else f"{name}:{version}"


def selected_rows(event, rows) -> list:
    """The items of ``rows`` selected in a table's selection ``event``."""
    return [rows[i] for i in (event.selection.rows if event else []) if i < len(rows)]


def loaded_version(editor, subject, version, values):
    """The version of what the form ``editor`` edits when its widgets were filled. They are filled
    with ``values`` ({widget key: value}) when first drawn, when they show another ``subject`` (a
    session's block, another entry), when a page switch dropped their state and after
    ``reload_editor``; never while someone types, so a save sends the version its text came from."""
    loaded = st.session_state.setdefault(EDITOR_VERSIONS, {}).get(editor)
    if loaded is None or loaded[0] != subject or any(key not in st.session_state for key in values):
        st.session_state.update(values)
        loaded = st.session_state[EDITOR_VERSIONS][editor] = (subject, version)
    return loaded[1]


def reload_editor(editor):
    """Fill the form from what is stored on the next run (after a save too: that is the version it
    holds then, whoever wrote last)."""
    st.session_state.get(EDITOR_VERSIONS, {}).pop(editor, None)
    st.session_state.pop(f"shown:{editor}", None)
    st.rerun()


def rebase_editor(editor, version):
    """Keep what the form ``editor`` holds but count it as edited from ``version`` (the stored one a
    refused save reported): saving again then replaces that version on purpose."""
    subject, _ = st.session_state[EDITOR_VERSIONS][editor]
    st.session_state[EDITOR_VERSIONS][editor] = (subject, version)


def guarded_save(editor, write, done):
    """Run ``write()``, a compare-and-set write. True when it was refused because the stored version
    moved on; False after saying why it was refused otherwise; on success the form is filled again
    from what is stored (``reload_editor``) after the toast ``done``."""
    try:
        write()
    except StaleWriteError:
        return True
    except (MemoryLabError, ValueError) as error:
        st.error(f"Not saved: {error}")
        return False
    st.toast(done)
    reload_editor(editor)


def changed_since_loaded(editor, what, *, stored, version, yours, overwrite, refused=False, reload=None):
    """What a form shows while the stored ``version`` is not the one it was loaded from (someone else
    saved): both versions as text (``stored`` None: removed), their diff, and the choice to reload
    (take the stored one: ``reload()``, by default ``reload_editor``) or overwrite it with yours on
    purpose. ``overwrite(expected)`` writes over the version shown on the screen when the button was
    pressed, so a version nobody saw is never overwritten: it returns True when that one changed too,
    and the page shows the newest."""
    if refused:
        st.error(f"Not saved: {what} changed since you loaded it. Both versions are below; nothing was written.")
    else:
        st.warning(f"{what} changed since you loaded it: someone else saved it. Saving yours is refused "
                   "until you reload or overwrite.")
    shown = st.session_state.get(f"shown:{editor}", version)
    st.session_state[f"shown:{editor}"] = version
    diff = "\n".join(difflib.unified_diff((stored or "").splitlines(), yours.splitlines(), "stored now", "yours",
                                          lineterm=""))
    diff_tab, stored_tab, yours_tab = st.tabs(["Diff", "Stored now", "Yours"])
    diff_tab.code(diff or "(the same text)", language="diff")
    stored_tab.code("(removed)" if stored is None else stored, language=None, wrap_lines=True)
    yours_tab.code(yours, language=None, wrap_lines=True)
    take, keep = st.columns(2)
    if take.button("Reload: take the stored one", key=f"{editor}:reload", width="stretch"):
        (reload or reload_editor)(editor)
    if keep.button("Overwrite it with mine", key=f"{editor}:overwrite", width="stretch",
                   help="Save yours over the stored version shown here.") and overwrite(shown):
        st.rerun()


def active_leaf(session):
    """The selected leaf when it belongs to ``session``, else the newest leaf. A leaf whose row is
    damaged is still a leaf: its history reads without it, and the page says so."""
    leaf_id = st.session_state.get("leaf_id")
    try:
        if leaf_id and session.get_message(leaf_id) is not None:
            return leaf_id
        latest = session.get_latest_leaf()
    except DamagedRowError as error:
        st.warning(f"{error}. The history below leaves that message out.")
        return leaf_id or session.get_latest_leaf_id()
    return latest["id"] if latest else None


def branch_key(session, leaf_id):
    """What names the overlaid history of a branch between reruns: the database, the session, the
    leaf, and what changes when the session gains a message (its newest one), loses one (its update
    time) or gains or loses an overlay. Three one-row reads, so every rerun can afford it."""
    overlays = tuple(overlay["id"] for overlay in session.get_compactions())
    return (database_target(), session.tenant_id, session.agent_id, session.session_id, leaf_id,
            session.get_latest_leaf_id(), session.info["updated_at"], overlays)


def branch_history(session, leaf_id):
    """The overlaid history of the branch ending at ``leaf_id``, read once per ``branch_key`` and
    shared by every rerun and page: read-only, callers must not change it or its messages. Rows the
    read skipped are named in the page's banner on every run, not only the one that read them."""
    history, skipped = _branch_history(branch_key(session, leaf_id), session, leaf_id)
    for text in skipped:
        damaged_row_skipped(text)
    return history


@st.cache_resource(max_entries=8, show_spinner="Reading the branch…")
def _branch_history(key, _session, _leaf_id):
    with recording_damaged_rows() as skipped:
        return _session.get_history(_leaf_id), skipped


_MARKDOWN_SPECIALS = set("\\`*_{}[]()#+-.!|<>~$:")


def escape_markdown(text):
    """User text shown through st.markdown: every markdown character becomes a literal."""
    return "".join(f"\\{c}" if c in _MARKDOWN_SPECIALS else c for c in text)


def link_to(page, label, icon):
    """A link to another page of the app; a hint instead when this page runs on its own."""
    try:
        st.page_link(page, label=label, icon=icon)
    except st.errors.StreamlitAPIException:
        st.caption(f"{icon} {label}: open it from the app's navigation.")


def open_message(ref, message_id, session, page="tree"):
    """Select the branch that shows ``message_id`` and go to the Tree or the Chat page; the Chat page
    draws its branch back to that message (``focus_message``) however long the branch is."""
    select_session(ref)
    select_leaf(session.get_leaf_for(message_id))
    if page == "chat":
        st.session_state["focus_message"] = message_id
    try:
        st.switch_page(f"pages/{page}.py")
    except st.errors.StreamlitAPIException:  # the page runs on its own, outside the app's navigation
        st.info(f"Selected. Open the {page.capitalize()} page to see the message on its branch.")


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
