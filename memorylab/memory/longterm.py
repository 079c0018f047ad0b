"""Long-term memory: a workspace's durable records, extracted from chat turns and recalled into
later requests.

The model owns judgment: what is worth keeping (extractor), what to search for (planner) and
which candidates help (reranker). Deterministic code owns the rest: it checks the shape of what a
step returns, stores records, confines retrieval to the right scope, and enforces char budgets.
Every step may be absent or fail, and each then has a fallback that the diagnostics name, so a
weak or offline model degrades recall and never breaks a turn.

Normalization of what an extractor returns (the lenient path; people adding records by hand get
errors instead, see ``add_record``):

==================  ==========================================================================
field               rule
==================  ==========================================================================
scope               upper-cased; GLOBAL and SESSION are short forms; others are SESSION_MEMORY
summary             whitespace collapsed to single spaces (one memory is one line of the prompt)
body                shaped by ``body_schema``: its keys in its order, blank values left out, keys
                    it does not name dropped (and listed in the diagnostics); a bare string goes
                    under the first key; an empty schema keeps every key; NaN and infinities,
                    which SQLite's JSON refuses, become text
tags                a list or a comma-separated string; stripped, lower-cased, de-duplicated, at
                    most MAX_TAGS
importance          a number (or numeric string) clamped to 0..1; anything else the default
(neither summary    the item is skipped as ``empty_memory``
nor body)
==================  ==========================================================================

Recall (``prepare_request``) runs scope by scope, by these rules:

==================  ==========================================================================
step                rule
==================  ==========================================================================
candidates          the first step that finds any: records holding a word of the query as a
                    whole word, or as a prefix with ``keyword_match="prefixes"`` ("keyword",
                    ranked by the full-text engine); records holding the whole query, ignoring
                    case ("substring": "izza" finds "pizza"); records carrying the plan's tags
                    ("tags"); the whole scope ("all"). The first two keep only
                    records carrying every tag of the plan. The list is that one step's
                    records, never a merge of several steps
rerank decision     ``useful`` (else ``keep``, else ``decision``) rejects when false, 0 or one of
                    DROP_WORDS; a kept one without a score scores 1.0; a score is clamped to
                    0..1; a candidate without a decision is kept, last. An answer without a
                    decision that names an id is a failed rerank: retried, then
                    ``memory_rerank_failed`` and the keyword order
budget              whole lines, in rank order, a long one never hiding a short one behind it;
                    when none fits, the best ranked is kept without its body and cut to fit,
                    summary included, so the budget is never exceeded
==================  ==========================================================================
"""
import json
import numbers
import re
import time
from collections import deque

from ..errors import InvalidInputError, NotFoundError
from ..history.truncation import truncate_text
from ..llm.models import redact_secrets
from ..messages import utc_now_iso
from ..shapes import MemoryRecord, MemoryRecords
from ..store.compare_and_set import check_expected
from ..tokens import compact_json
from ..validation import check_counts, check_identifier, check_number, is_number
from .longterm_model import model_steps

GLOBAL, SESSION = "GLOBAL_MEMORY", "SESSION_MEMORY"
SCOPES = (GLOBAL, SESSION)
SCOPE_NAMES = {"GLOBAL": GLOBAL, "SESSION": SESSION, GLOBAL: GLOBAL, SESSION: SESSION}
MEMORY_BLOCK_HEADER = "Long-term memories that may be relevant:"
MAX_TAGS = 12
VERDICT_KEYS = ("useful", "keep", "decision")
"""Where a rerank decision says keep or drop, the first present wins."""
DROP_WORDS = frozenset({"drop", "dropped", "discard", "false", "no", "irrelevant", "not_useful", "0"})
DIAGNOSTICS_LOG_SIZE = 50
ERROR_CHARS = 300
EDITABLE_FIELDS = ("summary", "body", "tags", "importance", "scope", "session_id")
KEYWORD_MATCHES = ("words", "prefixes")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

