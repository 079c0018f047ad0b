"""What an experiment is: arms (one strategy with its settings each) crossed with cases (a session
branch with its probes), read from YAML, Python dicts or the lab's tables and checked before anything runs.

Every check here is about the spec alone; ``check_cases`` then checks it against a store (sessions and
leaves exist). Problems are collected and refused together, each prefixed with where it is
(``arms[2] 'short-tail'``), so one run of ``memorylab eval`` shows everything to fix.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..errors import InvalidInputError
from ..history.compaction import check_summary_template
from ..llm.api_hosts import spec_call_problems
from ..validation import is_integer, is_number

PROBE_KINDS = ("recall", "artifact", "continuation", "decision")
DATASET_PROBE_KINDS = ("single-hop", "multi-hop", "temporal", "open-domain", "single-session-user",
                       "single-session-assistant", "single-session-preference", "multi-session",
                       "knowledge-update", "temporal-reasoning")
"""The question categories of the public benchmarks ``memorylab.datasets`` imports (LoCoMo's, then
LongMemEval's), kinds of the probes it writes."""
DEFAULT_CONCURRENCY = 4
MAX_CONCURRENCY = 64

_PLAN = {"protect_head": 3, "tail_token_budget": None, "min_tail_messages": 2}
_SUMMARIZER = {"template": None, "model": None, "completion": {}, "chunk_tokens": None}
_DECAY = {"rounds": None, "compact_at": None}
STRATEGY_DEFAULTS = {
    "summarize": {**_PLAN, **_SUMMARIZER, **_DECAY},
    "extractive": {**_PLAN, **_DECAY},
    "mask": {"keep_recent": 4, **_DECAY},
    "mask+summarize": {"keep_recent": 4, "token_budget": None, **_PLAN, **_SUMMARIZER, **_DECAY},
    "window": {"max_length": 12000, "handler": "simple_cut"},
    "truncate": {"keep_recent": 4, "max_tool_output_chars": 500, "max_text_chars": 10000},
    "none": {},
    "recorded": {},
}
"""Each strategy's settings and their defaults. ``tail_token_budget: None`` means a quarter of the
branch's tokens, so an arm compacts something on a branch of any size; ``model: None`` is the
embedded model; ``chunk_tokens: None`` fits each summary request in half the model's context window
(a span longer than that is summarized chunk by chunk, each request updating the summary so far).
``keep_recent`` is the window of newest messages a mask arm leaves whole; ``token_budget: None`` (a
mask+summarize arm summarizes only when the masked branch is over it) is half the branch's tokens.
``rounds`` (a list such as ``[1, 2, 4, 8]``) makes the arm a decay run: the branch is replayed and
compacted again each time it grows past ``compact_at`` tokens (None: the branch's tokens over one more
than the last round), and the probes about facts stated before the first compaction are scored after
each listed round."""

STRATEGY_HELP = {
    "summarize": "compaction plan, summary written by a model",
    "extractive": "compaction plan, summary built from the dropped span's most informative sentences (no model)",
    "mask": "observation masking: older tool outputs replaced by a placeholder, text and tool calls kept (no model)",
    "mask+summarize": "masking first; a compaction plan summarized by a model only when the masked branch is "
                      "over token_budget",
    "window": "a sliding context window: the newest messages that fit in max_length characters, the older ones "
              "left out",
    "truncate": "micro-compaction only: older tool outputs and long texts shortened",
    "none": "the full history: the ceiling",
    "recorded": "the compactions on record (the agent's own, imported, or accepted in the lab), replayed",
}
_SPEC_KEYS = ("name", "description", "concurrency", "min_score", "grader", "probes", "arms", "cases")
_ARM_KEYS = ("name", "strategy", "min_score")
_CASE_KEYS = ("name", "session", "agent", "tenant", "leaf", "probes")
_SELECTION_KEYS = ("select", "limit", "probes")
_SELECT_KEYS = ("source", "agent", "tenant", "min_messages", "search")
AUTO = "auto"
"""``probes: auto``: a case's probes drawn from its branch's artifact ledger (``auto_probes``)."""
_PROBE_KEYS = ("id", "kind", "question", "facts", "answer")
_GRADER_KEYS = ("answer_model", "judge_model", "completion")


@dataclass(frozen=True)
class Probe:
    """A question the compacted context must still answer. ``facts`` are matched in the context
    itself; ``answer`` is what a model-graded answer is judged against."""

    id: str
    kind: str
    question: str
    facts: tuple = ()
    answer: str | None = None

    def expected_facts(self) -> tuple:
        """The facts to match: the listed ones, or the expected answer as the one fact."""
        return self.facts or ((self.answer,) if self.answer else ())

    def to_dict(self) -> dict:
        plain = {"id": self.id, "kind": self.kind, "question": self.question, "facts": list(self.facts)}
        return plain | ({"answer": self.answer} if self.answer else {})


@dataclass(frozen=True)
class Case:
    """One branch (a session and a leaf; None is the newest leaf) and the probes asked of it. A case
    without a tenant reads the tenant of the experiment it runs under."""

    name: str
    session: str
    probes: tuple
    agent: str = "default"
    tenant: str | None = None
    leaf: str | None = None
    auto_probes: bool = False
    """Its probes are drawn from its branch when the experiment runs (``probes: auto``)."""

    def to_dict(self) -> dict:
        plain = {"name": self.name, "session": self.session, "agent": self.agent}
        plain |= {"tenant": self.tenant} if self.tenant else {}
        probes = AUTO if self.auto_probes and not self.probes else [p.to_dict() for p in self.probes]
        return plain | ({"leaf": self.leaf} if self.leaf else {}) | {"probes": probes}


@dataclass(frozen=True)
class CaseSelection:
    """Cases chosen from the store when the experiment runs: every session that ``select`` describes
    (its source format, agent, tenant, at least ``min_messages`` messages, an id or title holding
    ``search``), by session id, at most ``limit`` of them, each asked its automatic probes."""

    select: dict = field(hash=False)
    limit: int | None = None

    def to_dict(self) -> dict:
        return {"select": dict(self.select)} | ({"limit": self.limit} if self.limit is not None else {}) | {
            "probes": AUTO}


@dataclass(frozen=True)
class Arm:
    """One strategy with its settings (every key of ``STRATEGY_DEFAULTS[strategy]``, filled in)."""

    name: str
    strategy: str
    settings: dict = field(default_factory=dict, hash=False)
    min_score: float | None = None

    def to_dict(self) -> dict:
        plain = {"name": self.name, "strategy": self.strategy}
        plain.update((key, copy.deepcopy(value)) for key, value in self.settings.items()
                     if value != STRATEGY_DEFAULTS[self.strategy][key])
        return plain | ({"min_score": self.min_score} if self.min_score is not None else {})


@dataclass(frozen=True)
class Grader:
    """Model grading: ``answer_model`` answers each probe from the compacted context alone, and
    ``judge_model`` grades that answer against the expected one."""

    answer_model: str
    judge_model: str
    completion: dict = field(default_factory=dict, hash=False)

    def models(self) -> dict:
        return {"answer_model": self.answer_model, "judge_model": self.judge_model}

    def to_dict(self) -> dict:
        return self.models() | {"completion": dict(self.completion)}


@dataclass(frozen=True)
class ExperimentSpec:
    name: str
    arms: tuple
    cases: tuple
    description: str = ""
    concurrency: int = DEFAULT_CONCURRENCY
    min_score: float | None = None
    grader: Grader | None = None
    selections: tuple = ()
    """``CaseSelection``s, turned into cases against a store by ``select_cases``."""

    def arm(self, name) -> Arm:
        return _named(self.arms, name, "arm")

    def case(self, name) -> Case:
        return _named(self.cases, name, "case")

    def threshold(self, arm) -> float | None:
        """The score ``arm`` must reach: its own ``min_score``, else the experiment's."""
        return arm.min_score if arm.min_score is not None else self.min_score

    def to_dict(self) -> dict:
        plain = {"name": self.name}
        if self.description:
            plain["description"] = self.description
        if self.concurrency != DEFAULT_CONCURRENCY:
            plain["concurrency"] = self.concurrency
        if self.min_score is not None:
            plain["min_score"] = self.min_score
        if self.grader:
            plain["grader"] = self.grader.to_dict()
        cases = [c.to_dict() for c in self.cases] + [s.to_dict() for s in self.selections]
        return plain | {"arms": [a.to_dict() for a in self.arms], "cases": cases}

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False, allow_unicode=True, width=110)

    def _repr_html_(self):
        from ..display.notebook import spec_html

        return spec_html(self)


