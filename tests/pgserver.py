"""A throwaway PostgreSQL server for the tests, from the machine's own ``initdb`` and ``pg_ctl``.

``.ci/run`` starts one before the test command (``eval "$(python tests/pgserver.py start DIR)"``
exports ``MEMORYLAB_PG_URL``) and stops it afterwards; ``conftest.py`` starts one the same way when
that variable is unset and the binaries exist. The server listens on a Unix socket inside DIR only,
trusts local connections, and keeps its data in DIR: nothing outside DIR is touched. PostgreSQL
refuses to run as root, so as root the cluster belongs to the ``postgres`` system user.
"""
import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

DATABASE = "memorylab_test"


def find_binary(name):
    """``name`` on PATH, else in Debian's versioned directory (the package does not link them all)."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


def available():
    return all(find_binary(name) for name in ("initdb", "pg_ctl", "postgres"))


def _as_owner(command):
    """Run as the cluster's owner: ourselves, or the ``postgres`` user when we are root."""
    if os.geteuid() == 0:
        command = ["runuser", "-u", "postgres", "--", *command]
    return subprocess.run(command, check=True, capture_output=True, text=True)


def url_for(directory):
    return f"postgresql://postgres@/{DATABASE}?host={directory}/socket"


def in_schema(url, schema):
    """``url`` with ``schema`` first on the search path: each test gets its own tables on one server."""
    return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"


def start(directory):
    """Create (if needed) and start a cluster in ``directory``; returns its URL."""
    directory = Path(directory).resolve()
    data, socket = directory / "data", directory / "socket"
    socket.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        shutil.chown(directory, "postgres")
        shutil.chown(socket, "postgres")
        os.chmod(directory, 0o755)
    if not (data / "PG_VERSION").exists():
        _as_owner([find_binary("initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                   "--locale=C.UTF-8", "--no-sync"])
    options = (f"-c listen_addresses='' -c unix_socket_directories='{socket}' -c fsync=off"
               " -c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
    _as_owner([find_binary("pg_ctl"), "-D", str(data), "-o", options, "-l", str(directory / "server.log"),
               "-w", "-t", "60", "start"])
    created = _as_owner([find_binary("psql") or "psql", "-h", str(socket), "-U", "postgres", "-d", "postgres",
                         "-tAc", f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE}'"])
    if created.stdout.strip() != "1":
        _as_owner([find_binary("createdb") or "createdb", "-h", str(socket), "-U", "postgres", DATABASE])
    return url_for(directory)


def stop(directory):
    data = Path(directory).resolve() / "data"
    if (data / "postmaster.pid").exists():
        _as_owner([find_binary("pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"])


if __name__ == "__main__":
    action, target = sys.argv[1], sys.argv[2]
    if action == "start":
        print(f"export MEMORYLAB_PG_URL='{start(target)}'")
    elif action == "stop":
        stop(target)
    else:
        sys.exit(f"usage: {sys.argv[0]} start|stop DIR")
