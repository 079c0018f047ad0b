"""Context memory: blocks injected into the system prompt, their providers, and generated tools."""
from .blocks import ContextBlocks
from .providers import (
                        FileProvider,
                        SessionBlockProvider,
                        SkillDirectoryProvider,
                        SqliteSearchProvider,
                        StaticProvider,
                        provider_kind,
)
from .render import render_system_prompt
from .tools import Tool, build_tools

__all__ = ["ContextBlocks", "FileProvider", "SessionBlockProvider", "SkillDirectoryProvider",
           "SqliteSearchProvider", "StaticProvider", "Tool", "build_tools", "provider_kind",
           "render_system_prompt"]
