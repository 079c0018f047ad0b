"""memorylab: see, test and tune what an LLM agent remembers.

The engine is importable without Streamlit or litellm; those load only where they are used.
"""
from .memory.admin import MemoryAdmin, register_agent, status_tools
from .llm.chat import ChatRunner
from .history.compaction import (
    CompactionContext,
    CompactionPlan,
    build_summary_prompt,
    create_compact_function,
    plan_compaction,
)
from .context import (FileProvider, SkillDirectoryProvider, SqliteSearchProvider, StaticProvider, Tool,
                      render_system_prompt)
from .errors import (
    BlockBudgetError,
    ConflictError,
    DamagedRowError,
    DamagedRowWarning,
    ImportFormatError,
    InvalidInputError,
    InvalidMessageError,
    MemoryLabError,
    AmbiguousAgentError,
    ModelError,
    NothingToSummarizeError,
    NotFoundError,
    ReadOnlyBlockError,
    StoreBusyError,
    StoreError,
)
from .lab.frames import to_dataframe
from .memory.identity import identify
from .io import export_session, import_session, parse_export, read_export, write_export
from .memory.kv import KVStore
from .llm.models import (DEFAULT_LOCAL_MODEL, complete, complete_text, count_tokens, make_summarizer, usable_models,
                  usage_and_cost)
from .messages import from_openai, message_text, normalize_message, to_openai
from .memory.longterm import LongTermMemory
from .memory.manager import Memory
from .history.overlays import apply_overlays
from .lab.samples import load_samples
from .history.session import Session
from .store import Store
from .tokens import estimate_message_tokens, estimate_string_tokens
from .history.truncation import enforce_row_size_limit, truncate_older_messages
from .history.window import ContextWindow

__all__ = [
    "LongTermMemory", "to_dataframe",
    "AmbiguousAgentError", "KVStore", "Memory", "MemoryAdmin", "NothingToSummarizeError", "identify",
    "register_agent", "status_tools",
    "ChatRunner", "DEFAULT_LOCAL_MODEL", "ModelError", "complete", "complete_text", "count_tokens", "make_summarizer",
    "usable_models", "usage_and_cost",
    "CompactionContext", "CompactionPlan", "ContextWindow", "build_summary_prompt", "create_compact_function",
    "enforce_row_size_limit", "plan_compaction", "truncate_older_messages",
    "BlockBudgetError", "FileProvider", "ReadOnlyBlockError", "SkillDirectoryProvider", "SqliteSearchProvider",
    "StaticProvider", "Tool", "render_system_prompt",
    "ConflictError", "DamagedRowError", "DamagedRowWarning", "ImportFormatError", "InvalidInputError",
    "InvalidMessageError", "MemoryLabError",
    "NotFoundError", "Session", "Store", "StoreBusyError", "StoreError", "apply_overlays", "estimate_message_tokens",
    "estimate_string_tokens", "export_session", "from_openai", "import_session", "load_samples",
    "message_text", "normalize_message", "parse_export", "read_export", "to_openai", "write_export",
]
