"""The ``memorylab`` command line: a thin layer over the library."""
import argparse
import json
import os
import signal
import sys
import threading
import warnings
from contextlib import contextmanager
from pathlib import Path

from .audit.audit import iter_store_audits
from .audit.files import audit_files
from .audit.report import write_audits
from .check import check_database, repair_database
from .datasets import DATASETS, import_dataset
from .errors import DamagedRowWarning, InvalidInputError, MemoryLabError
from .history.session import Session
from .importers import FORMATS, ReadBudget, detect_format, import_folder, import_source, source_format
from .importers.otel import AGENT_ID
from .importers.watch import INTERVAL, watch_sources
from .io import write_export
from .lab_links import AuditLink, lab_url
from .otlp_receiver import SETTLE_SECONDS, TraceCollector, serving
from .samples import load_samples
from .store import Store, database_exists, default_database, require_database
from .store.sqlite import writes_over
from .store_copy import copy_store


def _namespace_options(parser):
    parser.add_argument("--tenant", default="default", help="tenant id (default: %(default)s)")
    parser.add_argument("--agent", default="default", help="agent id (default: %(default)s)")


def _lab_url_option(parser, what):
    parser.add_argument("--lab-url", metavar="URL",
                        help=f"where the lab is served (e.g. http://localhost:8501): print the link that opens {what} "
                             "in it (the lab must show the same --db)")


