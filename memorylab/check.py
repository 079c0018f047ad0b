"""``memorylab check``: is a database file sound, and can every message be read as it should?

Each check asks the store a question whose answer is empty on a healthy file and words what it
finds. An ``error`` means data is damaged, unreachable or wrongly indexed; a ``warning`` means
something is inconsistent while every message still reads correctly (an overlay that can never
apply, a stale pointer); a ``note`` fails nothing (a row set aside earlier, a check a read-only
database cannot run). Checking only reads. ``repair_database`` (``memorylab check --repair``) sets
every row that reads cannot use aside into the quarantine table; other repairs the findings name.
"""
import warnings
from dataclasses import dataclass

from .errors import DamagedRowWarning, StoreError
from .history.session import Session
from .history.tool_pairs import lint_tool_pairs
from .store.integrity import NOT_CHECKED
from .store.quarantine import Quarantine
from .store.rows import session_name

ERROR, WARNING, NOTE = "error", "warning", "note"
EXAMPLES = 5
"""How many offending rows a finding names; the count covers them all."""


@dataclass(frozen=True)
class Finding:
    """One problem: the check that found it, ``error`` or ``warning``, and what it is."""

    check: str
    severity: str
    message: str


_session = session_name


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
            if complaint is NOT_CHECKED:
                yield NOTE, f"{index}: not checked: the database is read-only (FTS5 checks an index by writing to it)"
            elif complaint:
                yield ERROR, f"the search index {index} is damaged ({complaint})"
            continue
        missing, stale = store.integrity.fts_row_gaps(index, content, fts["rowid"])
        if missing:
            yield ERROR, (f"{_plural(missing, 'row')} of {content} cannot be found by search: {index} lacks them; "
                          f"{rebuild}")
        if stale:
            yield ERROR, f"{index} holds {_plural(stale, 'entry')} for rows of {content} that are gone; {rebuild}"
        complaint = None if missing or stale else store.integrity.fts_complaint(index, against_content=True)
        if complaint is NOT_CHECKED:
            yield NOTE, (f"{index} against the text of {content}: not checked: the database is read-only (rows "
                         "missing from the index or left in it were checked)")
        elif complaint:
            yield ERROR, f"{index} does not match the text stored in {content} ({complaint}); {rebuild}"


def _orphans(store):
    for (table, parent), count in store.integrity.rows_of_missing_parents().items():
        yield ERROR, f"{_plural(count, 'row')} of {table} belong to a row of {parent} that no longer exists"
    rows = store.integrity.messages_with_missing_parent()
    if rows:
        yield ERROR, (f"{_plural(len(rows), 'message')} have a parent that is not in their session (the "
                      "history of their branch starts there): " + _message_examples(rows))


def _damaged_row(row):
    return row["problem"] + (f" in {row['session']}" if row["session"] else "")


def _unreadable(store):
    damaged = {}
    for row in store.integrity.damaged_rows():
        damaged.setdefault(row["table"], []).append(row)
    for table, rows in damaged.items():
        yield ERROR, (f"{_plural(len(rows), 'row')} of {table} cannot be read (reads leave them out; "
                      "`memorylab check --repair` sets them aside in the quarantine table): "
                      + _examples(rows, _damaged_row))


def _quarantined(store):
    rows = Quarantine(store).rows()
    if rows:
        yield NOTE, (f"{_plural(len(rows), 'row')} set aside by `memorylab check --repair`, kept whole in the "
                     "quarantine table: " + _examples(rows, lambda r: f"#{r['pk']} from {r['table_name']} "
                                                                     f"at {r['quarantined_at']}: {r['reason']}"))


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
    for row in store.integrity.sessions_with_tool_parts():
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
    ("readable", "every stored JSON document and message part reads back as the engine wrote it", _unreadable),
    ("cycles", "every message is reached from a root", _cycles),
    ("branch layout", "every branch reads as a few stretches of messages", _stretches),
    ("overlays", "every overlay's ends exist on one path", _overlays),
    ("latest leaf", "each session appends under its newest message", _latest_leaves),
    ("tool pairs", "every tool call on a path has its result and every result its call", _tool_pairs),
    ("quarantine", "rows set aside by earlier repairs", _quarantined),
)


def check_database(store):
    """Run every check on ``store``'s file and return the CheckReport.

    A check that cannot even run (a damaged file, a table dropped behind the store's back) becomes an
    error finding of its own, on either backend. The reads the checks make skip damaged rows silently:
    the ``readable`` check reports them.
    """
    findings = []
    for name, _, check in CHECKS:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DamagedRowWarning)
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
    def problems(self):
        """The errors and warnings (notes are none)."""
        return [finding for finding in self.findings if finding.severity != NOTE]

    @property
    def ok(self):
        return not self.problems

    def __str__(self):
        counts = self.counts
        heading = self.path if counts is None else (
            f"{self.path}: {_plural(counts['sessions'], 'session')}, {_plural(counts['messages'], 'message')}, "
            f"{_plural(counts['overlays'], 'overlay')}")
        lines = [heading]
        for name, description, _ in CHECKS:
            found = [finding for finding in self.findings if finding.check == name]
            failed = any(finding.severity != NOTE for finding in found)
            lines.append(f"  {'FAIL' if failed else 'ok  '}  {name}: {description}")
            lines.extend(f"        {finding.severity}: {finding.message}" for finding in found)
        errors = sum(finding.severity == ERROR for finding in self.findings)
        lines.append(f"{_plural(errors, 'error')}, {_plural(len(self.problems) - errors, 'warning')}"
                     if self.problems else "no problems found")
        return "\n".join(lines)


def repair_database(store) -> list[str]:
    """Set every row that reads cannot use aside into the quarantine table (nothing is deleted) and return a
    line per row saying what was done. Run ``check_database`` afterwards to see what is left."""
    done = []
    for row in store.integrity.damaged_rows():
        if row["table"] == "quarantine":
            done.append(f"left {_damaged_row(row)} where it is: a quarantined row is set aside once; mend it by hand")
            continue
        outcome = Quarantine(store).set_aside(row["table"], row["key"], row["problem"])
        if outcome is not None:
            done.append(_repair_line(row, outcome))
    return done


def _repair_line(row, outcome):
    line = f"set aside {_damaged_row(row)} (quarantine #{outcome['quarantined'][0]})"
    if outcome["reset"]:
        return line + (f"; the row stays, its {' and '.join(outcome['reset'])} reset to empty, so what belongs to "
                       "it stays")
    if "children" in outcome:
        if outcome["children"]:
            one = outcome["children"] == 1
            parent = (("starts a new root" if one else "start new roots") if outcome["new_parent"] is None
                      else f"{'hangs' if one else 'hang'} under {outcome['new_parent']!r}")
            line += f"; its {outcome['children']} {'child' if one else 'children'} now {parent}"
        moved = [_plural(outcome[k], noun) for k, noun in (("overlays", "overlay"), ("pins", "pin")) if outcome[k]]
        line += f"; {' and '.join(moved)} naming it set aside with it" if moved else ""
    return line
