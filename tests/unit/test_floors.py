"""The engine's floors: the history of a session (``memorylab.history``) is read by experiments, audits,
the model layer and the lab, and imports none of them, so each can be understood and tested on its own."""
import ast
from pathlib import Path

import memorylab

PACKAGE = Path(memorylab.__file__).parent
ABOVE_HISTORY = ("memorylab.experiments", "memorylab.audit", "memorylab.llm", "memorylab.display")
DISPLAY_HOOKS = {"_repr_html_"}
"""Jupyter's display hooks, which import the notebook renderer when a notebook shows the object."""


def imports(path):
    """(module imported, function it is imported in or None) for each import of a module of the package."""
    package = "memorylab." + ".".join(path.relative_to(PACKAGE).parent.parts)
    found = []

    def visit(node, function):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, child.name)
                continue
            if isinstance(child, ast.ImportFrom):
                base = package.rsplit(".", child.level - 1)[0] if child.level else ""
                found.append((".".join(filter(None, [base, child.module])), function))
            elif isinstance(child, ast.Import):
                found.extend((alias.name, function) for alias in child.names)
            visit(child, function)

    visit(ast.parse(path.read_text(encoding="utf-8")), None)
    return found


def test_history_imports_nothing_above_it():
    upward = [(path.name, module, function) for path in sorted((PACKAGE / "history").glob("*.py"))
              for module, function in imports(path)
              if module.startswith(ABOVE_HISTORY) and function not in DISPLAY_HOOKS]
    assert upward == []


def test_the_floor_check_sees_an_upward_import():
    module = PACKAGE / "history" / "compaction.py"
    assert ("memorylab.display.notebook", "_repr_html_") in imports(module)
    assert ("memorylab.messages", None) in imports(module)
