"""Context providers. A provider is any object; what it can do decides what the block is.

``get()`` only -> readonly; ``get()`` + ``set(content)`` -> writable; ``get()`` + ``search(query)``
(optionally ``set(key, content)``) -> searchable; ``get()`` + ``load(key)`` -> skills. No base class,
no registration: a user's provider is a small class with two methods.
"""
import inspect
import re
from pathlib import Path

from ..errors import InvalidInputError, NotFoundError
from ..validation import check_identifier

READONLY, WRITABLE, SEARCHABLE, SKILL = "readonly", "writable", "searchable", "skill"
TAGS = {READONLY: "readonly", WRITABLE: "writable", SEARCHABLE: "searchable", SKILL: "loadable"}


def provider_kind(provider) -> str:
    """The block kind a provider's methods imply."""
    if not callable(getattr(provider, "get", None)):
        raise InvalidInputError(f"a context provider needs a get() method; {type(provider).__name__} has none")
    if callable(getattr(provider, "load", None)):
        return SKILL
    if callable(getattr(provider, "search", None)):
        return SEARCHABLE
    if callable(getattr(provider, "set", None)):
        return WRITABLE
    return READONLY


def accepts_keyed_set(provider) -> bool:
    """True when ``provider.set`` takes ``(key, content)``: searchable blocks may index entries."""
    setter = getattr(provider, "set", None)
    if not callable(setter):
        return False
    try:
        parameters = inspect.signature(setter).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in parameters)


class StaticProvider:
    """Fixed text, e.g. an identity written in code."""

    def __init__(self, text):
        self.text = text

    def get(self) -> str:
        return self.text


class FileProvider:
    """The text of a file (a SOUL.md, say), read on every ``get`` so edits show after a refresh.

    Trailing newlines are dropped: files end with one, rendered blocks do not.
    """

    def __init__(self, path, *, encoding="utf-8"):
        self.path = Path(path)
        self.encoding = encoding

    def get(self) -> str:
        if not self.path.is_file():
            return ""
        return self.path.read_text(encoding=self.encoding).rstrip("\n")


class SessionBlockProvider:
    """The default for blocks given no provider: a writable text stored per session in SQLite."""

    def __init__(self, blocks, label):
        self.blocks, self.label = blocks, label

    def get(self) -> str:
        return self.blocks.content(self.label) or ""

    def set(self, content) -> None:
        self.blocks.set_content(self.label, content)


class SqliteSearchProvider:
    """Keyed entries searched with FTS5; the prompt shows only how many there are."""

    def __init__(self, store, *, namespace="knowledge", tenant_id="default", limit=5):
        self.store = store
        self.namespace = check_identifier(namespace, "namespace")
        self.tenant_id = check_identifier(tenant_id, "tenant id")
        self.limit = limit

    def get(self) -> str:
        count = self.store.entries.count(self.tenant_id, self.namespace)
        return f"{count} {'entry' if count == 1 else 'entries'} indexed."

    def search(self, query) -> str:
        hits = self.store.entries.search(self.tenant_id, self.namespace, query, self.limit)
        if not hits:
            return f"No entries match {query!r}."
        return "\n\n".join(f"[{hit['key']}]\n{hit['content']}" for hit in hits)

    def set(self, key, content) -> None:
        self.store.entries.put(self.tenant_id, self.namespace, check_identifier(key, "entry key"), content)

    def delete(self, key) -> bool:
        return self.store.entries.delete(self.tenant_id, self.namespace, key)

    def entries(self) -> list[dict]:
        return self.store.entries.list(self.tenant_id, self.namespace)


_FRONT_MATTER = re.compile(r"\A---\s*\n(.*?)\n---\s*\n", re.DOTALL)


class SkillDirectoryProvider:
    """One markdown file per skill; the catalog lists ``key: description``, bodies load on demand.

    The key is the file name without ``.md``. The description is the ``description:`` line of a
    front-matter block when there is one, else the first non-heading line of the file.
    """

    def __init__(self, path):
        self.path = Path(path)

    def keys(self) -> list[str]:
        if not self.path.is_dir():
            return []
        return sorted(p.stem for p in self.path.glob("*.md") if p.is_file())

    def _file(self, key):
        # Only names from the directory listing are accepted, so "../secrets" can never be read.
        if key not in self.keys():
            raise NotFoundError(f"no skill {key!r}; available: {', '.join(self.keys()) or 'none'}")
        return self.path / f"{key}.md"

    def describe(self, key) -> str:
        text = self._file(key).read_text(encoding="utf-8")
        front = _FRONT_MATTER.match(text)
        if front:
            for line in front.group(1).splitlines():
                name, _, value = line.partition(":")
                if name.strip() == "description" and value.strip():
                    return value.strip()
            text = text[front.end():]
        for line in text.splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                return line
        return ""

    def get(self) -> str:
        return "\n".join(f"- {key}: {self.describe(key)}" for key in self.keys())

    def load(self, key) -> str:
        text = self._file(key).read_text(encoding="utf-8")
        front = _FRONT_MATTER.match(text)
        return text[front.end():] if front else text