def _named(items, name, what):
    for item in items:
        if item.name == name:
            return item
    raise InvalidInputError(f"no {what} named {name!r}; the {what}s are {', '.join(repr(i.name) for i in items)}")


class _Problems:
    """The problems found in one spec, each with where it is."""

    def __init__(self, source):
        self.source = source
        self.found = []

    def add(self, where, text):
        self.found.append(f"{where}: {text}" if where else text)

    def raise_any(self):
        if self.found:
            lines = "\n".join(f"  - {problem}" for problem in self.found)
            raise InvalidInputError(f"{self.source} cannot run; nothing was run or saved:\n{lines}")


def load_spec(path) -> ExperimentSpec:
    """The spec in the YAML file at ``path``."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise InvalidInputError(f"cannot read the experiment spec {path}: {error.strerror or error}") from None
    return parse_spec_yaml(text, source=str(path))


def parse_spec_yaml(text, *, source="the experiment spec") -> ExperimentSpec:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise InvalidInputError(f"{source} is not valid YAML: {error}") from None
    return parse_spec(data, source=source)


def parse_spec(data, *, source="the experiment spec") -> ExperimentSpec:
    """An ``ExperimentSpec`` from plain data (a dict as YAML gives it), or InvalidInputError listing
    every problem."""
    if isinstance(data, ExperimentSpec):
        return data
    problems = _Problems(source)
    if not isinstance(data, dict):
        problems.add("", f"must be a mapping with name, arms and cases, got {type(data).__name__}")
        problems.raise_any()
    _unknown_keys(data, _SPEC_KEYS, "", problems)
    name = _text(data.get("name"), "name", problems)
    description = data.get("description") or ""
    if not isinstance(description, str):
        problems.add("description", "must be text")
    concurrency = data.get("concurrency", DEFAULT_CONCURRENCY)
    if not (is_integer(concurrency) and 1 <= concurrency <= MAX_CONCURRENCY):
        problems.add("concurrency", f"must be an integer from 1 to {MAX_CONCURRENCY}, got {concurrency!r}")
    min_score = _score(data.get("min_score"), "min_score", problems)
    grader = _grader(data.get("grader"), problems)
    arms = _list(data.get("arms"), "arms", problems, _arm)
    default_probes = data.get("probes")
    if default_probes not in (None, AUTO):
        problems.add("probes", f"at the top of a spec, probes can only be {AUTO!r} (every case without probes of "
                               f"its own asks its automatic ones), got {default_probes!r}")
    listed = _list(data.get("cases"), "cases", problems,
                   lambda item, where, found: _case_or_selection(item, where, found, default_probes == AUTO))
    cases = [case for case in listed if isinstance(case, Case)]
    selections = [case for case in listed if isinstance(case, CaseSelection)]
    for what, items in (("arm", arms), ("case", cases)):
        _unique([item.name for item in items], f"{what} names", problems)
    problems.raise_any()
    return ExperimentSpec(name=name, arms=tuple(arms), cases=tuple(cases), description=description,
                          concurrency=concurrency, min_score=min_score, grader=grader, selections=tuple(selections))


def _unknown_keys(data, known, where, problems):
    unknown = [key for key in data if key not in known]
    if unknown:
        problems.add(where, f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                            f"the keys are {', '.join(known)}")


def _text(value, where, problems, *, required=True):
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        problems.add(where, f"must be non-empty text, got {value!r}")
        return ""
    return value.strip()


def _score(value, where, problems):
    if value is not None and not (is_number(value) and 0 <= value <= 1):
        problems.add(where, f"must be a number from 0 to 1, got {value!r}")
        return None
    return value


def _list(value, where, problems, parse_item):
    if not isinstance(value, list) or not value:
        problems.add(where, f"must be a non-empty list, got {value!r}")
        return []
    parsed = []
    for index, item in enumerate(value):
        label = f"{where}[{index}]" + (f" {item.get('name', item.get('id'))!r}" if isinstance(item, dict) else "")
        if not isinstance(item, dict):
            problems.add(label, f"must be a mapping, got {type(item).__name__}")
            continue
        result = parse_item(item, label, problems)
        if result is not None:
            parsed.append(result)
    return parsed


def _unique(names, what, problems):
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        problems.add("", f"{what} must be unique; repeated: {', '.join(map(repr, repeated))}")


def _grader(value, problems):
    if value is None:
        return None
    if not isinstance(value, dict):
        problems.add("grader", "must be a mapping with answer_model and judge_model")
        return None
    _unknown_keys(value, _GRADER_KEYS, "grader", problems)
    completion = value.get("completion") or {}
    if not isinstance(completion, dict):
        problems.add("grader.completion", "must be a mapping of completion arguments")
        completion = {}
    grader = Grader(answer_model=_text(value.get("answer_model"), "grader.answer_model", problems),
                    judge_model=_text(value.get("judge_model"), "grader.judge_model", problems), completion=completion)
    for problem in spec_call_problems(grader.models(), completion):
        problems.add("grader", problem)
    return grader


def _arm(data, where, problems) -> Arm | None:
    name = _text(data.get("name"), f"{where} name", problems)
    strategy = data.get("strategy")
    if strategy not in STRATEGY_DEFAULTS:
        problems.add(where, f"strategy must be one of {', '.join(STRATEGY_DEFAULTS)}, got {strategy!r}")
        return None
    defaults = STRATEGY_DEFAULTS[strategy]
    _unknown_keys(data, _ARM_KEYS + tuple(defaults), where, problems)
    settings = {key: copy.deepcopy(data.get(key, default)) for key, default in defaults.items()}
    for problem in arm_setting_problems(strategy, settings):
        problems.add(where, problem)
    return Arm(name=name, strategy=strategy, settings=settings,
               min_score=_score(data.get("min_score"), f"{where} min_score", problems))


def arm_setting_problems(strategy, settings) -> list[str]:
    """What is wrong with one arm's settings (every key present), as sentences; [] when nothing is."""
    problems = [problem for key, value in settings.items()
                for problem in _setting_problems(key, value, STRATEGY_DEFAULTS[strategy][key], settings)]
    if strategy == "window":
        problems += _window_problems(settings, check_length=not problems)
    if settings.get("rounds") is not None:
        problems += _rounds_problems(settings["rounds"], settings["compact_at"])
    if "template" in settings and isinstance(settings["template"], str):
        try:
            check_summary_template(settings["template"])
        except InvalidInputError as error:
            problems.append(str(error))
    return problems


