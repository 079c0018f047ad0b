"""The demo data in ``sample_data/``: conversations, a soul, skills and a knowledge base."""
import json
from pathlib import Path

from .context import FileProvider, SkillDirectoryProvider, SqliteSearchProvider
from .errors import ConflictError
from .history.session import Session
from .io import import_session, read_export

SAMPLE_DIR = Path(__file__).resolve().parents[1] / "sample_data"
SOUL_PATH = SAMPLE_DIR / "soul.md"
SKILLS_DIR = SAMPLE_DIR / "skills"
KNOWLEDGE_PATH = SAMPLE_DIR / "knowledge.json"
FACTS_PATH = SAMPLE_DIR / "facts.json"
MEMORIES_PATH = SAMPLE_DIR / "memories.json"
LONGTERM_PATH = SAMPLE_DIR / "longterm.json"
LONGTERM_WORKSPACE = "lab"


def sample_files(directory=SAMPLE_DIR / "sessions") -> list[Path]:
    """The session export files of the sample data, sorted by name."""
    return sorted(Path(directory).glob("*.json"))


def load_knowledge(store, *, tenant_id="default", path=KNOWLEDGE_PATH) -> int:
    """Index the sample knowledge entries for ``SqliteSearchProvider``; returns how many."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    provider = SqliteSearchProvider(store, namespace=data["namespace"], tenant_id=tenant_id)
    for key, content in data["entries"].items():
        provider.set(key, content)
    return len(data["entries"])


def load_memories(store, *, tenant_id="default", path=MEMORIES_PATH) -> int:
    """The memory-manager samples: conversations keyed by identity, with statuses, and KV entries.

    Memories that exist already are left alone; KV entries are (re)written. Returns the keys added.
    """
    from .memory.kv import KVStore
    from .memory.manager import Memory

    data = json.loads(Path(path).read_text(encoding="utf-8"))
    added = []
    for sample in data["memories"]:
        memory = Memory(store, agent_id=sample["agent_id"], tenant_id=tenant_id, memory_key=sample["key"])
        if memory.exists():
            continue
        for message in sample["messages"]:
            memory.append(message["role"], message["content"], timestamp=message["timestamp"])
        if sample["status"]:
            memory.set_status(sample["status"])
        added.append(sample["key"])
    for entry in data["kv"]:
        KVStore(store, tenant_id=tenant_id, namespace=entry["namespace"]).set(
            entry["key"], entry["value"], ttl=entry.get("ttl"))
    return added


def load_longterm(store, *, path=LONGTERM_PATH) -> int:
    """The long-term memory samples (global and per-session records); skipped when the workspace
    already holds records. Returns how many were added."""
    from .memory.longterm import LongTermMemory

    data = json.loads(Path(path).read_text(encoding="utf-8"))
    long_term = LongTermMemory(store, workspace=data["workspace"])
    if long_term.records():
        return 0
    for record in data["records"]:
        provenance = {"session_id": record["session_id"], "message_ids": record["message_ids"]} \
            if record.get("message_ids") else None
        long_term.add_record(record["summary"], scope=record["scope"], session_id=record.get("session_id"),
                             body=record.get("body"), tags=record.get("tags", ()),
                             importance=record.get("importance"), provenance=provenance)
    return len(data["records"])


def sample_memory_keys(path=MEMORIES_PATH) -> list[str]:
    """The memory keys the memory-manager samples create."""
    return [m["key"] for m in json.loads(Path(path).read_text(encoding="utf-8"))["memories"]]


def sample_facts(session_id) -> list:
    """The facts a good summary of a sample session keeps (for the fact-survival check), or []."""
    return json.loads(FACTS_PATH.read_text(encoding="utf-8")).get(session_id, [])


def load_samples(store, *, replace=False, directory=SAMPLE_DIR / "sessions") -> list[str]:
    """Import every sample session, the knowledge base and the memory-manager samples; returns the
    session ids imported.

    Sessions that exist already are kept unless ``replace``.
    """
    files = sample_files(directory)
    if not files:
        raise FileNotFoundError(f"no sample sessions (*.json) in {directory}")
    loaded = []
    for path in files:
        try:
            loaded.append(import_session(store, read_export(path), replace=replace).session_id)
        except ConflictError:
            continue
    load_knowledge(store)
    load_memories(store)
    load_longterm(store)
    return loaded


SAMPLE_CONTEXT_LABELS = ("soul", "memory", "todos", "knowledge", "skills")
"""The blocks ``with_sample_context`` gives, in its order."""


def with_sample_context(session) -> Session:
    """Give a session the demo's context blocks: soul, memory, todos, knowledge and skills (the sample
    sessions' own context; ``memorylab.session_context`` decides which sessions get it)."""
    return (
        session
        .with_context("soul", description="Identity", provider=FileProvider(SOUL_PATH))
        .with_context("memory", description="Important facts learned during conversation", max_tokens=1100)
        .with_context("todos", description="Task list: what needs doing and what is done", max_tokens=2000)
        .with_context("knowledge", description="Searchable knowledge base: search it before answering policy questions",
                      provider=SqliteSearchProvider(session.store, tenant_id=session.tenant_id))
        .with_context("skills", description="Skills: activate one when the task matches",
                      provider=SkillDirectoryProvider(SKILLS_DIR))
    )
