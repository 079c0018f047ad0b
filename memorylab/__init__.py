"""memorylab: see, test and tune what an LLM agent remembers.

The engine is importable without Streamlit or litellm; those load only where they are used.
"""
# The store: SQLite or PostgreSQL behind one small surface.
from .store import Store

# History: a session's message tree, its overlays and compactions, and the chat window.
from .history.compaction import (
    CompactionContext,
    CompactionPlan,
    build_summary_prompt,
    create_compact_function,
    plan_compaction,
)
from .history.overlays import apply_overlays
from .history.session import Session
from .history.tool_pairs import lint_tool_pairs
from .history.truncation import enforce_row_size_limit, truncate_older_messages
from .history.window import ContextWindow

# Context blocks: what the system prompt is rendered from, and the tools they generate.
from .context import (FileProvider, SkillDirectoryProvider, SqliteSearchProvider, StaticProvider, Tool,
                      render_system_prompt)

# The memory manager, the KV store and cross-agent administration.
from .memory.admin import MemoryAdmin, register_agent, status_tools
from .memory.identity import identify
from .memory.kv import KVStore
from .memory.manager import Memory

# Long-term memory: records extracted after turns and recalled before them.
from .memory.longterm import LongTermMemory

# The model layer: the chat loop and every model call, through litellm.
from .llm.chat import ChatRunner
from .llm.prompt_cache import PromptCacheReport, prompt_cache_report
from .llm.replay import BranchComparison, ReplayResult, compare_branches
from .llm.models import (DEFAULT_LOCAL_MODEL, complete, complete_text, count_tokens, make_summarizer, usable_models,
                         usage_and_cost)

# Experiments: compaction strategies run over session branches, scored by probes, every run kept.
from .experiments import ExperimentResults, Experiments, ExperimentSpec, load_spec, propose_probes

# Import and export, message conversion and token estimates.
from .io import export_session, import_session, parse_export, read_export, write_export
from .messages import from_openai, message_text, normalize_message, to_openai
from .tokens import estimate_message_tokens, estimate_string_tokens

# Notebooks: DataFrames of the engine's results, and the sample data.
from .display.frames import to_dataframe
from .samples import load_samples

# Errors: every exception memorylab raises derives from MemoryLabError.
from .errors import (
    AmbiguousAgentError,
    BlockBudgetError,
    ConflictError,
    DamagedRowError,
    DamagedRowWarning,
    ImportFormatError,
    InvalidInputError,
    InvalidMessageError,
    MemoryLabError,
    ModelError,
    ModelOutputError,
    NotFoundError,
    NothingToSummarizeError,
    ReadOnlyBlockError,
    StoreBusyError,
    StoreError,
    StoreFullError,
    StoreReadOnlyError,
    StoreUnavailableError,
    StaleWriteError,
)

__all__ = [
    # The user-facing API (DESIGN.md). Everything imported above stays importable from memorylab; the
    # names left out of __all__ are types the API hands back (CompactionPlan, ReplayResult,
    # PromptCacheReport, ExperimentResults ...), helpers behind a method (apply_overlays,
    # render_system_prompt, parse_export), model plumbing (complete, usable_models ...) and the
    # narrower errors, which memorylab.errors lists whole.
    # store
    "Store",
    # history
    "ContextWindow", "Session", "build_summary_prompt", "create_compact_function", "enforce_row_size_limit",
    "lint_tool_pairs", "plan_compaction", "truncate_older_messages",
    # context blocks
    "FileProvider", "SkillDirectoryProvider", "SqliteSearchProvider", "StaticProvider", "Tool",
    # memory manager, KV store, administration, long-term memory
    "KVStore", "LongTermMemory", "Memory", "MemoryAdmin", "identify", "register_agent", "status_tools",
    # model layer
    "ChatRunner", "DEFAULT_LOCAL_MODEL", "compare_branches", "count_tokens", "make_summarizer", "prompt_cache_report",
    # experiments
    "ExperimentSpec", "Experiments", "load_spec", "propose_probes",
    # import/export, messages, tokens
    "estimate_message_tokens", "estimate_string_tokens", "export_session", "from_openai", "import_session",
    "message_text", "normalize_message", "read_export", "to_openai", "write_export",
    # notebooks
    "load_samples", "to_dataframe",
    # errors: MemoryLabError is every refusal; these are the ones worth catching on their own
    "BlockBudgetError", "ConflictError", "DamagedRowWarning", "ImportFormatError", "InvalidInputError",
    "MemoryLabError", "ModelError", "NotFoundError", "ReadOnlyBlockError", "StaleWriteError", "StoreBusyError",
    "StoreError",
]
