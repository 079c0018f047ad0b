"""The context blocks of one session: configuration, reads, budget-checked writes, the frozen prompt."""
import re
from dataclasses import dataclass

from ..errors import BlockBudgetError, ConflictError, InvalidInputError, NotFoundError, ReadOnlyBlockError
from ..store.compare_and_set import check_expected
from ..store.context import text_version
from ..tokens import estimate_string_tokens
from ..validation import check_integer
from .providers import READONLY, SEARCHABLE, SKILL, WRITABLE, SessionBlockProvider, accepts_keyed_set, provider_kind
from .render import render_system_prompt

_LABEL = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")


@dataclass(frozen=True)
class BlockConfig:
    label: str
    description: str | None
    max_tokens: int | None
    provider: object
    kind: str


class FrozenPromptStore:
    """Keeps the frozen prompt in the session row, so a new process gets the identical string."""

    def __init__(self, session):
        self.session = session

    def get(self) -> str | None:
        return self.session.storage.blocks.frozen_prompt()

    def set(self, prompt) -> None:
        self.session.storage.blocks.set_frozen_prompt(prompt)


def check_label(label) -> str:
    if not isinstance(label, str) or not _LABEL.fullmatch(label):
        raise InvalidInputError(
            f"block label {label!r} must start with a letter and hold only letters, digits, '_' or '-' "
            "(at most 64 characters)"
        )
    return label