DEFAULT_SETTINGS = {
    # The body every record gets: key -> what the extractor should put there.
    "body_schema": {
        "fact": "the durable fact, preference or decision, in one sentence",
        "evidence": "a short quote or paraphrase from the turn that supports it",
    },
    # What the extractor is asked to keep (the output format is fixed by the step).
    "extract_instruction": (
        "Extract what is worth remembering beyond this turn: the user's preferences, identity, "
        "commitments and decisions, and facts about their projects, orders or accounts. Skip greetings, "
        "small talk and anything true only for this moment."
    ),
    "max_input_chars": 4000,  # per side of a turn (and for the prompt a plan is made from); cut with a marker
    "max_memories": 5,  # per turn; extra items are skipped as over_max_memories
    "retries": 1,  # a failing step is called again this many times before it degrades
    "rerank_min_candidates": 2,  # fewer candidates in a scope: no rerank (memory_rerank_skipped)
    "keep_candidates_on_empty_rerank": True,  # rerank dropped all: inject the deterministic candidates
    "candidates_per_scope": 8,
    # How the "keyword" step matches a query's words: "words" as whole words, as Agently does ("pizza",
    # not "pizz", which the substring step then finds); "prefixes" also the words they begin.
    "keyword_match": "words",
    "max_total_chars": 2000,  # over the rendered memory lines of one request
    "max_item_chars": 400,  # one rendered line; a longer one loses its body, then is skipped
    "default_importance": 0.5,
    "vector_index": False,  # ask for an embedding index (none ships: records say so, keyword search serves)
    "model_kwargs": {},  # litellm arguments for the steps built from model= (api_base, temperature...)
}
_COUNT_SETTINGS = ("max_input_chars", "max_memories", "retries", "rerank_min_candidates", "candidates_per_scope",
                   "max_total_chars", "max_item_chars")


def resolve_settings(settings=None) -> dict:
    """DEFAULT_SETTINGS overlaid with ``settings``; an unknown key or a value of the wrong type is refused."""
    settings = {} if settings is None else settings
    if not isinstance(settings, dict):
        raise InvalidInputError(f"settings must be a dict, got {type(settings).__name__}")
    unknown = sorted(set(settings) - set(DEFAULT_SETTINGS))
    if unknown:
        raise InvalidInputError(f"unknown long-term memory settings {unknown}; known: {', '.join(DEFAULT_SETTINGS)}")
    resolved = {**DEFAULT_SETTINGS, **settings}
    check_counts(**{key: resolved[key] for key in _COUNT_SETTINGS})
    if resolved["keyword_match"] not in KEYWORD_MATCHES:
        raise InvalidInputError(f"keyword_match must be one of {KEYWORD_MATCHES}, got {resolved['keyword_match']!r}")
    for key in ("keep_candidates_on_empty_rerank", "vector_index"):
        if not isinstance(resolved[key], bool):
            raise InvalidInputError(f"{key} must be True or False, got {resolved[key]!r}")
    schema = resolved["body_schema"] or {}
    if not isinstance(schema, dict) or not all(isinstance(k, str) and k.strip() for k in schema):
        raise InvalidInputError(f"body_schema must be a dict of field name -> description, got {schema!r}")
    if not isinstance(resolved["extract_instruction"], str) or not resolved["extract_instruction"].strip():
        raise InvalidInputError("extract_instruction must be a non-empty string")
    check_number(resolved["default_importance"], "default_importance", 0, 1)
    if not isinstance(resolved["model_kwargs"], dict):
        raise InvalidInputError(f"model_kwargs must be a dict of litellm arguments, got {resolved['model_kwargs']!r}")
    return {**resolved, "body_schema": dict(schema), "model_kwargs": dict(resolved["model_kwargs"])}


# -- normalization (pure) -------------------------------------------------------------------------

