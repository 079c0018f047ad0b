"""Tools generated from a session's context blocks, for the model to read and write its memory.

A tool exists only when some block needs it. ``execute`` never raises: every refusal comes back as
text the model can read and act on.
"""
import hashlib
from dataclasses import dataclass
from typing import Callable

from ..errors import MemoryLabError
from .providers import SEARCHABLE, SKILL, WRITABLE, accepts_keyed_set


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict
    run: Callable[[dict], str]

    def execute(self, args) -> str:
        """Run the tool on a dict of arguments; errors are returned as ``Error: ...`` text."""
        if not isinstance(args, dict):
            return f"Error: {self.name} takes a JSON object of arguments, got {type(args).__name__}"
        missing = [name for name in self.parameters.get("required", ()) if args.get(name) in (None, "")]
        if missing:
            return f"Error: {self.name} needs {', '.join(missing)}"
        try:
            return self.run(args)
        except MemoryLabError as error:
            return f"Error: {error}"
        except Exception as error:  # a user's provider failed: the model reads why, the turn goes on
            return f"Error: {self.name} failed: {type(error).__name__}: {error}"

    def openai_schema(self) -> dict:
        return {"type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}


def content_key(content) -> str:
    """A stable key for an entry written without one: the same content always gets the same key."""
    return "entry-" + hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def _usage(block):
    if block["max_tokens"]:
        return f"{block['tokens']}/{block['max_tokens']} tokens"
    return f"{block['tokens']} tokens"


def _catalog(blocks, describe):
    return "\n".join(f"- {b['label']}: {b['description'] or 'no description'} ({describe(b)})" for b in blocks)


def _schema(properties, required):
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def _set_context_tool(context, targets):
    labels = [b["label"] for b in targets]

    def run(args):
        label, content = args["label"], args["content"]
        if not isinstance(content, str):
            return "Error: content must be a string"
        if context.config(label).kind in (SEARCHABLE, SKILL):
            key = args.get("key") or content_key(content)
            block = context.set_entry(label, key, content)
            return f"Stored entry {key!r} in {label}. {block['content']}"
        action = args.get("action", "replace")
        if action not in ("replace", "append"):
            return f"Error: action must be 'replace' or 'append', got {action!r}"
        block = (context.append if action == "append" else context.replace)(label, content)
        return f"{'Appended to' if action == 'append' else 'Replaced'} {label}: now {_usage(block)}."

    description = (
        "Write to a context block. Writable blocks take the whole content (action 'replace') or a "
        "new line at the end ('append'); blocks that index entries take a key. A write over a block's "
        "token budget is refused. Blocks:\n" + _catalog(targets, _usage)
    )
    properties = {
        "label": {"type": "string", "enum": labels, "description": "Which block to write."},
        "content": {"type": "string", "description": "The text to store."},
        "action": {"type": "string", "enum": ["replace", "append"], "default": "replace",
                   "description": "For writable blocks: replace the content or append a line."},
    }
    if any(b["kind"] != WRITABLE for b in targets):
        properties["key"] = {"type": "string", "description": (
            "Entry key, for blocks that index entries. Without one the key is derived from the content, "
            "so writing the same content twice stores one entry.")}
    return Tool("set_context", description, _schema(properties, ["label", "content"]), run)


def _search_context_tool(context, targets):
    def run(args):
        found = context.search(args["label"], str(args["query"]))
        return found if found else f"Nothing in {args['label']} matches {str(args['query'])!r}."

    description = ("Search a searchable context block and get the matching entries. Blocks:\n"
                   + _catalog(targets, lambda b: b["content"].strip()))
    properties = {
        "label": {"type": "string", "enum": [b["label"] for b in targets]},
        "query": {"type": "string", "description": "Words to look for."},
    }
    return Tool("search_context", description, _schema(properties, ["label", "query"]), run)


def _skill_tools(context, targets):
    properties = {
        "label": {"type": "string", "enum": [b["label"] for b in targets]},
        "key": {"type": "string", "description": "The skill's key from the catalog in the system prompt."},
    }
    catalog = _catalog(targets, lambda b: f"{len(b['content'].splitlines())} skills")
    active = "\n".join(f"- {b['label']}: {', '.join(b.get('active_skills') or ()) or 'none'}" for b in targets)

    def activate(args):
        return context.activate_skill(args["label"], args["key"])

    def deactivate(args):
        context.deactivate_skill(args["label"], args["key"])
        return f"Skill {args['key']!r} deactivated."

    return [
        Tool("activate_skill", "Load the full instructions of a skill listed in a skills block, when the "
             "task needs it. Skills blocks:\n" + catalog, _schema(properties, ["label", "key"]), activate),
        Tool("deactivate_skill", "Mark an active skill as no longer needed. Active now:\n" + active,
             _schema(properties, ["label", "key"]), deactivate),
    ]


def build_tools(context) -> dict[str, Tool]:
    """{name: Tool} for the blocks ``context`` holds now."""
    blocks = context.blocks()
    writable = [b for b in blocks if b["kind"] == WRITABLE
                or (b["kind"] == SEARCHABLE and accepts_keyed_set(context.config(b["label"]).provider))]
    searchable = [b for b in blocks if b["kind"] == SEARCHABLE]
    skills = [b for b in blocks if b["kind"] == SKILL]
    tools = []
    if writable:
        tools.append(_set_context_tool(context, writable))
    if searchable:
        tools.append(_search_context_tool(context, searchable))
    if skills:
        tools.extend(_skill_tools(context, skills))
    return {tool.name: tool for tool in tools}