class ContextBlocks:
    """Everything a session knows about its context blocks, in configured order."""

    def __init__(self, session):
        self.session = session
        self._configs = {}
        self._frozen = None
        self.frozen_prompt_store = None

    # -- configuration -------------------------------------------------------------------------

    def configure(self, label, *, description=None, max_tokens=None, provider=None, replace=True) -> None:
        """Register a block; nothing is read until the block is (a session opened per page run configures
        every block, and reading them all there would be wasted)."""
        check_label(label)
        if not replace and label in self._configs:
            raise ConflictError(f"a block labelled {label!r} exists already; remove it first")
        check_integer(max_tokens, "max_tokens", minimum=1, optional=True)
        if provider is None:
            provider = SessionBlockProvider(self.session.storage.blocks, label)
        self._configs[label] = BlockConfig(label, description, max_tokens, provider, provider_kind(provider))

    def remove(self, label) -> None:
        if self._configs.pop(label, None) is None:
            raise NotFoundError(f"no context block {label!r}")

    def config(self, label) -> BlockConfig:
        try:
            return self._configs[label]
        except KeyError:
            known = ", ".join(self._configs) or "none"
            raise NotFoundError(f"no context block {label!r}; blocks: {known}") from None

    @property
    def configs(self) -> list[BlockConfig]:
        return list(self._configs.values())

    # -- reading -------------------------------------------------------------------------------

    def block(self, label) -> dict:
        config = self.config(label)
        content = config.provider.get() or ""
        block = {
            "label": label,
            "description": config.description,
            "content": content,
            "version": text_version(content),
            "tokens": estimate_string_tokens(content),
            "max_tokens": config.max_tokens,
            "writable": config.kind == WRITABLE or (config.kind == SEARCHABLE and accepts_keyed_set(config.provider)),
            "is_searchable": config.kind == SEARCHABLE,
            "is_skill": config.kind == SKILL,
            "kind": config.kind,
        }
        if config.kind == SKILL:
            block["active_skills"] = self.session.storage.blocks.active_skills(label)
        return block

    def blocks(self) -> list[dict]:
        return [self.block(label) for label in self._configs]

    def render(self) -> str:
        return render_system_prompt(self.blocks())

    # -- writing -------------------------------------------------------------------------------

    def _writable(self, label):
        config = self.config(label)
        if config.kind == READONLY:
            raise ReadOnlyBlockError(f"block {label!r} is readonly: its provider has no set()")
        if config.kind != WRITABLE:
            raise InvalidInputError(
                f"block {label!r} is {config.kind}: it takes keyed entries, not whole-block writes"
            )
        return config

    def _check_budget(self, config, content):
        if not isinstance(content, str):
            raise InvalidInputError(f"block content must be a string, got {type(content).__name__}")
        tokens = estimate_string_tokens(content)
        if config.max_tokens is not None and tokens > config.max_tokens:
            raise BlockBudgetError(
                f"block {config.label!r} allows {config.max_tokens} tokens; the new content would be "
                f"{tokens} tokens. Nothing was written: shorten it or remove something first."
            )

    def replace(self, label, content, expected=None) -> dict:
        config = self._writable(label)
        self._check_budget(config, content)
        if check_expected(expected) is None:
            config.provider.set(content)
        else:
            self._replace_if_unchanged(config, content, expected)
        return self.block(label)

    @staticmethod
    def _replace_if_unchanged(config, content, expected):
        """Compare-and-set in one transaction: only a block stored in the session's rows can do it."""
        provider = config.provider
        if not isinstance(provider, SessionBlockProvider):
            raise InvalidInputError(
                f"block {config.label!r} is kept by a {type(provider).__name__}, which cannot check versions: "
                "write it without expected="
            )
        provider.blocks.set_content(provider.label, content, expected=expected)

    def append(self, label, content) -> dict:
        config = self._writable(label)
        current = config.provider.get() or ""
        separator = "" if not current or current.endswith("\n") or content.startswith("\n") else "\n"
        combined = f"{current}{separator}{content}"
        self._check_budget(config, combined)
        config.provider.set(combined)
        return self.block(label)

    def set_entry(self, label, key, content) -> dict:
        config = self.config(label)
        if config.kind not in (SEARCHABLE, SKILL) or not accepts_keyed_set(config.provider):
            raise ReadOnlyBlockError(f"block {label!r} does not take keyed entries")
        self._check_budget(config, content)
        config.provider.set(key, content)
        return self.block(label)

    def search(self, label, query) -> str:
        config = self.config(label)
        if config.kind != SEARCHABLE:
            raise InvalidInputError(f"block {label!r} is {config.kind}, not searchable")
        return config.provider.search(query)

    def _skill_provider(self, label):
        config = self.config(label)
        if config.kind != SKILL:
            raise InvalidInputError(f"block {label!r} is {config.kind}, not a skills block")
        return config.provider

    def activate_skill(self, label, key) -> str:
        """The skill's full text, recorded as active; an unknown key is NotFoundError and stays inactive."""
        body = self._skill_provider(label).load(key)
        if body is None:
            raise NotFoundError(f"skill {key!r} not found in {label!r}")
        self.session.storage.blocks.set_skill_active(label, key, True)
        return body

    def deactivate_skill(self, label, key) -> None:
        self._skill_provider(label)
        if key not in self.session.storage.blocks.active_skills(label):
            raise NotFoundError(f"skill {key!r} is not active in {label!r}")
        self.session.storage.blocks.set_skill_active(label, key, False)

    # -- the frozen system prompt --------------------------------------------------------------

    def freeze(self) -> str:
        """Render once, then return the same string (from the frozen prompt store when one is set)."""
        if self._frozen is None:
            self._frozen = self._stored_prompt()
        if self._frozen is None:
            self.refresh()
        return self._frozen

    def current_prompt(self) -> str:
        """The prompt the next request sends: the frozen one (this process's, else the frozen
        prompt store's), else what freezing would render now. Token counters see this, so a restarted
        process counts the stored prompt it will send, not a fresh render of changed blocks."""
        if self._frozen is not None:
            return self._frozen
        stored = self._stored_prompt()
        return stored if stored is not None else self.render()

    def _stored_prompt(self) -> str | None:
        return self.frozen_prompt_store.get() if self.frozen_prompt_store is not None else None

    def refresh(self) -> str:
        self._frozen = self.render()
        if self.frozen_prompt_store is not None:
            self.frozen_prompt_store.set(self._frozen)
        return self._frozen
