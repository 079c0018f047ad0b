"""The ``memorylab`` command line: a thin layer over the library."""
import argparse
import json
import os
import sys
from pathlib import Path

from .check import check_database
from .errors import MemoryLabError
from .io import export_session, import_session, read_export, write_export
from .migrate import copy_store
from .lab.samples import load_samples
from .history.session import Session
from .store import Store, is_postgres_url

DEFAULT_DB = os.environ.get("MEMORYLAB_DB", "memorylab.db")


def _namespace_options(parser):
    parser.add_argument("--tenant", default="default", help="tenant id (default: %(default)s)")
    parser.add_argument("--agent", default="default", help="agent id (default: %(default)s)")


def build_parser():
    parser = argparse.ArgumentParser(
        prog="memorylab",
        description="Inspect and manage memorylab databases: agent conversations stored as trees.",
    )
    parser.add_argument("--db", default=DEFAULT_DB, help="SQLite database file or postgresql://user@host/db URL "
                                                        "(default: $MEMORYLAB_DB or %(default)s)")
    # --db is accepted after the command too ("memorylab demo --db lab.db").
    db_option = argparse.ArgumentParser(add_help=False)
    db_option.add_argument("--db", default=argparse.SUPPRESS, help="SQLite database file or postgresql:// URL")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name, help):
        return commands.add_parser(name, help=help, description=help, parents=[db_option])

    demo = command("demo", help="create a database holding the sample conversations")
    demo.add_argument("--replace", action="store_true", help="overwrite sample sessions that exist")

    imp = command("import", help="import a session export (JSON)")
    imp.add_argument("file", help="export file written by 'memorylab export'")
    imp.add_argument("--session-id", help="store it under this id instead of the id in the file")
    imp.add_argument("--tenant", help="store it under this tenant instead of the file's")
    imp.add_argument("--agent", help="store it under this agent instead of the file's")
    imp.add_argument("--replace", action="store_true", help="replace a session with the same id")

    exp = command("export", help="export one session, all branches and overlays, as JSON")
    exp.add_argument("session_id")
    exp.add_argument("-o", "--output", help="write to this file instead of standard output")
    _namespace_options(exp)

    stats = command("stats", help="sessions with message, branch and token counts")
    stats.add_argument("--tenant", help="only this tenant")
    stats.add_argument("--agent", help="only this agent")
    stats.add_argument("--json", action="store_true", help="print JSON instead of a table")

    check = command("check", help="check a database: engine integrity, search indexes, orphaned rows, "
                                  "parent loops, overlays; exits 1 when anything is wrong")
    check.add_argument("db", nargs="?", default=argparse.SUPPRESS, metavar="DB",
                       help="the database file or postgresql:// URL (default: --db)")

    about = ("copy a whole store to an empty one, SQLite or PostgreSQL, and verify the copy (row counts, "
             "every row, every session's export); nothing is written unless it verifies")
    migrate = commands.add_parser("migrate", help=about, description=about)
    migrate.add_argument("--from", dest="source", required=True, metavar="SOURCE",
                         help="the store to copy: a database file or postgresql:// URL")
    migrate.add_argument("--to", dest="target", required=True, metavar="TARGET",
                         help="an empty store: a new database file or a postgresql:// URL")
    return parser


def _demo(store, args):
    loaded = load_samples(store, replace=args.replace)
    print(f"{store.path}: loaded {len(loaded)} sample session(s){': ' + ', '.join(loaded) if loaded else ''}")


def _import(store, args):
    session = import_session(store, read_export(args.file), session_id=args.session_id,
                             tenant_id=args.tenant, agent_id=args.agent, replace=args.replace)
    print(f"imported {session.session_id} (agent {session.agent_id}): {session.stats()['messages']} messages")


def _export(store, args):
    session = Session.open(store, args.session_id, tenant_id=args.tenant, agent_id=args.agent)
    if args.output:
        write_export(session, args.output)
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        json.dump(export_session(session), sys.stdout, ensure_ascii=False, indent=2)
        print()


def _stats(store, args):
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
    report = check_database(store)
    print(report)
    return 0 if report.ok else 1


COMMANDS = {"demo": _demo, "import": _import, "export": _export, "stats": _stats, "check": _check}


def _show_progress(step, done, total):
    """One line per table on stderr; on a terminal the line counts up while the table is copied."""
    line = f"{step}: {done:,} of {total:,}"
    if sys.stderr.isatty():
        print("\r" + line, end="\n" if done == total else "", file=sys.stderr, flush=True)
    elif done == total:
        print(line, file=sys.stderr)


def _migrate(args):
    print(copy_store(args.source, args.target, progress=_show_progress))


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        if args.command == "migrate":
            return _migrate(args) or 0
        if args.command in ("export", "stats", "check") and not is_postgres_url(args.db) \
                and not Path(args.db).exists():
            raise MemoryLabError(f"no database at {args.db} (create one with: memorylab --db {args.db} demo)")
        with Store(args.db) as store:
            return COMMANDS[args.command](store, args) or 0
    except (MemoryLabError, OSError) as error:
        # One line, no traceback: the engine's refusals, the database's failures (a StoreError), and a
        # file named on the command line (import FILE, export -o FILE) that cannot be read or written.
        # A server's error may add DETAIL and HINT lines.
        message = " ".join(line.strip() for line in str(error).splitlines())
        print(f"memorylab: error: {message}", file=sys.stderr)
        return 1