def _setting_problems(key, value, default, settings) -> list[str]:
    """What is wrong with one setting on its own: text, completion arguments, or a non-negative integer."""
    if key in ("template", "model", "handler"):
        if value is not None and (not isinstance(value, str) or not value.strip()):
            return [f"{key} must be non-empty text, got {value!r}"]
        return []
    if key == "rounds":
        return []  # a list: _rounds_problems reads it
    if key == "completion":
        if not isinstance(value, dict):
            return [f"completion must be a mapping of completion arguments, got {value!r}"]
        return spec_call_problems({"model": settings["model"]}, value)
    if not ((value is None and default is None) or (is_integer(value) and value >= 0)):
        return [f"{key} must be a non-negative integer, got {value!r}"]
    return []


def _rounds_problems(rounds, compact_at) -> list[str]:
    """A decay arm's rounds (increasing positive integers) and its threshold (at least one token)."""
    problems = []
    if not (isinstance(rounds, list) and rounds and all(is_integer(r) and r >= 1 for r in rounds)
            and rounds == sorted(set(rounds))):
        problems.append(f"rounds must be a list of increasing positive integers such as [1, 2, 4, 8], got {rounds!r}")
    if compact_at == 0:
        problems.append("compact_at must be at least 1 token (blank: the branch's tokens over the last round plus one)")
    return problems


