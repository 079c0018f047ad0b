"""An MkDocs hook: the API reference lists exactly ``memorylab.__all__``, in its sections.

The reference page holds the marker below; this hook replaces it with one ``::: memorylab.NAME``
(mkdocstrings) per public name, under a heading per comment in ``__all__`` (``# store``, ...). So a
name added to or removed from ``__all__`` shows on the page at the next build, with nothing to edit
here, and every name is documented by its top-level path, wherever its module lives.
"""
import io
import tokenize
from pathlib import Path

MARKER = "<!-- memorylab.__all__ -->"
INIT = Path(__file__).resolve().parent.parent / "memorylab" / "__init__.py"


def public_sections(source: str) -> dict[str, list[str]]:
    """``{section: [names]}`` from the ``__all__ = [...]`` list of ``source``, sections named by the
    comments inside it; names before any comment go under ``memorylab``."""
    sections, current, inside = {}, "memorylab", False
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if not inside:
            inside = token.type == tokenize.NAME and token.string == "__all__"
            continue
        if token.type == tokenize.OP and token.string == "]":
            break
        if token.type == tokenize.COMMENT:
            current = token.string.lstrip("#").strip()
        elif token.type == tokenize.STRING:
            sections.setdefault(current, []).append(token.string.strip("\"'"))
    return sections


def reference_markdown(sections: dict[str, list[str]]) -> str:
    parts = []
    for section, names in sections.items():
        parts.append(f"## {section[0].upper()}{section[1:]}\n")
        parts += [f"::: memorylab.{name}\n" for name in sorted(names, key=str.lower)]
    return "\n".join(parts)


def on_page_markdown(markdown, page, config, files):
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, reference_markdown(public_sections(INIT.read_text(encoding="utf-8"))))
