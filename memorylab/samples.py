"""The demo data in ``sample_data/``: conversations, a soul, skills and a knowledge base."""
import json
from pathlib import Path

from .context import FileProvider, SkillDirectoryProvider, SqliteSearchProvider
from .errors import ConflictError
from .io import import_session, read_export

SAMPLE_DIR = Path(__file__).resolve().parent.parent / "sample_data"
SOUL_PATH = SAMPLE_DIR / "soul.md"
SKILLS_DIR = SAMPLE_DIR / "skills"
KNOWLEDGE_PATH = SAMPLE_DIR / "knowledge.json"
FACTS_PATH = SAMPLE_DIR / "facts.json"


def sample_files(directory=SAMPLE_DIR / "sessions"):
    """The session export files of the sample data, sorted by name."""
    return sorted(Path(directory).glob("*.json"))


def load_knowledge(store, *, tenant_id="default", path=KNOWLEDGE_PATH):
    """Index the sample knowledge entries for ``SqliteSearchProvider``; returns how many."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    provider = SqliteSearchProvider(store, namespace=data["namespace"], tenant_id=tenant_id)
    for key, content in data["entries"].items():
        provider.set(key, content)
    return len(data["entries"])


def sample_facts(session_id):
    """The facts a good summary of a sample session keeps (for the fact-survival check), or []."""
    return json.loads(FACTS_PATH.read_text(encoding="utf-8")).get(session_id, [])


def load_samples(store, *, replace=False, directory=SAMPLE_DIR / "sessions"):
    """Import every sample session and the knowledge base; returns the session ids imported.

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
    return loaded


def with_sample_context(session):
    """Give a session the demo's context blocks: soul, memory, todos, knowledge and skills."""
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