def _window_problems(settings, *, check_length) -> list[str]:
    """A window arm's length (compared only once every setting is valid) and its handler's registration."""
    problems = []
    if check_length and settings["max_length"] < 1:
        problems.append("max_length must be at least 1 character")
    if isinstance(settings["handler"], str):
        from .strategies import WINDOW_HANDLERS

        if settings["handler"] not in WINDOW_HANDLERS:
            problems.append(f"handler {settings['handler']!r} is not registered; the registered ones are "
                            f"{', '.join(WINDOW_HANDLERS)} (register_window_handler adds one)")
    return problems


def _case_or_selection(data, where, problems, auto_by_default):
    return _selection(data, where, problems) if "select" in data else _case(data, where, problems, auto_by_default)


def _case(data, where, problems, auto_by_default=False) -> Case | None:
    _unknown_keys(data, _CASE_KEYS, where, problems)
    name = _text(data.get("name"), f"{where} name", problems)
    session = _text(data.get("session"), f"{where} session", problems)
    agent = _text(data.get("agent", "default"), f"{where} agent", problems)
    tenant = _text(data.get("tenant"), f"{where} tenant", problems, required=False)
    leaf = _text(data.get("leaf"), f"{where} leaf", problems, required=False)
    listed = data.get("probes")
    auto = listed == AUTO or listed is None and auto_by_default
    probes = [] if auto else _list(listed, f"{where} probes", problems, _probe)
    _unique([probe.id for probe in probes], f"{where} probe ids", problems)
    return Case(name=name, session=session, probes=tuple(probes), agent=agent, tenant=tenant, leaf=leaf,
                auto_probes=auto)


