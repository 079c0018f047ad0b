"""``memorylab check``: is a database file sound, and can every message be read as it should?

Each check asks the store a question whose answer is empty on a healthy file and words what it
finds. An ``error`` means data is damaged, unreachable or wrongly indexed; a ``warning`` means
something is inconsistent while every message still reads correctly (an overlay that can never
apply, a stale pointer). Nothing is repaired; where the repair is simple, the finding names it.
"""
from dataclasses import dataclass

from .errors import StoreError
from .history.session import Session
from .history.tool_pairs import lint_tool_pairs

ERROR, WARNING = "error", "warning"
EXAMPLES = 5
"""How many offending rows a finding names; the count covers them all."""


@dataclass(frozen=True)
class Finding:
    """One problem: the check that found it, ``error`` or ``warning``, and what it is."""

    check: str
    severity: str
    message: str


def _session(row):
    where = [f"agent {row['agent_id']!r}"] if row["agent_id"] != "default" else []
    where += [f"tenant {row['tenant_id']!r}"] if row["tenant_id"] != "default" else []
    return f"session {row['session_id']!r}" + (f" ({', '.join(where)})" if where else "")


def _examples(rows, describe):
    shown = "; ".join(describe(row) for row in rows[:EXAMPLES])
    return shown + (f"; and {len(rows) - EXAMPLES} more" if len(rows) > EXAMPLES else "")


def _message_examples(rows):
    return _examples(rows, lambda r: f"{r['id']!r} in {_session(r)} (parent {r['parent_id']!r})")


def _plural(count, noun):
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _integrity(store):
    problems = store.integrity.integrity_errors()
    if problems:
        yield ERROR, (f"SQLite reports {_plural(len(problems), 'problem')}: {_examples(problems, str)}. REINDEX "
                      "repairs a damaged index; otherwise restore a backup or salvage with `sqlite3 FILE .recover`")


def _full_text(store):
    for fts in store.integrity.fts_indexes():
        index, content = fts["index"], fts["content"]
        rebuild = f"rebuild it with INSERT INTO {index}({index}) VALUES('rebuild')"
        if content is None:
            complaint = store.integrity.fts_complaint(index, against_content=False)
            if complaint:
                yield ERROR, f"the search index {index} is damaged ({complaint})"
            continue
        missing, stale = store.integrity.fts_row_gaps(index, content, fts["rowid"])
        if missing:
            yield ERROR, (f"{_plural(missing, 'row')} of {content} cannot be found by search: {index} lacks them; "
                          f"{rebuild}")
        if stale:
            yield ERROR, f"{index} holds {_plural(stale, 'entry')} for rows of {content} that are gone; {rebuild}"
        complaint = None if missing or stale else store.integrity.fts_complaint(index, against_content=True)
        if complaint:
            yield ERROR, f"{index} does not match the text stored in {content} ({complaint}); {rebuild}"


def _orphans(store):
    for (table, parent), count in store.integrity.rows_of_missing_parents().items():
        yield ERROR, f"{_plural(count, 'row')} of {table} belong to a row of {parent} that no longer exists"
    rows = store.integrity.messages_with_missing_parent()
    if rows:
        yield ERROR, (f"{_plural(len(rows), 'message')} have a parent that is not in their session (the "
                      "history of their branch starts there): " + _message_examples(rows))


def _unreadable(store):
    rows = store.integrity.unreadable_messages()
    if rows:
        yield ERROR, (f"{_plural(len(rows), 'message')} cannot be read (reads leave them out; restore them from "
                      "a backup or an export, or delete them): "
                      + _examples(rows, lambda r: f"{r['problem']} in {_session(r)}"))


def _cycles(store):
    rows = store.integrity.messages_off_every_root()
    if rows:
        yield ERROR, (f"{_plural(len(rows), 'message')} cannot be reached from any root: their parent links "
                      "lead into a loop: " + _message_examples(rows))


def _stretches(store):
    rows = store.integrity.messages_off_their_stretch()
    if rows:
        yield WARNING, (f"{_plural(len(rows), 'message')} are flagged as following the message stored just "
                        "before them, which is not their parent (their branches still read right, one parent "
                        f"link at a time); `memorylab.Store({store.path!r}).sessions.lay_out_branches()` "
                        "lays every branch out again: " + _message_examples(rows))