def _strict_json(value):
    """``value`` when it is strict JSON, else its text: SQLite's JSON functions (which index the
    body) reject NaN and infinities, and a value json cannot encode could not be stored at all."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return _one_line(value)
    return value


def _one_line(value):
    if value is None:
        return ""
    return " ".join((value if isinstance(value, str) else compact_json(value)).split())


def normalize_scope(value) -> str:
    """GLOBAL_MEMORY or SESSION_MEMORY; anything unrecognized is SESSION_MEMORY, the narrower scope."""
    name = re.sub(r"[\s-]+", "_", value.strip().upper()) if isinstance(value, str) else ""
    return SCOPE_NAMES.get(name, SESSION)


def normalize_tags(value) -> list[str]:
    """Tags from a list or a comma-separated string: stripped, lower-cased, de-duplicated, in order."""
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, (list, tuple)):
        return []
    tags = [" ".join(_CONTROL.sub(" ", t).split()).lower() for t in value if isinstance(t, str)]
    return list(dict.fromkeys(t for t in tags if t))[:MAX_TAGS]


def shape_body(value, body_schema) -> tuple[dict, list]:
    """``(body, dropped_keys)``: ``value`` shaped by ``body_schema`` (see the module's table)."""
    if value is None or value == "":
        return {}, []
    if not isinstance(value, dict):
        value = {next(iter(body_schema), "text"): value}
    keys = list(body_schema) if body_schema else list(value)
    body = {}
    for key in keys:
        item = value.get(key)
        item = item.strip() if isinstance(item, str) else _strict_json(item)
        if item not in (None, "", [], {}):
            body[str(key)] = item
    return body, [k for k in value if body_schema and k not in body_schema]


def clamp_fraction(value, default) -> float | None:
    """``value`` (a number or a numeric string) clamped to 0..1, else ``default``."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return default
    return min(1.0, max(0.0, float(value))) if is_number(value) else default


def normalize_memory(item, *, body_schema, default_importance) -> tuple[dict | None, dict]:
    """``(memory, notes)`` for one extracted item, or ``(None, {"reason": ...})`` when it is skipped."""
    if not isinstance(item, dict):
        return None, {"reason": "not_an_object"}
    summary = _one_line(item.get("summary"))
    body, dropped = shape_body(item.get("body"), body_schema)
    if not summary and not body:
        return None, {"reason": "empty_memory"}
    memory = {"scope": normalize_scope(item.get("scope")), "summary": summary, "body": body,
              "tags": normalize_tags(item.get("tags")),
              "importance": clamp_fraction(item.get("importance"), default_importance)}
    return memory, ({"dropped_body_keys": dropped} if dropped else {})


# -- rendering and budgets (pure) -----------------------------------------------------------------

def _label(memory):
    return "[global] " if memory["scope"] == GLOBAL else "[session] "


def render_memory(memory, *, with_body=True) -> str:
    """One line for the prompt: ``[global] summary (key: value; ...)``; body values that only
    repeat the summary are left out."""
    details = [f"{key}: {_one_line(value)}" for key, value in memory["body"].items()
               if _one_line(value) != memory["summary"]]
    if not memory["summary"]:
        return _label(memory) + "; ".join(details)
    if with_body and details:
        return f"{_label(memory)}{memory['summary']} ({'; '.join(details)})"
    return _label(memory) + memory["summary"]


def shortened_line(memory, max_chars) -> str | None:
    """The memory's line without its body, cut to ``max_chars`` with an ellipsis when longer; None
    when not one character of the memory would remain after its ``[scope]`` label."""
    line = render_memory(memory, with_body=False)
    if len(line) <= max_chars:
        return line
    if max_chars - 1 <= len(_label(memory)):
        return None
    return line[:max_chars - 1] + "…"


def render_memory_block(memories) -> str:
    """The system-message text for recalled memories ("" for none): a header and one line each.

    ``ChatRunner`` injects this. A memory is a dict with ``rendered`` (what ``prepare_request``
    returns), a dict with ``summary``, or anything else, shown as its text.
    """
    if not memories:
        return ""
    lines = [(m.get("rendered") or m.get("summary") or compact_json(m)) if isinstance(m, dict) else str(m)
             for m in memories]
    return MEMORY_BLOCK_HEADER + "\n" + "\n".join(f"- {line}" for line in lines)


def fit_budget(memories, *, max_total_chars, max_item_chars) -> tuple[list[dict], dict]:
    """``(kept, report)``: the memories whose rendered lines fit, in order, each with ``rendered``.

    A line over ``max_item_chars`` is tried again without its body; a line that still does not
    fit, or would take the total over ``max_total_chars``, is skipped and the next one is tried:
    a long memory never hides a short one behind it. When no line fits whole, the first memory
    (the best ranked) is kept shortened to fit both budgets (``shortened_line``), so a small
    budget still injects something.
    """
    kept, compacted, skipped, used = [], [], [], 0
    for memory in memories:
        line = render_memory(memory)
        if len(line) > max_item_chars:
            line = render_memory(memory, with_body=False)
            if len(line) <= max_item_chars:
                compacted.append(memory["id"])
        if len(line) > max_item_chars or used + len(line) > max_total_chars:
            reason = "over_item_budget" if len(line) > max_item_chars else "over_total_budget"
            skipped.append({"id": memory["id"], "reason": reason, "chars": len(line)})
            continue
        used += len(line)
        kept.append({**memory, "rendered": line})
    shortened = []
    best = memories[0] if memories and not kept else None
    line = best and shortened_line(best, min(max_item_chars, max_total_chars))
    if line:
        kept, used, shortened = [{**best, "rendered": line}], len(line), [best["id"]]
        skipped = skipped[1:]  # every memory was skipped, the best first
    report = {"max_total_chars": max_total_chars, "max_item_chars": max_item_chars, "used_chars": used,
              "compacted": compacted, "shortened": shortened, "skipped": skipped}
    return kept, report


# -- checking what a step returned ----------------------------------------------------------------

def _flag(value, name):
    if value is None:
        return True
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false, got {value!r}")
    return value


def _check_plan(result):
    if not isinstance(result, dict):
        raise ValueError(f"a plan must be a dict, got {type(result).__name__}")
    query = result.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ValueError(f"a plan needs a non-empty query string, got {query!r}")
    return {"query": " ".join(query.split()), "tags": normalize_tags(result.get("tags")),
            "include_global": _flag(result.get("include_global"), "include_global"),
            "include_session": _flag(result.get("include_session"), "include_session")}


def _listed(result, key, step):
    if not isinstance(result, dict) or not isinstance(result.get(key), list):
        raise ValueError(f"the {step} must return a dict with a {key!r} list, got {compact_json(result)[:200]}")
    return result[key]


def _verdict(decision):
    """A reranker decision as ``{useful, score, reason}``, by the module's rerank rules; what a weak
    model gets wrong otherwise reads as "keep"."""
    said = next((decision[key] for key in VERDICT_KEYS if key in decision), True)
    if isinstance(said, str):
        useful = said.strip().lower() not in DROP_WORDS
    else:
        useful = said is not False and not (is_number(said) and said == 0)
    score = clamp_fraction(decision["score"], None) if "score" in decision else float(useful)
    return {"useful": useful, "score": score, "reason": _one_line(decision.get("reason"))[:200]}


def apply_decisions(candidates, decisions) -> tuple[list[dict], list[dict]]:
    """``(kept, verdicts)``: candidates the reranker did not reject, highest score first.

    Decisions are matched by id (as text, so "3" and 3 agree); a candidate without one is kept.
    The sort is stable and puts unscored candidates after scored ones, in their keyword order.
    ValueError when no decision names an id: an empty answer is a failed rerank, not a verdict.
    """
    verdicts = {}
    for decision in decisions:
        if isinstance(decision, dict) and "id" in decision:
            verdicts.setdefault(str(decision["id"]), _verdict(decision))
    if not verdicts:
        raise ValueError(f"the reranker returned no decisions with an id: {compact_json(decisions)[:200]}")
    judged = [{"id": c["id"], **verdicts.get(str(c["id"]), {"useful": True, "score": None,
                                                                "reason": "no decision: kept"})}
              for c in candidates]
    scores = {j["id"]: j["score"] for j in judged}
    kept = [c for c, j in zip(candidates, judged) if j["useful"]]
    kept.sort(key=lambda c: (scores[c["id"]] is None, -(scores[c["id"]] or 0.0)))
    return kept, judged


class _StepFailed(Exception):
    def __init__(self, error, attempts):
        super().__init__(error)
        self.error, self.attempts = error, attempts


def _describe(error):
    """An exception as diagnostic text: its class and message, keys scrubbed, length capped."""
    return redact_secrets(f"{type(error).__name__}: {error}")[:ERROR_CHARS]


def _step_label(step):
    if step is None:
        return None
    model = getattr(step, "model", None)
    return f"litellm:{model}" if model else getattr(step, "__qualname__", type(step).__name__)


class LongTermMemory:
    """Durable memory records of one workspace, written after turns and recalled before them.

    ``extractor``, ``planner`` and ``reranker`` are callables taking one dict and returning one
    dict, the three judgments this module leaves to a model; ``model`` builds litellm-backed ones
    for those not given. Without either, extraction is off, the prompt is the query and nothing is
    reranked. Every call's
    diagnostics are ``last_diagnostics`` and the newest DIAGNOSTICS_LOG_SIZE are kept in
    ``diagnostics_log`` (on this object: they describe this process's runs, not the database).
    """

    def __init__(self, store, *, workspace, model=None, settings=None, extractor=None, planner=None, reranker=None):
        self.store = store
        self.workspace = check_identifier(workspace, "workspace")
        self.settings = resolve_settings(settings)
        self.model = model
        built = model_steps(model, **self.settings["model_kwargs"]) if model is not None else {}
        self.extractor = extractor or built.get("extractor")
        self.planner = planner or built.get("planner")
        self.reranker = reranker or built.get("reranker")
        for name in ("extractor", "planner", "reranker"):
            if getattr(self, name) is not None and not callable(getattr(self, name)):
                raise InvalidInputError(f"{name} must be a callable taking one dict and returning one dict")
        self.last_diagnostics = None
        self.diagnostics_log = deque(maxlen=DIAGNOSTICS_LOG_SIZE)

    def __repr__(self):
        return f"LongTermMemory({self.store!r}, workspace={self.workspace!r}, model={self.model!r})"

    # -- after a turn: extraction ---------------------------------------------------------------

    def after_turn(self, session_id, user_content, assistant_content, *, message_ids=None) -> dict:
        """Extract durable memories from one turn and store them.

        Returns ``{"stored": [records], "skipped": [{"reason", ...}], "diagnostics"}``; a whole
        turn is skipped as ``empty_turn``, ``extract_disabled`` or ``extract_failed`` (with the
        error). Provenance names the session and the turn's message ids: ``message_ids`` when
        given, else the stored messages holding these texts, found in the store.
        """
        check_identifier(session_id, "session_id")
        texts = {"user_content": user_content, "assistant_content": assistant_content}
        for name, text in texts.items():
            if not isinstance(text, str):
                raise InvalidInputError(f"{name} must be a string, got {type(text).__name__}")
        diagnostics = self._begin("after_turn", session_id, extractor=_step_label(self.extractor))
        reason = ("empty_turn" if not any(text.strip() for text in texts.values())
                  else "extract_disabled" if self.extractor is None else None)
        if reason:
            stored, skipped = [], [{"reason": reason}]
            diagnostics["events"].append({"code": reason})
        else:
            stored, skipped = self._extract(session_id, texts, message_ids, diagnostics)
        diagnostics["stored"] = [r["id"] for r in stored]
        diagnostics["skipped"] = [{k: v for k, v in skip.items() if k != "item"} for skip in skipped]
        return {"stored": stored, "skipped": skipped, "diagnostics": self._finish(diagnostics)}

    def _extract(self, session_id, texts, message_ids, diagnostics):
        limit = self.settings["max_input_chars"]
        cut = {name: truncate_text(text, limit) for name, text in texts.items()}
        diagnostics["truncated"] = {name: len(texts[name]) - limit for name in cut if cut[name] is not texts[name]}
        payload = {"session_id": session_id, **cut, "body_schema": self.settings["body_schema"],
                   "max_memories": self.settings["max_memories"], "instruction": self.settings["extract_instruction"]}
        try:
            output, diagnostics["attempts"] = self._run(self.extractor, payload,
                                                        lambda result: _listed(result, "memories", "extractor"))
        except _StepFailed as failure:
            diagnostics["attempts"] = failure.attempts
            diagnostics["events"].append({"code": "extract_failed", "error": failure.error})
            return [], [{"reason": "extract_failed", "error": failure.error}]
        provenance = self._provenance(session_id, texts, message_ids)
        records, skipped, notes, seen = [], [], [], {}
        for index, item in enumerate(output):
            if index >= self.settings["max_memories"]:
                skipped.append({"reason": "over_max_memories", "index": index, "item": item})
                continue
            memory, note = normalize_memory(item, body_schema=self.settings["body_schema"],
                                            default_importance=self.settings["default_importance"])
            if memory is not None and memory["summary"]:
                note = self._duplicate(memory, session_id, index, seen) or note
            if "reason" in note:
                skipped.append({**note, "index": index, "item": item})
                continue
            records.append(self._record(memory, session_id, provenance))
            if note:
                notes.append({"index": index, **note})
        if notes:
            diagnostics["normalized"] = notes
        return self.store.long_term.insert(self.workspace, records), skipped

    def _duplicate(self, memory, session_id, index, seen):
        """A ``duplicate`` skip when this turn or the scope already holds the same summary, else None.

        A weak model re-extracts the same fact turn after turn; storing it once keeps recall varied.
        """
        key = (memory["scope"], memory["summary"].lower())
        if key in seen:
            return {"reason": "duplicate", "of_index": seen[key]}
        seen[key] = index
        stored = self.store.long_term.find_duplicate(self.workspace, memory["scope"], session_id, memory["summary"])
        return None if stored is None else {"reason": "duplicate", "of_id": stored}

    def _provenance(self, session_id, texts, message_ids):
        provenance = {"source": "after_turn", "session_id": session_id, "extractor": _step_label(self.extractor)}
        if message_ids:
            message_ids = [message_ids] if isinstance(message_ids, str) else message_ids
            return {**provenance, "message_ids": [check_identifier(m, "message id") for m in message_ids]}
        located = self.store.long_term.locate_turn(session_id, texts["user_content"], texts["assistant_content"])
        return {**provenance, **(located or {})}

    def _record(self, memory, session_id, provenance):
        """The stored fields of a memory: kind and owning session follow from its scope."""
        scope = memory["scope"]
        return {**memory, "kind": scope.lower(), "session_id": session_id if scope == SESSION else None,
                "provenance": provenance,
                "vector_index": {"requested": self.settings["vector_index"], "backend": self.store.search_engine.name,
                                 "available": True}}

    # -- before a request: retrieval ------------------------------------------------------------

    def prepare_request(self, session_id, prompt) -> dict:
        """The memories to inject before answering ``prompt`` in ``session_id``.

        Returns ``{"GLOBAL_MEMORY": [...], "SESSION_MEMORY": [...], "memories": [both, global
        first], "rendered": text for the system prompt, "diagnostics"}``; each memory is a record
        with its ``rendered`` line. Only global memories and this session's are ever searched.
        """
        check_identifier(session_id, "session_id")
        if not isinstance(prompt, str):
            raise InvalidInputError(f"prompt must be a string, got {type(prompt).__name__}")
        diagnostics = self._begin("prepare_request", session_id, planner=_step_label(self.planner),
                                  reranker=_step_label(self.reranker), index=self._index_report())
        if self.settings["vector_index"]:
            diagnostics["events"].append({"code": "memory_vector_unavailable",
                                          "backend": self.store.search_engine.name})
        plan = diagnostics["plan"] = self._plan(session_id, prompt, diagnostics["events"])
        ranked, diagnostics["scopes"] = [], {}
        for scope in SCOPES:
            found, diagnostics["scopes"][scope] = self._recall_scope(scope, session_id, plan, diagnostics["events"])
            ranked.extend(found)
        kept, diagnostics["budget"] = fit_budget(ranked, max_total_chars=self.settings["max_total_chars"],
                                                 max_item_chars=self.settings["max_item_chars"])
        by_scope = {scope: [m for m in kept if m["scope"] == scope] for scope in SCOPES}
        diagnostics["selected"] = {scope: [m["id"] for m in found] for scope, found in by_scope.items()}
        return {**by_scope, "memories": kept, "rendered": render_memory_block(kept),
                "diagnostics": self._finish(diagnostics)}

    def _index_report(self):
        note = f"keyword retrieval through {self.store.search_engine.description}"
        if self.settings["vector_index"]:
            note += "; a vector index was requested but no embedding backend is installed, so keywords serve it"
        return {"backend": self.store.search_engine.name, "vector_requested": self.settings["vector_index"],
                "vector_available": False, "note": note}

    def _plan(self, session_id, prompt, events):
        """The model's plan, or the prompt itself as the query (source "prompt" without a planner,
        "fallback" after a failed one)."""
        limit = self.settings["max_input_chars"]
        fallback = {"query": " ".join(prompt[:limit].split()), "tags": [], "include_global": True,
                    "include_session": True}
        if self.planner is None:
            return {**fallback, "source": "prompt"}
        payload = {"session_id": session_id, "prompt": truncate_text(prompt, limit),
                   "tags": self.store.long_term.tags(self.workspace, session_id)}
        try:
            plan, attempts = self._run(self.planner, payload, _check_plan)
        except _StepFailed as failure:
            events.append({"code": "memory_plan_failed", "error": failure.error, "attempts": failure.attempts})
            return {**fallback, "source": "fallback"}
        return {**plan, "source": "model", "attempts": attempts}

    def _recall_scope(self, scope, session_id, plan, events):
        """``(ranked, report)`` for one scope: keyword candidates, then the rerank."""
        if not plan["include_global" if scope == GLOBAL else "include_session"]:
            return [], {"included": False}
        candidates, source = self._candidates(scope, session_id, plan)
        if source not in (None, "keyword"):
            events.append({"code": "memory_candidates_fallback", "scope": scope, "source": source})
        ranked, rerank = self._rerank(scope, plan["query"], candidates, events)
        return ranked, {"included": True, "candidate_source": source, "candidates": [c["id"] for c in candidates],
                        "rerank": rerank, "ranked": [m["id"] for m in ranked]}

    def _candidates(self, scope, session_id, plan):
        """``(records, source)`` from the first of the module's candidate steps that finds any."""
        query, tags = plan["query"], plan["tags"]
        tries = [("keyword", {"query": query, "match": self.settings["keyword_match"], "tags": tags}),
                 ("substring", {"query": query, "match": "substring", "tags": tags})] if query else []
        tries += [("tags", {"tags": tags})] if tags else []
        for source, criteria in [*tries, ("all", {})]:
            found = self.store.long_term.candidates(self.workspace, scope, session_id,
                                                 limit=self.settings["candidates_per_scope"], **criteria)
            if found:
                return found, source
        return [], None

    def _rerank(self, scope, query, candidates, events):
        """``(ranked, report)`` by the module's rerank rules: skip small scopes, keep the deterministic
        order when the reranker fails, and when it rejects everything fall back to the candidates
        unless ``keep_candidates_on_empty_rerank`` is off."""
        if not candidates:
            return [], {"status": "no_candidates"}
        reason = ("no_reranker" if self.reranker is None
                  else "too_few_candidates" if len(candidates) < self.settings["rerank_min_candidates"] else None)
        if reason:
            events.append({"code": "memory_rerank_skipped", "scope": scope, "reason": reason,
                           "candidates": len(candidates), "min": self.settings["rerank_min_candidates"]})
            return candidates, {"status": "skipped", "reason": reason}
        payload = {"query": query, "candidates": [{key: c[key] for key in ("id", "summary", "tags", "scope")}
                                                  for c in candidates]}
        try:
            (kept, verdicts), attempts = self._run(
                self.reranker, payload,
                lambda result: apply_decisions(candidates, _listed(result, "decisions", "reranker")))
        except _StepFailed as failure:
            events.append({"code": "memory_rerank_failed", "scope": scope, "error": failure.error,
                           "attempts": failure.attempts})
            return candidates, {"status": "failed", "error": failure.error, "attempts": failure.attempts}
        report = {"decisions": verdicts, "attempts": attempts}
        if kept:
            return kept, {"status": "reranked", **report}
        if self.settings["keep_candidates_on_empty_rerank"]:
            events.append({"code": "memory_rerank_empty_fallback", "scope": scope, "candidates": len(candidates)})
            return candidates, {"status": "empty_fallback", **report}
        events.append({"code": "memory_rerank_empty", "scope": scope, "candidates": len(candidates)})
        return [], {"status": "empty", **report}

    # -- steps and diagnostics ------------------------------------------------------------------

    def _run(self, step, payload, check):
        """``(check(step(payload)), attempts)``, retried ``retries`` times; _StepFailed with the last error."""
        attempts = 1 + self.settings["retries"]
        for attempt in range(1, attempts + 1):
            try:
                return check(step(payload)), attempt
            except Exception as error:  # a step is user or model code: any failure degrades, none escapes
                last = _describe(error)
        raise _StepFailed(last, attempts)

    def _begin(self, step, session_id, **steps):
        return {"step": step, "at": utc_now_iso(), "workspace": self.workspace, "session_id": session_id,
                **steps, "events": [], "started": time.perf_counter()}

    def _finish(self, diagnostics):
        diagnostics["elapsed_ms"] = round((time.perf_counter() - diagnostics.pop("started")) * 1000, 1)
        diagnostics["events"] = diagnostics.pop("events")  # last, after the steps they annotate
        self.last_diagnostics = diagnostics
        self.diagnostics_log.append(diagnostics)
        return diagnostics

    # -- records, for the lab -------------------------------------------------------------------

    def records(self, scope=None, session_id=None) -> MemoryRecords:
        """The workspace's records, newest change first, optionally of one scope and/or session."""
        scope = _named_scope(scope) if scope is not None else None
        return self.store.long_term.list(self.workspace, scope=scope, session_id=session_id)

    def get_record(self, record_id) -> MemoryRecord | None:
        """The record, or None."""
        return self.store.long_term.get(self.workspace, _check_record_id(record_id))

    def add_record(self, summary="", *, scope=None, session_id=None, body=None, tags=(), importance=None,
                   provenance=None) -> MemoryRecord:
        """Store a record written by a person. ``scope`` defaults to SESSION_MEMORY when a
        ``session_id`` is given, else GLOBAL_MEMORY. Unlike extraction, mistakes are errors: an
        unknown scope, body keys outside ``body_schema``, an importance outside 0..1."""
        if scope is None:
            scope = SESSION if session_id is not None else GLOBAL
        fields = {"summary": summary, "body": body, "tags": tags, "scope": scope, "session_id": session_id,
                  "importance": self.settings["default_importance"] if importance is None else importance}
        memory = self._checked(fields)
        if provenance is not None and (not isinstance(provenance, dict) or _strict_json(provenance) is not provenance):
            raise InvalidInputError(f"provenance must be a dict of JSON values, got {provenance!r}")
        record = self._record(memory, memory["session_id"], {"source": "manual", **(provenance or {})})
        return self.store.long_term.insert(self.workspace, [record])[0]

    def update_record(self, record_id, *, expected=None, **fields) -> MemoryRecord | None:
        """Change ``EDITABLE_FIELDS`` of a record (checked as in ``add_record``); returns it.
        ``expected``: the record's ``version`` as read; a record changed since is a ``StaleWriteError``."""
        check_expected(expected)
        unknown = sorted(set(fields) - set(EDITABLE_FIELDS))
        if unknown:
            raise InvalidInputError(f"cannot update {unknown}; editable fields: {', '.join(EDITABLE_FIELDS)}")
        current = self.get_record(record_id)
        if current is None:
            raise NotFoundError(f"no memory record {record_id!r} in workspace {self.workspace!r}")
        merged = {key: current[key] for key in EDITABLE_FIELDS} | fields
        if "session_id" not in fields and _named_scope(merged["scope"]) == GLOBAL:
            merged["session_id"] = None  # moving a session memory to global frees it from its session
        memory = self._checked(merged)
        stored = {**memory, "kind": memory["scope"].lower()}
        return self.store.long_term.update(self.workspace, current["id"], stored, expected=expected)

    def delete_record(self, record_id) -> bool:
        """Remove a record; True when it existed."""
        return self.store.long_term.delete(self.workspace, _check_record_id(record_id))

    def _checked(self, fields):
        """The normalized fields of a record written by a person, or InvalidInputError saying what is wrong."""
        scope = _named_scope(fields["scope"])
        session_id = fields["session_id"]
        if scope == SESSION:
            check_identifier(session_id, "session_id of a SESSION_MEMORY record")
        elif session_id is not None:
            raise InvalidInputError("a GLOBAL_MEMORY record belongs to no session: leave session_id out")
        schema, body = self.settings["body_schema"], fields["body"]
        if body is not None and not isinstance(body, dict):
            raise InvalidInputError(f"body must be a dict, got {type(body).__name__}")
        extra = sorted(set(body or {}) - set(schema)) if schema else []
        if extra:
            raise InvalidInputError(f"body keys {extra} are not in body_schema ({', '.join(schema)})")
        importance = check_number(fields["importance"], "importance", 0, 1)
        if not isinstance(fields["summary"], str) or not isinstance(fields["tags"], (list, tuple, str)):
            raise InvalidInputError("summary must be a string and tags a list of strings")
        memory, _ = normalize_memory({**fields, "scope": scope}, body_schema=schema, default_importance=importance)
        if memory is None:
            raise InvalidInputError("a memory needs a summary or a body")
        return {**memory, "session_id": session_id}


def _named_scope(scope):
    """A scope given by a person: GLOBAL_MEMORY, SESSION_MEMORY or their short forms, any case."""
    name = scope.strip().upper() if isinstance(scope, str) else scope
    if name not in SCOPE_NAMES:
        raise InvalidInputError(f"scope must be GLOBAL_MEMORY or SESSION_MEMORY, got {scope!r}")
    return SCOPE_NAMES[name]


def _check_record_id(record_id):
    """A record id as an int; numpy integers (from a pandas table in the lab) and digit strings pass."""
    if isinstance(record_id, str) and record_id.strip().isdigit():
        return int(record_id)
    if isinstance(record_id, bool) or not isinstance(record_id, numbers.Integral):
        raise InvalidInputError(f"a memory record id is an integer, got {record_id!r}")
    return int(record_id)
