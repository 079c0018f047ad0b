"""The context a session runs with: its own, as it recorded it, and the sample data's only on purpose.

A session's own context is what it holds: the blocks stored in its row (an export's
``context_blocks``, or what a chat wrote there) and the system messages of its history; no other
system prompt, no tools but the ones its own blocks make, no long-term memory. An imported session
recorded no more than that. A sample session (one of ``sample_data/sessions``, or of the memory
samples, as ``load_samples`` stores them) is the exception: the sample data's blocks
(``with_sample_context``) are its own. Any session can be given the sample data's blocks
deliberately (``lab_context=True``).
"""
import json
from dataclasses import dataclass
from functools import lru_cache

from .context.providers import (
    READONLY,
    FileProvider,
    SessionBlockProvider,
    SkillDirectoryProvider,
    SqliteSearchProvider,
)
from .history.budget import split_rendered_prompt
from .history.session import Session
from .samples import MEMORIES_PATH, SAMPLE_CONTEXT_LABELS, SAMPLE_DIR, sample_files, with_sample_context

SAMPLE, IMPORTED, RECORDED = "sample", "imported", "recorded"


@dataclass(frozen=True)
class SessionOrigin:
    """Where a session came from: ``kind`` is ``SAMPLE``, ``IMPORTED`` or ``RECORDED`` (written through
    memorylab itself); ``description`` says it in a sentence for people."""

    kind: str
    description: str

    @property
    def is_sample(self) -> bool:
        return self.kind == SAMPLE


@lru_cache(maxsize=1)
def _sample_sessions() -> dict:
    """{(agent id, session id): the sample file it comes from} of the sample conversations and the
    memory-manager samples, read once."""
    found = {}
    for path in sample_files():
        header = json.loads(path.read_text(encoding="utf-8"))["session"]
        found[(header["agent_id"], header["id"])] = f"sample_data/sessions/{path.name}"
    for memory in json.loads(MEMORIES_PATH.read_text(encoding="utf-8"))["memories"]:
        found[(memory["agent_id"], memory["key"])] = "sample_data/memories.json"
    return found


def session_origin(info) -> SessionOrigin:
    """The origin of a session from its ``info`` (or a ``store.sessions.list`` row): its ids and metadata."""
    sample = _sample_sessions().get((info["agent_id"], info["session_id"]))
    if sample and info["tenant_id"] == "default":
        return SessionOrigin(SAMPLE, f"one of the sample conversations ({sample})")
    source = (info.get("metadata") or {}).get("source")
    if isinstance(source, dict) and source.get("format"):
        return SessionOrigin(IMPORTED, f"imported from {_format_label(source['format'])}"
                                       + (f" ({source['file']})" if source.get("file") else ""))
    return SessionOrigin(RECORDED, "recorded through memorylab")


def _format_label(name) -> str:
    from .importers import FORMATS  # the importers are many modules: loaded only for an imported session

    known = FORMATS.get(name)
    return known.label if known else f"a {name} source"


def with_session_context(session: Session, *, lab_context=None) -> Session:
    """``session`` with its own blocks, plus the sample data's when ``lab_context`` (default: only for
    a sample session), and a persisted frozen prompt. A stored frozen prompt whose blocks are not the
    ones these render was frozen for another context (the lab's blocks attached or taken off, say):
    it is rendered again. One whose blocks' text changed since stays frozen until refreshed."""
    if session_origin(session.info).is_sample if lab_context is None else lab_context:
        with_sample_context(session)
    configured = {config.label for config in session.context.configs}
    for block in session.storage.blocks.all():
        if block["label"] not in configured:  # the sample's memory and todos blocks keep their budgets
            session.with_context(block["label"])
    session.with_frozen_prompt_store()
    stored = session.context.frozen_prompt_store.get()
    if stored is not None and _frozen_for_another_context(session, stored):
        session.refresh_system_prompt()
    return session


def _frozen_for_another_context(session, stored) -> bool:
    """Whether ``stored``'s sections are not the ones the configured blocks render. Their labels tell,
    reading only the readonly blocks (not the skills folder, the search index or the stored blocks on
    every page run); a full render settles a mismatch, as a block's text may hold a section rule."""
    sections = _sections(stored)
    return sections != _rendered_labels(session) and sections != _sections(session.render_system_prompt())


def _sections(prompt) -> list[str]:
    return [label for label, _ in split_rendered_prompt(prompt)]


def _rendered_labels(session) -> list[str]:
    """The section labels ``render_system_prompt`` gives the configured blocks, as the prompt spells
    them: every block but an empty readonly one."""
    return [config.label.lower() for config in session.context.configs
            if config.kind != READONLY or (config.provider.get() or "").strip()]


def block_sources(session: Session, *, lab_context: bool) -> dict[str, str]:
    """{block label: where the block comes from}, for people."""
    sample_labels = set(SAMPLE_CONTEXT_LABELS) if lab_context else set()
    return {config.label: ("the lab's sample context: " if config.label in sample_labels else "this session: ")
            + _provider_source(config.provider) for config in session.context.configs}


def _provider_source(provider) -> str:
    if isinstance(provider, SessionBlockProvider):
        return "text stored with the session"
    if isinstance(provider, FileProvider):
        return f"file {_shown_path(provider.path)}"
    if isinstance(provider, SkillDirectoryProvider):
        return f"skills folder {_shown_path(provider.path)}"
    if isinstance(provider, SqliteSearchProvider):
        return f"search index {provider.namespace!r} of the database"
    return f"provider {type(provider).__name__}"


def _shown_path(path) -> str:
    """A sample data file as ``sample_data/...``; any other path as it is."""
    return str(path.relative_to(SAMPLE_DIR.parent) if path.is_relative_to(SAMPLE_DIR) else path)


def request_sources(session: Session, rows, *, lab_context: bool) -> list[dict]:
    """``rows`` of a request breakdown (``prompt_and_tool_rows``, ``HistoryBudget.rows``) with a
    ``source`` each: the block a prompt section or a tool schema comes from, or the branch a message
    row comes from."""
    blocks = block_sources(session, lab_context=lab_context)
    schemas = {tool["function"]["name"]: tool["function"] for tool in session.openai_tools()}

    def source(row):
        if row["part"] == "system prompt":
            return blocks.get(row["item"], "the frozen system prompt")
        if row["part"] == "tool schemas":
            labels = schemas[row["item"]]["parameters"]["properties"]["label"]["enum"] if row["item"] in schemas else []
            return f"made for the block{'s' if len(labels) > 1 else ''} {', '.join(labels)}"
        if row["part"] == "summaries":
            return "a compaction summary on this branch (its originals are kept)"
        return "this session's messages on this branch"

    return [{**row, "source": source(row)} for row in rows]