def _overlay_problem(row):
    if not (row["from_exists"] or row["to_exists"]):
        return "both of its ends are gone"
    if not row["from_exists"]:
        return f"its first message {row['from_id']!r} is gone"
    if not row["to_exists"]:
        return f"its last message {row['to_id']!r} is gone"
    return f"{row['from_id']!r} is not on the path to {row['to_id']!r}"


def _overlays(store):
    rows = store.integrity.overlays_off_path()
    if rows:
        yield WARNING, (f"{_plural(len(rows), 'overlay')} can never apply (the messages stay readable; delete "
                        "or redo the summary): "
                        + _examples(rows, lambda r: f"overlay {r['id']} of {_session(r)}: {_overlay_problem(r)}"))


def _latest_leaves(store):
    for row in store.integrity.stale_latest_pointers():
        if row["latest_message_id"] is not None and not row["latest_exists"]:
            yield ERROR, (f"{_session(row)}: the next append would go under {row['latest_message_id']!r}, which "
                          "is not a message; append with an explicit parent_id until this is repaired")
        else:
            yield WARNING, (f"{_session(row)}: the next append would go under {row['latest_message_id']!r}, "
                            f"not under the newest message {row['newest_id']!r}")


def _tool_pairs(store):
    for row in store.sessions.list():
        session = Session.open(store, row["session_id"], tenant_id=row["tenant_id"], agent_id=row["agent_id"])
        found = lint_tool_pairs(session)
        if found:
            yield WARNING, (f"{_session(row)}: {_plural(len(found), 'tool-pair problem')} that a provider would "
                            "refuse (ChatRunner(..., repair_tool_pairs=True) repairs them in the request): "
                            + _examples(found, _tool_pair_example))


def _tool_pair_example(finding):
    where = f"{finding.kind} at {', '.join(map(repr, finding.message_ids))}"
    return where + (f" ({finding.paths} paths)" if finding.paths > 1 else "") + f": {finding.detail}"


CHECKS = (
    ("integrity", "the engine's own integrity check (SQLite: pages, indexes, constraints)", _integrity),
    ("full-text", "every search index matches the rows it indexes", _full_text),
    ("orphans", "every row belongs to a session, every parent exists", _orphans),
    ("readable", "every message's stored parts and metadata read back", _unreadable),
    ("cycles", "every message is reached from a root", _cycles),
    ("branch layout", "every branch reads as a few stretches of messages", _stretches),
    ("overlays", "every overlay's ends exist on one path", _overlays),
    ("latest leaf", "each session appends under its newest message", _latest_leaves),
    ("tool pairs", "every tool call on a path has its result and every result its call", _tool_pairs),
)


def check_database(store):
    """Run every check on ``store``'s file and return the CheckReport.

    A check that cannot even run (a damaged file, a table dropped behind the store's back) becomes an
    error finding of its own, on either backend.
    """
    findings = []
    for name, _, check in CHECKS:
        try:
            findings.extend(Finding(name, severity, message) for severity, message in check(store))
        except StoreError as error:
            findings.append(Finding(name, ERROR, f"the check could not run: {error}"))
    try:
        counts = store.integrity.database_size()
    except StoreError:
        counts = None
    return CheckReport(store.path, counts, findings)


@dataclass(frozen=True)
class CheckReport:
    """The findings of one ``check_database`` run; ``str(report)`` is what ``memorylab check`` prints."""

    path: str
    counts: dict | None
    """``{"sessions", "messages", "overlays"}``, None when the file is too damaged to count them."""
    findings: list

    @property
    def ok(self):
        return not self.findings

    def __str__(self):
        counts = self.counts
        heading = self.path if counts is None else (
            f"{self.path}: {_plural(counts['sessions'], 'session')}, {_plural(counts['messages'], 'message')}, "
            f"{_plural(counts['overlays'], 'overlay')}")
        lines = [heading]
        for name, description, _ in CHECKS:
            found = [finding for finding in self.findings if finding.check == name]
            lines.append(f"  {'FAIL' if found else 'ok  '}  {name}: {description}")
            lines.extend(f"        {finding.severity}: {finding.message}" for finding in found)
        errors = sum(finding.severity == ERROR for finding in self.findings)
        lines.append(f"{_plural(errors, 'error')}, {_plural(len(self.findings) - errors, 'warning')}"
                     if self.findings else "no problems found")
        return "\n".join(lines)
