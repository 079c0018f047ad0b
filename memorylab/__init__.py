"""memorylab: see, test and tune what an LLM agent remembers.

The engine is importable without Streamlit or litellm; those load only where they are used.
"""
from .errors import (
    ConflictError,
    ImportFormatError,
    InvalidInputError,
    InvalidMessageError,
    MemoryLabError,
    NotFoundError,
)
from .io import export_session, import_session, parse_export, read_export, write_export
from .messages import from_openai, message_text, normalize_message, to_openai
from .overlays import apply_overlays
from .samples import load_samples
from .session import Session
from .store import Store
from .tokens import estimate_message_tokens, estimate_string_tokens

__all__ = [
    "ConflictError", "ImportFormatError", "InvalidInputError", "InvalidMessageError", "MemoryLabError",
    "NotFoundError", "Session", "Store", "apply_overlays", "estimate_message_tokens",
    "estimate_string_tokens", "export_session", "from_openai", "import_session", "load_samples",
    "message_text", "normalize_message", "parse_export", "read_export", "to_openai", "write_export",
]
