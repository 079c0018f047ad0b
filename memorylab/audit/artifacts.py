"""The artifact ledger: what an agent must not lose from a span of messages, found without a model.

``extract_artifacts`` reads user and assistant text, tool calls and tool results, and lists each
file path, shell command, URL, identifier (ticket and order keys, git SHAs, UUIDs, e-mail addresses,
phone numbers), quantity (a number with its unit or currency), date, version, error (an exception
line, a failing test) and decision or constraint the conversation stated. Precision comes first: a
ledger full of noise hides what a summary really dropped. So each kind is read only where it is
meaningful: a tool result (a file read, a log) gives only its errors, a code block in a message
only its errors, and decisions come from the conversation's own sentences, never from tool traffic.

Each artifact is listed once, at the first message that states it; ``normalized`` is the form two
mentions share, and ``match`` is what an audit looks for in a context (``memorylab.audit.audit``).
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import NamedTuple

from ..experiments.facts import MONTH_NUMBERS
from ..text_stretches import AnyOf, AsciiTwin, WordHints, stretches, stretches_around

KINDS = ("path", "command", "url", "identifier", "quantity", "date", "version", "error", "decision")
"""Every kind of artifact, in the order reports list them."""

SHELL_TOOLS = frozenset({
    "bash", "shell", "sh", "zsh", "terminal", "run_shell_command", "run_terminal_cmd", "execute_command",
    "exec_command", "local_shell", "shell_command", "run_command", "command", "container.exec", "exec",
})
"""Tool names (lower case) whose ``command`` input is a shell command line."""

_PATH_KEYS = ("file_path", "path", "filepath", "filename", "notebook_path", "file")
_URL_KEYS = ("url", "uri")
_TRIVIAL_COMMANDS = frozenset({"ls", "pwd", "cd", "clear", "exit", "true", "whoami", "date", "history"})
_MAX_COMMAND_CHARS = 300


@dataclass(frozen=True)
class Artifact:
    """One thing the span states: its ``kind``, its ``text`` as written, a ``normalized`` form that
    two mentions share, ``match`` (the terms a context must hold to keep it) and the message it
    came from."""

    kind: str
    text: str
    normalized: str
    match: str
    message_id: str

    def to_dict(self) -> dict:
        return asdict(self)


# -- finding each kind in a text ------------------------------------------------------------------

def _grouped(sources: Iterable[str]) -> str:
    """A pattern's source matching what any of ``sources`` matches, as their plain alternation would
    (the first that matches where the engine stands), each opening with a plain character. They are
    grouped by that character, so that where the engine stands it tries only the group that can
    start there instead of every source in turn: a search for hints then takes about half the time,
    and a unit after a number is read at once instead of tried against every unit in turn."""
    groups: dict[str, list[str]] = {}
    for source in sources:
        if not source or re.escape(source[0]) != source[0]:
            raise ValueError(f"{source!r} does not open with a plain character")
        groups.setdefault(source[0], []).append(source[1:])
    return "|".join(f"{first}(?:{'|'.join(rests)})" for first, rests in groups.items())


def _alternation(sources: Iterable[str]) -> re.Pattern:
    """``_grouped`` compiled."""
    return re.compile(_grouped(sources))


_URL = re.compile(r"https?://[^\s<>\"'`()\[\]{}|\\^]+")
_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
_UUID = re.compile(r"(?<![\w-])[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(?![\w-])")
_EXTENSIONS = (
    "py|pyi|pyx|ipynb|js|jsx|ts|tsx|mjs|cjs|json|jsonl|md|mdx|rst|txt|yaml|yml|toml|ini|cfg|conf|env|lock|"
    "csv|tsv|parquet|sql|db|sqlite|sh|bash|zsh|ps1|rs|go|java|kt|scala|c|h|cc|cpp|hpp|cs|rb|php|swift|"
    "html|htm|css|scss|vue|svelte|xml|gradle|tf|proto|log|pdf|png|jpg|jpeg|gif|svg|zip|gz|tgz|whl|gguf"
)
_PATH = re.compile(
    r"""(?<![\w/.@:~$%\\-])
    (?P<path>
        (?:~|\.{1,2})?/(?:[\w@+-][\w.@+-]*/)+[\w@+-][\w.@+-]*/?      # /etc/app/x.conf, ./src/a, ~/x/y
      | (?:[\w@+-][\w.@+-]*/)+(?:[\w@+-][\w.@+-]*)?                   # src/app/main.py, src/app/
    )(?![\w/]|\.\w)""",
    re.VERBOSE,
)
_FILE_NAME = re.compile(
    rf"(?<![\w/.@:~$%\\-])(?:[\w-][\w.-]*\.(?:{_EXTENSIONS})|Dockerfile|Makefile|Procfile|Gemfile|Justfile"
    r"|\.[a-z]+rc|\.env|\.gitignore)(?![\w/]|\.\w)"
)
_FILE_HINT = AnyOf(
    rf"\.(?:(?:{_EXTENSIONS})(?![\w/]|\.\w)|env|git|[a-z]+rc\b)",
    r"file(?:(?<=Dockerfile)|(?<=Makefile)|(?<=Procfile)|(?<=Gemfile)|(?<=Justfile))",
)
"""Where a file name can stand: an extension, a dot file, a well-known name (found where it ends)."""
_FRAMEWORK_NAMES = frozenset({"node.js", "vue.js", "next.js", "nuxt.js", "express.js", "three.js", "chart.js",
                              "d3.js", "react.js", "ember.js", "backbone.js", "nest.js", "deno.js", "p5.js",
                              "console.log"})
_VERSION_NAME = _alternation([
    "Python", "python", r"Node(?:\.js)?", r"node(?:\.js)?", "Postgre(?:SQL|s)", "postgres", "Java", "Ruby", "Go",
    "Rust", "PHP", "Django", "Rails", "React", "Ubuntu", "Debian", "macOS", "iOS", "Android", "Chrome", "Firefox",
    "Redis", "MySQL", "Kubernetes", "Docker", "Terraform", "Version", "version", "Release", "release",
])
"""What a named version opens with: every match of _NAMED_VERSION holds one."""
_NAMED_VERSION = re.compile(rf"(?<![\w.])(?:{_VERSION_NAME.pattern})\s+v?\d+(?:\.\d+)*(?![\w]|\.\d)")
_NUMBERED_VERSION = re.compile(
    r"""(?<![\w.])(?:
        (?P<tagged>v\d+(?:\.\d+)+(?:-[0-9A-Za-z.]+)?)
      | (?P<pinned>(?<=[=@~^<>])\d+(?:\.\d+)+(?:[-+.]?[0-9A-Za-z]+)*)
      | (?P<triple>(?!(?:19|20)\d\d\.\d\d\.\d\d)\d+\.\d+\.\d+(?:-(?:rc|alpha|beta|dev|post)\.?\d*)?)
    )(?![\w]|\.\d)""",
    re.VERBOSE,
)
_MONTH = (r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sep(?:t(?:ember)?)?"
          r"|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)")
_NUMERIC_DATE = AsciiTwin(  # opens with its first digit, as _QUANTITY does
    r"\d(?<![\w.-]\d)(?:(?P<iso>\d{3}-\d{2}-\d{2})(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
    r"|(?P<dotted>\d?\.\d{1,2}\.\d{4}))(?![\w])",
    r"\d", "[0-9]",
)
_WRITTEN_DATE = re.compile(
    rf"""(?<![\w.-])(?:
        (?P<day_first>\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}\.?,?(?:\s+\d{{4}})?)
      | (?P<month_first>{_MONTH}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?)
      | (?P<month_year>{_MONTH}\s+\d{{4}})
    )(?![\w])""",
    re.VERBOSE,
)
_MONTH_HINT = re.compile("Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec")
_TICKET = re.compile(
    r"[A-Z#](?:(?<=[A-Z])(?<![\w-].)[A-Z0-9]{0,9}-\d{2,}(?:-\d{2,})?(?![\w-])|(?<=#)(?<![\w&#].)\d{2,6}\b)")
"""A key (ABC-123, RF-2025-031977, CVE-2024-3094) or a number (#123). Like _QUANTITY, it opens with its
first character and looks behind that one, so that the regex engine skips to the characters a match
can start with."""
_NOT_TICKETS = frozenset({"SHA", "ISO", "UTF", "AES", "RSA", "MD", "COVID", "GPT", "HTTP", "TLS", "SSL", "PEP", "ES",
                          "X", "RFC", "IEC", "CP", "WINDOWS", "LATIN", "ASCII", "FIPS", "ECMA", "IPV", "H", "E"})
_SHA = re.compile(r"(?<![\w-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}(?![\w-])")
_PHONE = re.compile(
    r"(?<![\w+])(?:\+\d{1,3}(?:[ .-]\(?\d{1,4}\)?){1,2}(?:[ .-]\d{2,4}){1,3}|\(\d{3}\)\s?\d{3}[-.]\d{4}"
    r"|\d{3}[-.]\d{3}[-.]\d{4}|\+[1-9]\d{9,13})(?![\w-])"  # the last: E.164, digits only (+447700900123)
)
_UNIT_WORDS = (
    r"%|percent|ms|milliseconds?|s|secs?|seconds?|mins?|minutes?|h|hrs?|hours?|days?|weeks?|months?|years?|"
    r"Ki?B|Mi?B|Gi?B|Ti?B|Pi?B|bytes?|tokens?|req/s|rps|qps|requests?|rows?|records?|items?|users?|messages?|"
    r"files?|lines?|px|MHz|GHz|kg|km|cm|mm|miles?|nights?|people|guests?|seats?|orders?|retries|attempts?|times|"
    r"USD|EUR|GBP|JPY|CHF|dollars?|euros?|pounds?|cores?|workers?|threads?|replicas?|x"
).split("|")
_UNITS = _grouped(_UNIT_WORDS)
_UPPER_END = r"(?:\s?[–-]\s?[$€£¥]?\d(?:[\d,]*\d)?(?:\.\d+)?)?"
"""The upper end of a range ("€15–20", "3-4 days", "58–62%"), which belongs to its quantity."""
_RATE = r"(?:\s?/\s?[A-Za-z]{1,10}(?![\w/])|\s+per\s+[A-Za-z]{2,10}\b)?"
"""What a quantity is counted per ("€150/night", "7 MB/s", "17 GB per day")."""
_HOURS = r"\s?(?:h|hrs?|hours?)"
_MINUTES = r"\s?\d{1,2}\s?(?:m|mins?|minutes?)\b"
_SECONDS = r"\s?\d{1,2}\s?(?:s|secs?|seconds?)\b"
"""The parts of a duration in hours and minutes ("5h 41m", "2 h 50 min") or minutes and seconds."""
_QUANTITY = AsciiTwin(
    rf"""[$€£¥\d](?<![\w.,/-].)(?:     # an amount or a number with its unit, not part of a word or a number
        (?<=[$€£¥])\s?\d(?:[\d,]*\d)?(?:\.\d+)?{_UPPER_END}(?:\s?(?:k|K|M|bn|million|billion|thousand)\b)?{_RATE}
      | (?<=\d)(?>[\d,]*(?:\.\d+)?)(?:
            {_HOURS}{_MINUTES}(?:{_SECONDS})?|\s?(?:m|mins?|minutes?){_SECONDS}   # 5h 41m, 2 min 08 s
          | {_UPPER_END}(?:\s?(?:k|M|million|billion|thousand))?(?:\s|-)?(?:{_UNITS})
            (?![\w]|-[A-Za-z]){_RATE}   # not the start of a name: "40 orders-api pods"
        )
    )""",
    r"[$€£¥\d]", "[$€£¥0-9]", re.VERBOSE,
)
"""A pattern that opens with a look-behind makes the regex engine try a match at every position; one
that opens with a character class lets it skip to the characters in that class. So this one opens with
its first character, then looks behind that character at the one before it. The number is read
atomically (``(?>...)``): no unit opens with a digit, a comma or a dot, so giving back its digits one by
one to try the units again could never match, and cost most of the pattern's time. A range, a rate
and a duration in hours and minutes are one quantity: "€15" of "€15–20" or "5h" of "5h 41m" would be a
different fact."""
_QUANTITY_JOINS = re.compile(r"(?<=\d)\s*[–-]\s*(?=[$€£¥]?\d)|\s*/\s*(?=[A-Za-z])|\s+per\s+|(?<=\d)\s?m\b")
"""What an audit does not ask a context to write as the quantity does: the dash of a range, the slash
or "per" of a rate ("€150 a night" keeps "€150/night"), and the "m" of minutes, which the fact matcher
reads as a word ("41 min" keeps "5h 41m")."""
_PLACEHOLDER = re.compile(r"\$\d")
"""``$1`` in code is a query's parameter, not a dollar."""
_ERROR_LINES = (
    r"\s*(?:E\s+)?(?:[\w.]+\.)?(?P<name>[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Fault|Failure))"
    r"(?::\s*(?P<message>\S.*))?$",
    r"\s*(?:E\s+)?(?P<generic>(?:error(?:\[\w+\])?|fatal|panic|npm ERR!|ERROR|FATAL)):?\s+(?P<detail>\S.{3,})$",
    r"\s*E\s+(?P<assertion>assert\s.+)$",
    r"\s*\d+:\d+\s+error\s+(?P<lint>\S.+)$",
)
"""The lines that state an error, each as read from where its line starts."""
_EXCEPTION_LINE = re.compile(rf"\n(?:{'|'.join(_ERROR_LINES)})", re.MULTILINE)
"""An error line, with the line break before it: it reads a text with a line break put in front. A
pattern opening with ``^`` makes the regex engine try a match at every position; one opening with a
line break lets it skip from line to line."""
_EXCEPTION_NAME = re.compile(r"\b(?:[A-Z][a-z0-9]+)+(?:Exception|Error)\b")
_FAILED_TEST = re.compile(r"^\s*(?:FAILED\s+(?P<first>\S+::\S+)|(?P<last>\S+::\S+)\s+FAILED|--- FAIL: (?P<go>\w+))",
                          re.MULTILINE)
_ERROR_HINTS = ("Error", "Exception", "Exit", "Interrupt", "Fault", "Failure", "error", "fatal", "panic", "ERR",
                "FATAL", "FAIL")
_FENCE = re.compile(r"^```[ \t]*(?P<lang>[\w+-]*)[^\n]*\n(?P<body>.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_SHELL_LANGUAGES = frozenset({"sh", "bash", "shell", "console", "zsh", "terminal", "shell-session", "ps", "powershell"})
_INLINE_CODE = re.compile(r"`([^`\n]+)`")


class _Caseless:
    """A case-blind pattern (its source in lower case) that reads a text's lowered copy wherever that
    finds the same matches, which is nearly always: a case-blind regex tries each alternative at each
    position, a plain one drops an alternative at its first letter. Every match holds one of the
    words of ``near`` (``WordHints``, lower case too) and spans at most ``_STATEMENT_REACH`` words
    either side of it, so the pattern reads only the stretches of the text near those
    (``memorylab.text_stretches``)."""

    _TRAPS = ("\u0130", "\u0131", "\u017f")
    """İ, which lowers to two characters, and ı and ſ, which match i and s case-blind but lower to
    themselves: in Python 3.11's Unicode tables, the only characters where the two ways differ."""

    def __init__(self, source, near):
        self.blind = re.compile(source, re.IGNORECASE)
        self.plain = re.compile(source)
        self.near = near

    def finditer(self, text, lower) -> Iterator[re.Match]:
        """The matches in ``text``, ``lower`` being ``text.lower()``."""
        if text.isascii() or not any(trap in text for trap in self._TRAPS):
            for start, end in stretches_around(lower, self.near.spans(lower), _STATEMENT_REACH):
                yield from self.plain.finditer(lower, start, end)
        elif self.near.found_in(lower):
            yield from self.blind.finditer(text)


_STATEMENT_REACH = 3
"""Words a decision or a constraint spans beyond its hint: "we are going to go with" holds "going"."""
_DECISION_HINTS = ("agreed", "we'll", "we will", "i'll", "i will", "going", "we should", "i should", "decided",
                   "let's", "let us", "settled", "opted", "go with", "ahead with")
_CONSTRAINT_HINTS = ("never", "always", "don't", "do not", "keep", "must", "no new", "no more", "at most", "at least",
                     "under no", "not allowed", "only use", "make sure", "from now on", "stay under", "limit", "rather",
                     "prefer")
_DECISION = _Caseless(
    r"\b(?:(?:we|i)(?:'ll| will| are going to|'re going to| should| decided to| have decided to|'ve decided to)"
    r"|going forward,?)\s+(?:use|go with|switch to|stick with|adopt|migrate to|move to|target|ship|drop"
    r"|standardi[sz]e on)\b"
    r"|\blet(?:'s| us)\s+(?:do|go|make|use|lock|close|switch|move|stick|pin|drop|ship|skip|stay|book|take|cut)\b"
    r"|\b(?:settled on|opted for|going with|go (?:ahead )?with|decided (?:to|on|for|that))\b"
    r"|\b(?P<opening>agreed\b|(?:revised |final )?decision\b\s*(?:\([^)\n]{0,30}\))?\s*[:.])",
    # "decision" with the aside it may carry ("Decision (final, v2):"), however many words that holds
    WordHints([*_DECISION_HINTS, "decision"], widen={"decision": re.compile(r"(?:\s*\([^)\n]{0,30}\))?")}),
)
_CONSTRAINT = _Caseless(
    r"\b(?P<opening>never|always|don't|do not|keep)\b"
    r"|\b(?:don't|do not|never) (?:use|add|push|touch|change|delete|remove|send|call|contact|commit|merge|deploy|run"
    r"|install|include|put|ship|break)\b"
    r"|\bmust(?:n't| not)? (?:be|stay|remain|use|have|run|go|fit|keep|not|never|always|include|happen|finish|pass)\b"
    r"|\b(?:no new|no more than|at most|at least|under no circumstances|not allowed|only use|make sure|from now on"
    r"|keep it under|stay under|limit(?:ed)? to|i'd rather|i would rather|i prefer)\b",
    WordHints(_CONSTRAINT_HINTS),
)
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|\n")
"""Where a sentence ends: a stop before a space or the end (not "7.10", "e.g.x"), or a line break."""
_MATCH_NOISE = re.compile(
    r"\b(?:we|i|we'll|i'll|let's|let|us|will|shall|should|going|to|decided|decision|is|agreed|settled|on|opted|for|"
    r"please|ok|okay|so|then|the|a|an|and|just)\b",
    re.IGNORECASE,
)


def _normalized_path(text):
    return text[2:] if text.startswith("./") else text.rstrip("/") or text


def _is_path(text):
    if text.lower() in _FRAMEWORK_NAMES or "//" in text:
        return False
    segments = [s for s in text.strip("/").split("/") if s not in ("", ".", "..", "~")]
    if not segments or all(s.isdigit() for s in segments):
        return False
    if "/" not in text:
        return True  # a bare file name with a known extension, or a well-known file
    last = segments[-1]
    has_extension = bool(re.search(r"[^.]\.[A-Za-z][\w]{0,7}$", last))
    if text.startswith(("/", "./", "../", "~/")):
        return has_extension or len(segments) >= 2
    return has_extension or text.endswith("/") and len(segments) >= 1 and len(text) > 4 or len(segments) >= 3


def _clean_url(url):
    url = url.rstrip(".,;:!?'\"*_")
    scheme, _, rest = url.partition("://")
    host, slash, tail = rest.partition("/")
    normalized = f"{scheme.lower()}://{host.lower()}{slash}{tail}".rstrip("/")
    return url, normalized


_MONTH_NAME = re.compile(_MONTH)
_DAY_OR_YEAR = re.compile(r"\d+")


def _date_form(match) -> str | None:
    """One form for a day however it is written: ``YYYY-MM-DD``, ``--MM-DD`` without its year (ISO
    8601's), ``YYYY-MM`` for a month of a year; None where the date is no day of a calendar
    ("0000-00-00")."""
    text, groups = match.group(0), match.groupdict()
    if groups.get("iso"):
        year, month, day = text[:10].split("-")
    elif groups.get("dotted"):
        day, month, year = text.split(".")
    else:
        month = MONTH_NUMBERS[_MONTH_NAME.search(text).group(0)[:3].lower()]
        numbers = _DAY_OR_YEAR.findall(text)
        year = next((n for n in numbers if len(n) == 4), None)
        day = next((n for n in numbers if len(n) <= 2), None)
    month, day = int(month), day and int(day)
    if not 1 <= month <= 12 or day is not None and not 1 <= day <= 31:
        return None
    if day is None:
        return f"{year}-{month:02}"
    return f"{year}-{month:02}-{day:02}" if year else f"--{month:02}-{day:02}"


def _restatement_keys(kind, form) -> tuple:
    """For a date: the key an earlier mention of the same day leaves that this one's own key is not
    (the day with a year for one without, and the other way round), and the key this one leaves
    besides its own. "12 June" after "12.06.2026" is the same day, "2025-06-12" after it another."""
    if kind != "date":
        return None, None
    if form.startswith("--"):
        return ("date", "day:" + form[2:]), None
    if len(form) == 10:
        return ("date", "--" + form[5:]), ("date", "day:" + form[5:])
    return None, None


def _named_version(match):
    name, number = match.group(0).rsplit(None, 1)
    name = "" if name.lower() in ("version", "release") else name.lower() + " "
    return match.group(0), name + number.lstrip("v")


_DIGIT = AsciiTwin(r"\d", r"\d", "[0-9]")
_DOTTED_NUMBER = AnyOf(r"\.(?<=\d\.)\d")
_DASHED_NUMBER = AnyOf(r"-(?<=\d-)\d", r"\.(?<=\d\.)\d")
"""Digits joined by a dash or a dot, found at the dash or the dot: every numeric date holds one."""
_NAMED_VERSION_HINT = re.compile(rf"(?:{_VERSION_NAME.pattern})\s+v?\d")
# The hints below open with a character or a class, not a look-behind or a repeat: the regex engine
# then skips straight to where that character stands instead of trying a match at every position
# (and skips fastest to one plain character: ``AnyOf``).
_UUID_HINT = re.compile(r"-[0-9a-fA-F]{4}-")
_TICKET_HINT = AnyOf(r"-\d\d", r"#\d\d")
_HEX_PAIR = AsciiTwin(r"\d(?:[a-f]|(?<=[a-f]\d))", r"\d", "[0-9]")
"""A digit beside a letter a-f: every SHA has one, being hex with both."""
_PHONE_HINT = re.compile(r"[-+.(]\d(?:(?<=[+(]\d)|\d\d[-.]\d)")
"""+1..., (5... or ...-123-4...: opening with a class, not with alternatives, lets the regex engine
skip to those four characters."""


def _ticket(match):
    key = match.group(0)
    if not key.startswith("#") and key.split("-")[0] in _NOT_TICKETS:
        return None
    return "identifier", key, key.upper()


def _path(match):
    path = match.group(0).rstrip(".")
    return ("path", path, _normalized_path(path)) if _is_path(path) else None


class _ProseKind(NamedTuple):
    """How one kind is found in prose: ``pattern``, whose matches ``found`` turns into artifacts. Where
    ``near`` is set, every match of ``pattern`` holds a match of ``near`` and spans at most ``reach``
    whitespace-separated words either side of it, so the pattern is run only on those stretches: it
    finds the same matches, as it would otherwise try a match at every position of a long text (a
    pattern that opens with a look-behind cannot skip ahead). ``gate(text, start, end)``, where set,
    is a cheap test that spares most texts the pattern. ``digits`` says that every match holds a
    digit and reaches at most ``_DIGIT_REACH`` words beyond its digits, so it lies in the text's digit
    window (``_digit_window``): the hints, the gate and the pattern read only that, and find there
    every hint a match holds."""

    pattern: re.Pattern | AsciiTwin
    found: Callable
    near: re.Pattern | AnyOf | AsciiTwin | None = None
    reach: int = 0
    """Words either side of a match of ``near`` (``memorylab.text_stretches``)."""
    gate: Callable | None = None
    digits: bool = False


_DIGIT_REACH = 3
"""Words a match of a digit kind reaches beyond its digits: a name before a version ("Python 3.11"),
a currency before an amount ("$ 40"), a magnitude and a unit after a number ("5 million dollars"), a
unit and what it is counted per ("17 GB per day")."""


def _digit_window(text, first) -> tuple[int, int]:
    """Where in ``text`` a digit kind can match: from ``_DIGIT_REACH`` words before its first digit
    (at ``first``) to as many after its last; the text before and after holds no digit. The last
    digit is found as the first of the reversed text, which reads only what follows it."""
    last = len(text) - _DIGIT.search(text[::-1]).start()
    (start, end), = stretches_around(text, ((first, last),), _DIGIT_REACH)
    return start, end


def _identifier(match):
    return "identifier", match.group(0), match.group(0).lower()


def _in_inline_code(match) -> bool:
    """Whether ``match`` stands between backticks on its line."""
    text = match.string
    return text.count("`", text.rfind("\n", 0, match.start()) + 1, match.start()) % 2 == 1


def _quantity(match):
    text = match.group(0)
    if _PLACEHOLDER.fullmatch(text) and _in_inline_code(match):
        return None
    return "quantity", text, " ".join(text.replace(",", "").split()).lower(), _QUANTITY_JOINS.sub(" ", text)


def _date(match):
    form = _date_form(match)
    return ("date", match.group(0).rstrip(".,"), form) if form else None  # "on 12 June." ends at its day


_PROSE_KINDS = (
    _ProseKind(_URL, lambda m: ("url", *_clean_url(m.group(0))), gate=re.compile("://").search),
    _ProseKind(_EMAIL, _identifier, re.compile("@")),
    _ProseKind(_UUID, _identifier, _UUID_HINT),
    _ProseKind(_PATH, _path, re.compile("/")),
    _ProseKind(_FILE_NAME, _path, _FILE_HINT),
    _ProseKind(_NUMERIC_DATE, _date, gate=_DASHED_NUMBER.search, digits=True),
    _ProseKind(_WRITTEN_DATE, _date, _MONTH_HINT, 2, digits=True),
    _ProseKind(_NAMED_VERSION, lambda m: ("version", *_named_version(m)), _NAMED_VERSION_HINT, digits=True),
    _ProseKind(_NUMBERED_VERSION, lambda m: ("version", m.group(0), m.group(0).lstrip("v")), _DOTTED_NUMBER,
               digits=True),
    _ProseKind(_TICKET, _ticket, gate=_TICKET_HINT.search, digits=True),
    _ProseKind(_SHA, lambda m: ("identifier", m.group(0), m.group(0)), _HEX_PAIR, digits=True),
    _ProseKind(_PHONE, lambda m: ("identifier", m.group(0), re.sub(r"[^\d+]", "", m.group(0))), _PHONE_HINT, 5,
               digits=True),
    _ProseKind(_QUANTITY, _quantity, digits=True),
)


def _opens_sentence(text, at) -> bool:
    """Whether ``at`` starts a sentence of ``text`` (markdown marks and a "please" before it allowed)."""
    before = text[:at].rstrip(" *_#>-")
    if before.lower().endswith("please"):
        before = before[:-6].rstrip(" *_#>-")
    return not before or before[-1] in ".!?\n:" or before.endswith(("\n", ". "))


class _Finder:
    """The artifacts of one message, each span of its text claimed by the first kind that finds it."""

    def __init__(self, message_id):
        self.message_id = message_id
        self.found: list[Artifact] = []

    def add(self, kind, text, normalized=None, match=None):
        text = text.strip()
        if text:
            self.found.append(Artifact(kind, text, normalized or text, match or text, self.message_id))

    def named_errors(self, text):
        """Exception names a message's words mention ("the job died with a NullPointerException")."""
        if "Error" in text or "Exception" in text:
            for name in _EXCEPTION_NAME.findall(text):
                self.add("error", name)

    def prose(self, text):
        """Everything a message's own words can state, outside its code blocks: each kind in turn,
        a span of the text going to the first kind that claims it (a URL's path is not a path)."""
        claimed = bytearray(len(text))
        digit = _DIGIT.search(text)
        window = _digit_window(text, digit.start()) if digit else None
        for kind in _PROSE_KINDS:
            if kind.digits and window is None:
                continue
            start, end = window if kind.digits else (0, len(text))
            if kind.gate and not kind.gate(text, start, end):
                continue
            for start, end in stretches(text, kind.near, kind.reach, start, end) if kind.near else ((start, end),):
                for match in kind.pattern.finditer(text, start, end):
                    self._claim(claimed, match, kind.found)

    def _claim(self, claimed, match, found):
        start, end = match.span()
        if claimed.find(1, start, end) < 0:
            artifact = found(match)
            if artifact:
                claimed[start:end] = b"\1" * (end - start)
                self.add(*artifact)

    def statements(self, text, constraints):
        """Decisions (anyone's) and constraints (the user's: an assistant's "never" is mostly an
        explanation): sentences, not questions, that choose or forbid something."""
        lower = text.lower()
        triggers = []
        for pattern in (_DECISION, _CONSTRAINT) if constraints else (_DECISION,):
            # An opening word ("agreed", "Decision:", "never", "keep") counts only where a sentence starts.
            triggers += [m.start() for m in pattern.finditer(text, lower)
                         if not m["opening"] or _opens_sentence(text, m.start())]
        done = -1
        for at in sorted(triggers):
            if at < done:
                continue
            begin = max((m.end() for m in _SENTENCE_END.finditer(text, 0, at)), default=0)
            end = _SENTENCE_END.search(text, at)
            done = end.start() + 1 if end else len(text)
            sentence = text[begin:done].replace("**", "").replace("__", "").strip(" \t-*>#")
            if sentence.endswith("?") or text[done:done + 1] == "?" or not 3 <= len(sentence.split()) <= 40:
                continue
            core = " ".join(_MATCH_NOISE.sub(" ", sentence.rstrip(".!")).split())
            self.add("decision", sentence, " ".join(sentence.lower().rstrip(".!").split()), core or sentence)

    def errors(self, text):
        if not any(hint in text for hint in _ERROR_HINTS):
            return
        block_end = -1  # consecutive generic error lines (npm ERR!, error:) are one error: their first line
        for match in _EXCEPTION_LINE.finditer("\n" + text):  # a match starts where its line does in ``text``
            if match["name"]:
                name, message = match["name"], (match["message"] or "").strip()
                line = f"{name}: {message}" if message else name
                generic = name in ("Error", "Exception")
                self.add("error", line[:200], " ".join(line.split())[:200], message[:120] if generic else name)
            elif match["generic"]:
                if match.start() > block_end + 1:  # not the line after the last
                    detail = match["detail"].strip()
                    self.add("error", f"{match['generic']}: {detail}"[:200], " ".join(detail.split())[:200].lower(),
                             detail[:120])
                block_end = match.end() - 1
            else:
                line = (match["assertion"] or match["lint"]).strip()
                self.add("error", line[:200], " ".join(line.split())[:200], line[:120])
        for match in _FAILED_TEST.finditer(text) if "FAIL" in text else ():
            test = match["first"] or match["last"] or match["go"]
            self.add("error", f"FAILED {test}", test, test.rsplit("::", 1)[-1])

    def command(self, line):
        line = " ".join(line.strip().split())
        for prefix in ("$ ", "> ", "# "):
            if line.startswith(prefix):
                line = line[len(prefix):]
        while re.match(r"cd \S+ (?:&&|;) ", line):
            line = line.split(None, 3)[3]
        if not line or line.split()[0] in _TRIVIAL_COMMANDS or len(line) > _MAX_COMMAND_CHARS:
            return
        self.add("command", line, line)

    def message_text(self, text, role):
        """A text part: its code blocks give shell commands and errors, the rest all the prose kinds."""
        prose, cursor = [], 0
        for block in _FENCE.finditer(text) if "```" in text else ():  # a regex opening with ^ tries every position
            prose.append(text[cursor:block.start()])
            cursor = block.end()
            body, language = block["body"], block["lang"].lower()
            if language in _SHELL_LANGUAGES:
                for line in body.splitlines():
                    if line.startswith("$ ") or language in ("sh", "bash", "zsh", "shell") \
                            and line.strip() and not line.lstrip().startswith("#"):
                        self.command(line)
            self.errors(body)
        prose.append(text[cursor:])
        outside = "\n".join(prose)
        self.errors(outside)
        for inline in _INLINE_CODE.findall(outside):
            if inline.startswith("$ "):
                self.command(inline)
        self.prose(outside)
        self.named_errors(outside)
        self.statements(_INLINE_CODE.sub(lambda m: m.group(1), outside), constraints=role == "user")

    def tool_call(self, part):
        name = str(part.get("toolName") or part.get("type", "")[5:]).lower()
        arguments = part.get("input")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                arguments = {"command": arguments} if name in SHELL_TOOLS else {}
        if not isinstance(arguments, dict):
            return
        command = arguments.get("command") or arguments.get("cmd")
        if command and (name in SHELL_TOOLS or "shell" in name or "bash" in name or "exec" in name):
            self.shell_command(command)
        for key in _PATH_KEYS:
            value = arguments.get(key)
            if isinstance(value, str) and len(value) < 300 and _PATH.fullmatch(value) and _is_path(value):
                self.add("path", value, _normalized_path(value))
        for key in _URL_KEYS:
            value = arguments.get(key)
            if isinstance(value, str) and _URL.fullmatch(value.strip()):
                self.add("url", *_clean_url(value.strip()))

    def shell_command(self, command):
        """A shell tool's command: its first line, or an argv list without its ``bash -lc`` wrapper."""
        if isinstance(command, list):
            wrapped = command[:2] in (["bash", "-lc"], ["bash", "-c"], ["sh", "-c"])
            command = " ".join(map(str, command[2:] if wrapped else command))
        if isinstance(command, str):
            self.command(command.splitlines()[0] if command.strip() else "")

    def tool_result(self, part):
        output = part.get("output")
        if output is None:
            return
        text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
        self.errors(text[:200_000])


def message_artifacts(message) -> list[Artifact]:
    """Every artifact one message states, in the order found (repeats included)."""
    finder = _Finder(message.get("id", ""))
    role = message.get("role")
    if role not in ("user", "assistant", "tool"):
        return []
    for part in message.get("parts") or ():
        if not isinstance(part, dict):
            continue
        kind = part.get("type", "")
        if kind == "text" and role != "tool" and isinstance(part.get("text"), str):
            finder.message_text(part["text"], role)
        elif kind.startswith("tool-") or kind == "dynamic-tool":
            if part.get("input") is not None and role == "assistant":
                finder.tool_call(part)
            if part.get("output") is not None:
                finder.tool_result(part)
    return finder.found


def extract_artifacts(messages: Iterable) -> list[Artifact]:
    """The ledger of ``messages``: each artifact once (by kind and normalized form), at the first
    message that states it, in the order the span states them."""
    seen, ledger = set(), []
    for message in messages:
        for artifact in message_artifacts(message):
            key = (artifact.kind, artifact.normalized.lower())
            restated, leaves = _restatement_keys(artifact.kind, artifact.normalized)
            if key not in seen and (restated is None or restated not in seen):
                seen.add(key)
                if leaves:
                    seen.add(leaves)
                ledger.append(artifact)
    return ledger


def iter_text(message) -> Iterator[str]:
    """What a message puts in front of a model, as texts: its text parts, each tool call's input
    and each tool result (an audit looks for artifacts in all of them)."""
    for part in message.get("parts") or ():
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text" and isinstance(part.get("text"), str):
            yield part["text"]
        for key in ("input", "output"):
            value = part.get(key)
            if value is not None and part.get("type", "").startswith(("tool-", "dynamic-tool")):
                yield value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