def build_parser():
    parser = argparse.ArgumentParser(
        prog="memorylab",
        description="Inspect and manage memorylab databases: agent conversations stored as trees.",
    )
    parser.add_argument("--db", default=default_database(),
                        help="SQLite database file or postgresql://user@host/db URL; the lab opens the same one "
                             "(default: $MEMORYLAB_DB or lab.db)")
    # --db is accepted after the command too ("memorylab demo --db lab.db").
    db_option = argparse.ArgumentParser(add_help=False)
    db_option.add_argument("--db", default=argparse.SUPPRESS, help="SQLite database file or postgresql:// URL")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name, help):
        return commands.add_parser(name, help=help, description=help, parents=[db_option])

    demo = command("demo", help="create a database holding the sample conversations")
    demo.add_argument("--replace", action="store_true", help="overwrite sample sessions that exist")

    imp = command("import", help="import agent memory from a file or folder: " + "; ".join(
        f.label for f in FORMATS.values()))
    imp.add_argument("file", metavar="PATH", help="the file to import (its format is told by its content), or a "
                                                  "folder (e.g. ~/.codex/sessions) whose files are imported one by one")
    imp.add_argument("--format", default="auto", choices=["auto", *FORMATS],
                     help="read the file as this format instead of detecting it")
    imp.add_argument("--tenant", default="default",
                     help="store the sessions under this tenant, whichever a memorylab export names "
                          "(default: %(default)s)")
    imp.add_argument("--agent", help="store the sessions under this agent (default: the format's name; a memorylab "
                                     "export keeps its own)")
    imp.add_argument("--dry-run", action="store_true", help="write nothing; report what the import would add")
    imp.add_argument("--session-id", help="a memorylab export only: store it under this id instead of the file's")
    imp.add_argument("--replace", action="store_true", help="a memorylab export only: replace a session with its id")
    imp.add_argument("--max-read-seconds", type=float, metavar="SECONDS",
                     help="refuse a source that takes longer to read (default: $MEMORYLAB_IMPORT_MAX_SECONDS or 600)")
    imp.add_argument("--max-read-bytes", type=int, metavar="BYTES",
                     help="refuse a source whose read fills more disk: the spooled messages and SQLite's temporary "
                          "files (default: $MEMORYLAB_IMPORT_MAX_BYTES or 8 GiB)")

    datasets = command("datasets", help="public benchmark datasets (LoCoMo, LongMemEval) as experiment cases")
    dataset_commands = datasets.add_subparsers(dest="dataset_command", required=True, metavar="ACTION")
    about = ("import a benchmark file: its conversations as sessions, and an experiment spec whose probes are its "
             "questions (gold answers as facts, categories as kinds), for memorylab eval")
    dataset_import = dataset_commands.add_parser("import", help=about, description=about)
    dataset_import.add_argument("dataset", choices=list(DATASETS), help="which benchmark the file is")
    dataset_import.add_argument("file", metavar="PATH", help="the dataset file (locomo10.json, longmemeval_s.json...)")
    dataset_import.add_argument("--spec", metavar="OUT",
                                help="write the spec here (default: the file's name with .yaml)")
    dataset_import.add_argument("--tenant", default="default", help="store the sessions under this tenant "
                                                                    "(default: %(default)s)")
    dataset_import.add_argument("--agent", help="store the sessions under this agent (default: the dataset's name)")

    watch = command("watch", help="follow transcript files and folders (Claude Code projects, Codex sessions, "
                                  "any JSON-lines format import reads) and import what they gain as they grow; "
                                  "Ctrl-C stops")
    watch.add_argument("paths", nargs="+", metavar="PATH",
                       help="a file, or a folder whose files (new ones too) are followed, e.g. ~/.claude/projects")
    watch.add_argument("--tenant", default="default",
                       help="store the sessions under this tenant (default: %(default)s)")
    watch.add_argument("--agent", help="store the sessions under this agent (default: the format's name)")
    watch.add_argument("--interval", type=float, default=INTERVAL, metavar="SECONDS",
                       help="seconds between two looks at the files (default: %(default)s)")

    exp = command("export", help="export one session, all branches and overlays, as JSON")
    exp.add_argument("session_id")
    exp.add_argument("-o", "--output", help="write to this file instead of standard output")
    _namespace_options(exp)

    stats = command("stats", help="sessions with message, branch and token counts")
    stats.add_argument("--tenant", help="only this tenant")
    stats.add_argument("--agent", help="only this agent")
    stats.add_argument("--json", action="store_true", help="print JSON instead of a table")

    check = command("check", help="check a database: engine integrity, search indexes, orphaned rows, parent "
                                  "loops, overlays, tool calls without results; exits 1 when anything is wrong")
    check.add_argument("db", nargs="?", default=argparse.SUPPRESS, metavar="DB",
                       help="the database file or postgresql:// URL (default: --db)")
    check.add_argument("--repair", action="store_true",
                       help="first set every row that cannot be read aside into the quarantine table (nothing is "
                            "deleted: a message's children move up to its parent), then check")

    evaluate = command("eval", help="run an experiment spec (arms x cases, scored by probes), print its leaderboard, "
                                    "and exit 1 when an arm scores under its threshold, 2 when the spec, the "
                                    "options or the store keep it from running")
    evaluate.add_argument("spec", metavar="SPEC.yaml", help="the experiment spec")
    evaluate.add_argument("--json", metavar="OUT", help="also write the results as JSON to this file")
    evaluate.add_argument("--min-score", type=float, metavar="S",
                          help="fail any arm whose mean probe score (0 to 1) is under S, whatever the spec says")
    evaluate.add_argument("--with-samples", action="store_true",
                          help="load the sample conversations into the store first (those present are kept)")
    evaluate.add_argument("--tenant", default="default", help="keep the experiment under this tenant (default: "
                                                              "%(default)s); its cases read this tenant's sessions")
    evaluate.add_argument("--case-tenant", action="append", default=[], metavar="TENANT",
                          help="let the spec's cases read this other tenant's sessions too (repeatable)")
    evaluate.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                          help="let the spec's api_base send model calls, with the environment's provider key, to "
                               "HOST or HOST:PORT (repeatable; also $MEMORYLAB_ALLOWED_API_HOSTS, comma-separated); "
                               "no other host is allowed")
    _lab_url_option(evaluate, "the trial")

    audit = command("audit", help="what each compaction forgot: the artifacts (paths, commands, URLs, ids, numbers, "
                                  "dates, versions, errors, decisions) of the span it replaced that the next request "
                                  "no longer held, and retention per kind")
    audit.add_argument("targets", nargs="*", metavar="SESSION|PATH",
                       help="sessions of --db to audit (default: every session with a compaction); or one transcript "
                            "file or folder (e.g. ~/.claude/projects), imported into a throwaway in-memory store")
    audit.add_argument("--json", metavar="OUT", help="also write the audits as JSON to this file")
    _lab_url_option(audit, "the audit")

    collect = command("collect", help="receive OpenTelemetry traces of LLM calls over OTLP/HTTP (POST /v1/traces, "
                                      "protobuf or JSON, gzip or not) and write their conversations into --db as "
                                      "they arrive, until Ctrl-C")
    collect.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: %(default)s)")
    collect.add_argument("--port", type=int, default=4318, help="the port to listen on (default: %(default)s, "
                                                                "OTLP/HTTP's)")
    collect.add_argument("--agent", default=AGENT_ID, help="store the sessions under this agent (default: %(default)s)")
    collect.add_argument("--tenant", default="default", help="store the sessions under this tenant (default: "
                                                             "%(default)s)")
    collect.add_argument("--settle", type=float, default=SETTLE_SECONDS, metavar="SECONDS",
                         help="write a trace once no span of it arrived for this long (default: %(default)s)")

    about = ("copy a whole store to an empty one, SQLite or PostgreSQL, and verify the copy (row counts, "
             "every row, every session's export); nothing is written unless it verifies")
    copy = commands.add_parser("copy", aliases=["migrate"], help=about, description=about)
    copy.add_argument("--from", dest="source", required=True, metavar="SOURCE",
                      help="the store to copy: a database file or postgresql:// URL")
    copy.add_argument("--to", dest="target", required=True, metavar="TARGET",
                      help="an empty store: a new database file or a postgresql:// URL")
    return parser


