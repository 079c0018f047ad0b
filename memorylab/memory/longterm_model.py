"""The model steps of long-term memory, backed by litellm: ``model_steps(model)`` builds the
extractor, planner and reranker that ``LongTermMemory(model=...)`` uses.

Each step is one model call: fixed instructions as the system message, the step's input dict as
JSON in the user message, and the JSON object found in the reply as the result. Weak models wrap
JSON in code fences, put prose before or after it, or answer a bare list where an object was
asked for; all of those are accepted. A reply holding no JSON object raises ModelOutputError with
a preview of what came back, and a failed call raises ModelError: ``LongTermMemory`` turns both
into failure diagnostics and a deterministic fallback, never a crash.
"""
import json
import re

from ..errors import ModelOutputError
from ..llm.models import check_request, complete, redact_secrets
from ..tokens import compact_json

REPLY_PREVIEW_CHARS = 200
MAX_JSON_STARTS = 20
"""How many ``{``/``[`` positions a reply is tried from before it counts as holding no JSON."""

EXTRACT_FORMAT = (
    'Reply with one JSON object and nothing else: {"memories": [{"scope": "GLOBAL_MEMORY" or '
    '"SESSION_MEMORY", "summary": "one sentence", "body": {...}, "tags": ["short", "words"], '
    '"importance": 0.0 to 1.0}]}. Fill "body" with the keys of body_schema in the input, each as its '
    "description says. GLOBAL_MEMORY is true of the user in any conversation (preferences, identity, "
    "standing facts); SESSION_MEMORY only matters to this conversation's task. Return at most "
    'max_memories items, and {"memories": []} when nothing in the turn is worth keeping.'
)
PLAN_INSTRUCTIONS = (
    "You plan a search of an assistant's long-term memory before it answers the prompt in the input. "
    'Reply with one JSON object and nothing else, with the keys "query" (a few keywords that the '
    'relevant memories would contain, taken from the prompt), "tags" (tags from the input\'s tags list '
    'that fit, possibly none), "include_global" (true to search what is known about the user) and '
    '"include_session" (true to search what this conversation established).'
)
RERANK_INSTRUCTIONS = (
    "You judge which remembered items help answer the query in the input. Reply with one JSON object "
    'and nothing else: {"decisions": [{"id": <a candidate id>, "useful": true or false, "score": 0.0 to '
    '1.0, "reason": "a few words"}]}, one decision per candidate.'
)

_FENCE = re.compile(r"```[\w-]*[ \t]*\n?(.*?)```", re.DOTALL)
_decoder = json.JSONDecoder()


def _json_values(text):
    """The JSON values that start at the first ``{`` or ``[`` positions of ``text`` (prose around them is ignored)."""
    starts = [i for i, c in enumerate(text) if c in "{["][:MAX_JSON_STARTS]
    for start in starts:
        try:
            yield _decoder.raw_decode(text, start)[0]
        except ValueError:
            continue


def parse_json_reply(text, *, list_key):
    """The JSON object in a model's reply; a bare list is taken as ``{list_key: list}`` (with no
    ``list_key``, lists are passed over and an object inside one can still be found).

    Fenced blocks are tried first (a model that fences its answer often quotes examples around
    it), then the whole reply. Raises ModelOutputError when no object is found.
    """
    for candidate in [*(m.group(1) for m in _FENCE.finditer(text)), text]:
        for value in _json_values(candidate):
            if isinstance(value, list) and list_key:
                value = {list_key: value}
            if isinstance(value, dict):
                return value
    preview = " ".join(text.split())[:REPLY_PREVIEW_CHARS]
    raise ModelOutputError(redact_secrets(f"the model's reply holds no JSON object: {preview!r}"))


def _extract_instructions(payload):
    return f"{payload.get('instruction') or ''}\n\n{EXTRACT_FORMAT}".strip()


def _json_step(model, instructions, list_key, completion_kwargs):
    """A step: ``instructions`` (a string, or a function of the input for the extractor) and the
    input as JSON go to ``model``; the reply's JSON object comes back."""
    def step(payload):
        system = instructions(payload) if callable(instructions) else instructions
        reply = complete([{"role": "system", "content": system}, {"role": "user", "content": compact_json(payload)}],
                         model=model, **completion_kwargs)
        return parse_json_reply(reply.choices[0].message.content or "", list_key=list_key)

    step.model = model
    return step


def model_steps(model, **completion_kwargs):
    """``{"extractor", "planner", "reranker"}`` calling ``model`` through litellm.

    ``completion_kwargs`` go to every call (``temperature``, ``api_base``, ``mock_response``...);
    an ``api_key`` is refused here, as everywhere: keys come from the environment.
    """
    check_request(model, completion_kwargs)
    return {
        "extractor": _json_step(model, _extract_instructions, "memories", completion_kwargs),
        "planner": _json_step(model, PLAN_INSTRUCTIONS, None, completion_kwargs),
        "reranker": _json_step(model, RERANK_INSTRUCTIONS, "decisions", completion_kwargs),
    }
