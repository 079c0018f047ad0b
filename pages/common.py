"""What every page shares: the cached store, the selected session and leaf, the sidebar.

Selection lives in ``st.session_state``, so it survives page switches: ``database`` (the target
picked in the sidebar), ``session_ref`` (tenant_id, agent_id, session_id), ``leaf_id`` (None = the
newest leaf) and ``model``. Every page calls ``setup_page`` first, which also makes it runnable on
its own.
"""
import json
import os
from urllib.parse import parse_qsl, urlsplit

import streamlit as st

from memorylab import DamagedRowError, MemoryLabError, Session, Store, load_samples
from memorylab.lab.samples import with_sample_context
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
        current_row = session_row(store, current)
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


def setup_page(title, *, wide=True):
    """Page config, the sidebar and the shared state; returns (store, session or None)."""
    st.set_page_config(page_title=f"{title} · memorylab", page_icon="🧠", layout="wide" if wide else "centered")
    store = open_store()
    st.session_state.setdefault("leaf_id", None)
    st.sidebar.markdown("### 🧠 memorylab")
    st.sidebar.caption(f"Database `{store.path}`")
    _database_picker(store)
    ref = _session_picker(store)
    _model_picker()
    return store, (lab_session(store, ref) if ref else None)


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
    shared by every rerun and page: read-only, callers must not change it or its messages."""
    return _branch_history(branch_key(session, leaf_id), session, leaf_id)


@st.cache_resource(max_entries=8, show_spinner="Reading the branch…")
def _branch_history(key, _session, _leaf_id):
    return _session.get_history(_leaf_id)


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