def _demo(store, args):
    loaded = load_samples(store, replace=args.replace)
    print(f"{store.path}: loaded {len(loaded)} sample session(s){': ' + ', '.join(loaded) if loaded else ''}")


def _import(store, args):
    if Path(args.file).is_dir():
        return _import_folder(store, args)
    chosen = detect_format(args.file) if args.format == "auto" else source_format(args.format)
    if (args.session_id or args.replace) and not chosen.whole_sessions:
        raise MemoryLabError(f"--session-id and --replace apply to a memorylab export; {args.file} is "
                             f"{chosen.label}, whose sessions keep their ids and are merged, never replaced")
    report = import_source(store, args.file, format=chosen.name, agent_id=args.agent, tenant_id=args.tenant,
                           dry_run=args.dry_run, progress=lambda done: _show_progress("messages read", done),
                           budget=ReadBudget.configured(args.max_read_seconds, args.max_read_bytes),
                           session_id=args.session_id, replace=args.replace)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    print(report)


def _watch(store, args):
    print(f"watching {', '.join(args.paths)} into {store.path}; Ctrl-C stops", file=sys.stderr, flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())  # `kill` stops it as cleanly as Ctrl-C
    try:
        watch_sources(store, args.paths, interval=args.interval, stop=stop, agent_id=args.agent,
                      tenant_id=args.tenant, on_import=_show_import, on_problem=_show_problem)
    except KeyboardInterrupt:
        pass
    print("memorylab: watch stopped", file=sys.stderr)


def _show_import(report):
    for s in report.sessions:
        if s.messages_added or s.overlays_added:
            print(f"{report.source}: {s.session_id} (agent {s.agent_id}) +{s.messages_added} message(s)"
                  f"{f', +{s.overlays_added} overlay(s)' if s.overlays_added else ''}", flush=True)


def _show_problem(path, message):
    print(f"memorylab: {message}", file=sys.stderr, flush=True)


def _import_folder(store, args):
    if args.format != "auto" or args.session_id or args.replace:
        raise MemoryLabError(f"--format, --session-id and --replace apply to one file; {args.file} is a folder, "
                             "whose files are each imported as the format their content shows")
    reports = import_folder(store, args.file, agent_id=args.agent, tenant_id=args.tenant, dry_run=args.dry_run,
                            budget=ReadBudget.configured(args.max_read_seconds, args.max_read_bytes),
                            skipped=lambda file, why: print(f"memorylab: skipped {why}", file=sys.stderr))
    imported = 0
    for report in reports:
        print(report)
        imported += 1
    print(f"{imported} file(s) imported from {args.file}")


def _datasets(store, args):
    print(import_dataset(store, args.dataset, args.file, spec_path=args.spec, tenant_id=args.tenant,
                         agent_id=args.agent))