def _selection(data, where, problems) -> CaseSelection | None:
    _unknown_keys(data, _SELECTION_KEYS, where, problems)
    select, limit = data.get("select"), data.get("limit")
    if data.get("probes", AUTO) != AUTO:
        problems.add(where, f"the cases of a selection ask their automatic probes: probes can only be {AUTO!r}")
    if not isinstance(select, dict) or not select:
        problems.add(f"{where} select", f"must be a mapping of {', '.join(_SELECT_KEYS)}, got {select!r}")
        return None
    _unknown_keys(select, _SELECT_KEYS, f"{where} select", problems)
    for key in ("source", "agent", "tenant", "search"):
        if key in select:
            _text(select[key], f"{where} select.{key}", problems)
    if "min_messages" in select and not (is_integer(select["min_messages"]) and select["min_messages"] >= 0):
        problems.add(f"{where} select.min_messages", f"must be a non-negative integer, got {select['min_messages']!r}")
    if limit is not None and not (is_integer(limit) and limit >= 1):
        problems.add(f"{where} limit", f"must be a positive integer, got {limit!r}")
    return CaseSelection(select=dict(select), limit=limit)


def _probe(data, where, problems) -> Probe | None:
    _unknown_keys(data, _PROBE_KEYS, where, problems)
    kind = data.get("kind", "recall")
    if kind not in PROBE_KINDS + DATASET_PROBE_KINDS:
        problems.add(where, f"kind must be one of {', '.join(PROBE_KINDS)} (or a benchmark dataset's category: "
                            f"{', '.join(DATASET_PROBE_KINDS)}), got {kind!r}")
    facts = data.get("facts") or []
    if isinstance(facts, str):
        facts = [facts]
    if not isinstance(facts, list) or not all(isinstance(f, (str, int, float)) and str(f).strip() for f in facts):
        problems.add(where, "facts must be a list of non-empty texts")
        facts = []
    answer = data.get("answer")
    if answer is not None and not isinstance(answer, (str, int, float)):
        problems.add(where, "answer must be text")
        answer = None
    if not facts and not answer:
        problems.add(where, "needs facts or an answer: without one there is nothing to score")
    return Probe(id=_text(str(data["id"]) if data.get("id") is not None else None, f"{where} id", problems),
                 kind=kind, question=_text(data.get("question"), f"{where} question", problems),
                 facts=tuple(str(f).strip() for f in facts), answer=str(answer).strip() if answer else None)
