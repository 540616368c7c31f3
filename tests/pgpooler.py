"""A pgbouncer of a test's own: transaction pooling, in front of a server the test names.

``Pooler(pool_size, server_port)`` writes the configuration (the settings of ``.ci/pgbouncer.ini``) into a
temporary directory; ``start`` runs pgbouncer there, as user postgres when the tests run as root (pgbouncer
refuses root), on a free port, and returns once it answers; ``stop`` ends it (SIGTERM: its clients'
connections close at once) and ``start`` brings it back on the same port. Without the pgbouncer binary,
``start`` raises: a test that needs it fails, it never skips.
"""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import subprocess
import tempfile
from pathlib import Path

from sqlalchemy.engine import make_url

from pgcluster import free_port, wait_for

__all__ = ["Pooler"]


def _answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


class Pooler:
    """A pgbouncer of the test's own in transaction mode, ``pool_size`` server connections per database, on a
    free port, in a temporary directory; started as user postgres when the tests run as root (pgbouncer
    refuses root). ``stop`` ends it (SIGTERM: its clients' connections close at once) and ``start`` brings it
    back on the same port."""

    def __init__(self, pool_size: int, server_port: int = 5432) -> None:
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="brutus-test-pgbouncer-"))
        (self.dir / "users.txt").write_text(f'"{getpass.getuser()}" ""\n')
        (self.dir / "pgbouncer.ini").write_text(
            f"[databases]\n* = host=127.0.0.1 port={server_port}\n[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\npool_mode = transaction\n"
            f"auth_type = trust\nauth_file = users.txt\nauth_user = {getpass.getuser()}\n"
            f"default_pool_size = {pool_size}\nmax_client_conn = 200\nlogfile = pgbouncer.log\npidfile = pgbouncer.pid\n"
        )
        self.as_postgres = os.geteuid() == 0
        if self.as_postgres:
            for path in (self.dir, *self.dir.iterdir()):
                shutil.chown(path, "postgres")
        self.pid: int | None = None

    def start(self) -> None:
        binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
        command = [*(["runuser", "-u", "postgres", "--"] if self.as_postgres else []), binary, "-d", "pgbouncer.ini"]
        subprocess.run(command, cwd=self.dir, check=True, capture_output=True)
        wait_for(lambda: _answers(self.port) and self._written_pid() is not None, f"pgbouncer on port {self.port}")
        self.pid = self._written_pid()

    def _written_pid(self) -> int | None:
        """The pid in pgbouncer's pidfile, once it is there whole (the file exists a moment before its line)."""
        try:
            line = (self.dir / "pgbouncer.pid").read_text()
        except FileNotFoundError:
            return None
        return int(line) if line.endswith("\n") else None

    def stop(self) -> None:
        pid, self.pid = self.pid, None
        if pid is None:
            return
        os.kill(pid, signal.SIGTERM)
        wait_for(lambda: not _alive(pid) and not _answers(self.port), f"pgbouncer {pid} to exit")

    def url(self, database_url: str) -> str:
        """``database_url``'s database through this pooler."""
        through = make_url(database_url).set(host="127.0.0.1", port=self.port).update_query_dict({"pooler": "transaction"})
        return through.render_as_string(hide_password=False)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