@contextmanager
def _damage_reported():
    """A read that skips a damaged row warns; here each such warning is one line on stderr, without
    Python's file and source line. Other warnings are shown as Python shows them."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DamagedRowWarning)
        yield
    for warning in caught:
        if issubclass(warning.category, DamagedRowWarning):
            print(f"memorylab: warning: {warning.message}", file=sys.stderr)
        else:
            warnings.showwarning(warning.message, warning.category, warning.filename, warning.lineno)


def _collect(store, args):
    collector = TraceCollector(store, agent_id=args.agent, tenant_id=args.tenant, settle=args.settle,
                               source=f"otlp://{args.host}:{args.port}")

    def written(report):
        added = [s for s in report.sessions if s.messages_added or s.overlays_added]
        if added:
            print(f"wrote {report.messages_added:,} messages and {report.overlays_added:,} overlays into "
                  f"{len(added)} session(s): {', '.join(s.session_id for s in added[:5])}"
                  + (" ..." if len(added) > 5 else ""), flush=True)

    try:
        with serving(collector, args.host, args.port, on_flush=written):
            print(f"memorylab collect: OTLP/HTTP traces at http://{args.host}:{args.port}/v1/traces, written into "
                  f"{store.path} (Ctrl-C to stop)", file=sys.stderr, flush=True)
            threading.Event().wait()
    except KeyboardInterrupt:
        pass
    stats = collector.stats
    print(f"memorylab collect: {stats.requests:,} request(s), {stats.spans:,} span(s), {stats.llm_calls:,} LLM "
          f"call(s), {stats.messages_added:,} messages added, {stats.refused:,} request(s) refused", file=sys.stderr)


def _export(store, args):
    session = Session.open(store, args.session_id, tenant_id=args.tenant, agent_id=args.agent)
    with _damage_reported():
        write_export(session, args.output or sys.stdout)  # streamed: a page of messages at a time
        if args.output:
            print(f"wrote {args.output}", file=sys.stderr)
        else:
            print()


def _stats(store, args):
    with _damage_reported():
        rows = store.sessions.list(tenant_id=args.tenant, agent_id=args.agent)
    if args.json:
        print(json.dumps(rows, ensure_ascii=False, indent=2))
        return
    columns = ("session_id", "agent_id", "tenant_id", "message_count", "branch_count", "tokens")
    headers = ("session", "agent", "tenant", "messages", "branches", "tokens")
    table = [headers] + [tuple(str(r[c]) for c in columns) for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(headers))]
    for row in table:
        print("  ".join(cell.ljust(w) if i < 3 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths))))
    print(f"{len(rows)} session(s), {sum(r['message_count'] for r in rows)} messages")


def _check(store, args):
    if args.repair:
        for line in repair_database(store):
            print(line)
    report = check_database(store)
    print(report)
    return 0 if report.ok else 1


def _eval(args):
    """Reads the spec before opening the store: a spec that cannot run leaves no database behind."""
    from .experiments import Experiments

    if args.min_score is not None and not 0 <= args.min_score <= 1:
        raise MemoryLabError(f"--min-score must be from 0 to 1, got {args.min_score}")
    try:
        spec = Experiments.spec(args.spec)
    except InvalidInputError as error:
        print(f"memorylab: error: {error}", file=sys.stderr)
        return 2
    if args.lab_url:
        lab_url(args.lab_url)  # a wrong URL is refused before the experiment runs
    with _opened_store(args) as store:
        return _run_eval(store, spec, args)


def _run_eval(store, spec, args):
    from .experiments import Experiments, TrialStatus, interval_text

    experiments = Experiments(store, tenant_id=args.tenant, allowed_hosts=args.allow_host,
                              case_tenants=args.case_tenant)
    try:
        if args.with_samples:
            load_samples(store)
        status = TrialStatus()
        results = experiments.run(spec, progress=lambda done, total, run: _show_run(done, total, run, status),
                                  status=status)
    except InvalidInputError as error:
        print(f"memorylab: error: {error}", file=sys.stderr)
        if "no session" in str(error) and not args.with_samples:
            print(f"memorylab: the sessions a spec names must be in {store.path}; --with-samples loads the "
                  "sample conversations", file=sys.stderr)
        return 2
    print(f"{spec.name}, trial {results.trial}: {len(spec.arms)} arms x {len(spec.cases)} cases "
          f"({sum(len(c.probes) for c in spec.cases)} probes)")
    print(results.leaderboard_markdown())
    if args.lab_url:
        print("lab: " + lab_url(args.lab_url, "experiments", tenant=args.tenant, experiment=spec.name, tab="Results",
                                trial=results.trial))
    if args.json:
        results.to_json(args.json)
        print(f"wrote {args.json}", file=sys.stderr)
    failing = results.failing_arms(args.min_score)
    for arm in failing:
        close = arm["score_high"] is not None and arm["score_high"] >= arm["min_score"]
        print(f"FAIL {arm['arm']}: score {arm['score']:.3f} (95% interval {interval_text(arm)}) is under its "
              f"threshold {arm['min_score']:.3f}" + (f" ({arm['errors']} run(s) failed)" if arm["errors"] else "")
              + (" (the threshold is inside its interval: more cases would tell)" if close else ""))
    return 1 if failing else 0


def _audit_paths(args):
    """``memorylab audit PATH``: transcripts the user has, audited without touching any store."""
    def skipped(file, reason):
        print(f"memorylab: skipped {file}: {reason}", file=sys.stderr)

    if args.lab_url:
        print("memorylab: no lab link: transcripts named by path are audited in a throwaway store; import them "
              "(memorylab import PATH) to see their audit in the lab", file=sys.stderr)
    audits = audit_files(args.targets[0], progress=lambda done, total: _show_progress("files read", done, total),
                         skipped=skipped)
    return _write_audits(audits, args)


def _audit(store, args):
    audits = iter_store_audits(store, args.targets or None, workers=os.cpu_count() or 1)
    link = AuditLink(args.lab_url) if args.lab_url else None
    _write_audits(link.follow(audits) if link else audits, args)
    if link:
        print(f"lab: {link.url}")
    return 0


def _write_audits(audits, args):
    with _damage_reported():
        if not args.json:
            write_audits(audits, sys.stdout)
            return 0
        with open(args.json, "w", encoding="utf-8") as json_out:
            write_audits(audits, sys.stdout, json_out)
    print(f"wrote {args.json}", file=sys.stderr)
    return 0


def _show_run(done, total, run, status):
    """One finished run on stderr, as it finishes, with the time the rest should take."""
    from .experiments import time_left_text

    outcome = f"error: {run['error']}" if run["error"] else f"score {run['score']:.2f}"
    left = f", {time_left_text(status.seconds_left())}" if done < total else ""
    print(f"[{done}/{total}] {run['arm']} on {run['case_name']}: {outcome} in {run['latency']:.2f} s{left}",
          file=sys.stderr, flush=True)


OUTPUT_OPTIONS = {"datasets": (("spec", "--spec"),),
                  "export": (("output", "-o"),), "eval": (("json", "--json"),), "audit": (("json", "--json"),)}
"""By command, the options naming a file it writes (``args`` attribute, option): none may be the open store."""


def _refuse_writing_over(store, args):
    for name, option in OUTPUT_OPTIONS.get(args.command, ()):
        path = getattr(args, name)
        if path and writes_over(store.path, path):
            raise InvalidInputError(f"{option} {path} is the store {store.path} (or a file SQLite keeps beside it): "
                                    "writing there would destroy the store; nothing was done, name another file")


COMMANDS = {"audit": _audit, "datasets": _datasets, "demo": _demo, "import": _import, "export": _export,
            "stats": _stats, "check": _check, "watch": _watch, "collect": _collect}


def _show_progress(step, done, total=None):
    """A line on stderr per table copied; on a terminal it counts up while the table is copied (or,
    without a total, while a file is read)."""
    line = f"{step}: {done:,}" + (f" of {total:,}" if total is not None else "")
    if sys.stderr.isatty():
        print("\r" + line, end="\n" if done == total else "", file=sys.stderr, flush=True)
    elif done == total:
        print(line, file=sys.stderr)


def _copy(args):
    print(copy_store(args.source, args.target, progress=_show_progress))


READ_ONLY_COMMANDS = ("export", "stats", "check", "audit")
"""Commands that only read the store: on a missing file they say so and create nothing."""


def _creation_hint(args) -> str | None:
    """How to create the missing database a command must not create itself; None where it may create it."""
    if args.command in READ_ONLY_COMMANDS:
        return f"create one with: memorylab --db {args.db} demo, or memorylab --db {args.db} import PATH"
    if args.command == "eval" and not args.with_samples:
        return "--with-samples creates it with the sample conversations"
    return None


@contextmanager
def _opened_store(args):
    """The command's store. A command that only reads it (or an eval without samples to load) refuses
    a missing file; a dry run on one reads an empty store in memory: neither leaves an empty database behind."""
    target, hint = args.db, _creation_hint(args)
    if hint is not None:
        try:
            require_database(target)
        except MemoryLabError as error:
            raise MemoryLabError(f"{error} ({hint})") from None
    elif args.command == "import" and args.dry_run and not database_exists(target):
        target = ":memory:"
    with Store(target) as store:
        _refuse_writing_over(store, args)
        yield store


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        if args.command in ("copy", "migrate"):
            return _copy(args) or 0
        if args.command == "audit" and len(args.targets) == 1 and Path(args.targets[0]).exists():
            return _audit_paths(args)
        if args.command == "eval":
            return _eval(args)
        with _opened_store(args) as store:
            return COMMANDS[args.command](store, args) or 0
    except (MemoryLabError, OSError) as error:
        # One line, no traceback: the engine's refusals, the database's failures (a StoreError), and a
        # file named on the command line (import FILE, export -o FILE) that cannot be read or written.
        # A server's error may add DETAIL and HINT lines.
        message = " ".join(line.strip() for line in str(error).splitlines())
        print(f"memorylab: error: {message}", file=sys.stderr)
        return 2 if args.command == "eval" else 1  # eval's 1 means an arm scored under its threshold
