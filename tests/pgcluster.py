"""Throw-away PostgreSQL clusters for the tests that restart a server or need a streaming replica.

``Clusters.start()`` makes a primary (``initdb``, ``wal_level = replica``) and a hot standby streaming from it
(``pg_basebackup -R``), each on a free port in a temporary directory owned by ``postgres`` (the server
binaries refuse to run as root, so they run through ``runuser -u postgres``). Both trust connections over TCP
on 127.0.0.1 and have a superuser role named after the user running the tests. Readiness is waited for by
polling (a connection that answers, the standby streaming), never by sleeping. ``stop()`` stops both and
deletes the directory.

The server binaries are found with ``pg_config --bindir``; when they are missing, ``start`` raises: a test
that needs these clusters fails, it never skips. The cluster serving the rest of the suite is never touched.
"""

from __future__ import annotations

import getpass
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
from psycopg import sql

__all__ = ["Clusters", "ClusterError", "free_port", "wait_for"]

_INSERTED = (
    "SELECT p - CASE WHEN p % b <= 40 THEN p % b ELSE 0 END FROM (SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)"
    "::bigint AS p, current_setting('wal_block_size')::bigint AS b) AS wal"
)
WAIT_S = 60.0  # the longest any step waits for a server
POLL_S = 0.05


class ClusterError(RuntimeError):
    """A throw-away cluster could not be made or did not come up."""


def _bindir() -> Path:
    try:
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as exc:
        raise ClusterError(f"pg_config --bindir failed ({exc}): install PostgreSQL's server package") from exc
    bindir = Path(out)
    missing = [name for name in ("initdb", "pg_ctl", "pg_basebackup") if not (bindir / name).exists()]
    if missing:
        raise ClusterError(f"{', '.join(missing)} missing from {bindir}: install PostgreSQL's server package")
    return bindir


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(condition: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
    """Poll ``condition`` until it is true; ``ClusterError`` naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise ClusterError(f"timed out waiting for {what}")
        time.sleep(POLL_S)


class Clusters:
    """A primary and a streaming hot standby (module docstring)."""

    def __init__(self) -> None:
        self.bindir = _bindir()
        self.base = Path(tempfile.mkdtemp(prefix="brutus_replica_"))
        shutil.chown(self.base, "postgres", "postgres")
        self.primary_dir, self.replica_dir = self.base / "primary", self.base / "replica"
        self.primary_port, self.replica_port = free_port(), free_port()
        self.role = getpass.getuser()
        self.database = "brutus_replica"

    # -- urls and connections -----------------------------------------------------------------------------------

    def url(self, port: int, database: str | None = None) -> str:
        """A brutus URL for the test database (or ``database``) on the server at ``port``."""
        return f"postgresql+psycopg://{self.role}@127.0.0.1:{port}/{database or self.database}"

    @property
    def primary_url(self) -> str:
        return self.url(self.primary_port)

    @property
    def replica_url(self) -> str:
        return self.url(self.replica_port)

    def connect(self, port: int, dbname: str | None = None, user: str | None = None) -> psycopg.Connection:
        """A psycopg connection in autocommit to the server at ``port``."""
        who, where = user or self.role, dbname or self.database
        conninfo = f"host=127.0.0.1 port={port} user={who} dbname={where} connect_timeout=5"
        return psycopg.connect(conninfo, autocommit=True)

    def query(self, port: int, sql: str) -> object:
        """The first column of the first row ``sql`` returns on the server at ``port`` (None without rows)."""
        with self.connect(port) as conn:
            cursor = conn.execute(sql)
            row = cursor.fetchone() if cursor.description else None
        return None if row is None else row[0]

    # -- life cycle ---------------------------------------------------------------------------------------------

    def _run(self, *args: str) -> None:
        command = ["runuser", "-u", "postgres", "--", *args]
        done = subprocess.run(command, capture_output=True, text=True, cwd=self.base)
        if done.returncode != 0:
            raise ClusterError(f"{' '.join(args)} failed: {done.stderr.strip() or done.stdout.strip()}")

    def _pg_ctl(self, data: Path, *args: str) -> None:
        log = str(data.parent / f"{data.name}.log")
        self._run(str(self.bindir / "pg_ctl"), "-D", str(data), "-l", log, "-w", *args)

    def answers(self, port: int) -> bool:
        """Whether the server at ``port`` accepts a connection now."""
        try:
            with self.connect(port, "postgres", "postgres"):
                return True
        except psycopg.OperationalError:
            return False

    def start(self) -> Clusters:
        """Make and start both clusters; the primary holds an empty database ``self.database``."""
        try:
            self._init_primary()
            self._init_replica()
        except BaseException:
            self.stop()
            raise
        return self

    def _init_primary(self) -> None:
        initdb = str(self.bindir / "initdb")
        self._run(initdb, "-D", str(self.primary_dir), "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8")
        settings = {
            "port": self.primary_port,
            "listen_addresses": "'127.0.0.1'",
            "unix_socket_directories": f"'{self.base}'",
            "wal_level": "replica",
            "max_wal_senders": 5,
            "fsync": "off",  # throw-away data: no syncs on this shared machine
            "synchronous_commit": "on",
            "max_connections": 100,
        }
        self._configure(self.primary_dir, settings)
        self.start_primary()
        with self.connect(self.primary_port, "postgres", "postgres") as conn:
            conn.execute(f'CREATE ROLE "{self.role}" SUPERUSER LOGIN')
            conn.execute(f'CREATE DATABASE "{self.database}" OWNER "{self.role}"')

    def _init_replica(self) -> None:
        basebackup = str(self.bindir / "pg_basebackup")
        primary = ("-h", "127.0.0.1", "-p", str(self.primary_port), "-U", "postgres")
        copy = ("-D", str(self.replica_dir), "-R", "-X", "stream", "--checkpoint=fast", "--no-sync")
        self._run(basebackup, *primary, *copy)
        self._configure(self.replica_dir, {"port": self.replica_port, "hot_standby": "on"})
        self.start_replica()

    def _configure(self, data: Path, settings: dict[str, object]) -> None:
        lines = "".join(f"{name} = {value}\n" for name, value in settings.items())
        self._run("sh", "-c", f"cat >> {data / 'postgresql.conf'} <<'EOF'\n{lines}EOF")

    def start_primary(self) -> None:
        self._pg_ctl(self.primary_dir, "start")
        wait_for(lambda: self.answers(self.primary_port), "the primary to answer")

    def restart_primary(self) -> None:
        """``pg_ctl restart -m fast``: every connection to the primary is cut; returns once it answers again."""
        self._pg_ctl(self.primary_dir, "restart", "-m", "fast")
        wait_for(lambda: self.answers(self.primary_port), "the restarted primary to answer")

    def start_replica(self) -> None:
        """Start the standby; returns once it answers and streams from the primary."""
        self._pg_ctl(self.replica_dir, "start")
        wait_for(lambda: self.answers(self.replica_port), "the replica to answer")
        wait_for(self._streaming, "the replica to stream from the primary")

    def stop_replica(self) -> None:
        """Stop the standby (fast: its connections are cut): "the replica went away"."""
        self._pg_ctl(self.replica_dir, "stop", "-m", "fast")

    def _streaming(self) -> bool:
        return bool(self.query(self.primary_port, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'"))

    # -- lag ----------------------------------------------------------------------------------------------------

    def pause_replay(self) -> None:
        """Stop the standby applying WAL (it still receives it): from now on it lags behind every write."""
        with self.connect(self.replica_port) as conn:
            conn.execute("SELECT pg_wal_replay_pause()")

            def paused() -> bool:
                return conn.execute("SELECT pg_get_wal_replay_pause_state()").fetchone()[0] == "paused"

            wait_for(paused, "the replica's replay to pause")

    def resume_replay(self) -> None:
        """Let the standby apply WAL again, and wait until it has caught up with the primary."""
        with self.connect(self.replica_port) as conn:
            conn.execute("SELECT pg_wal_replay_resume()")
        self.wait_caught_up()

    def wait_caught_up(self) -> None:
        """Wait until the standby has replayed every WAL record the primary has inserted so far (the insert
        position, or the start of its page when it sits just past a page header, where no record ends)."""
        target = self.query(self.primary_port, _INSERTED)
        reached = f"SELECT (pg_last_wal_replay_lsn() - '0/0'::pg_lsn) >= {target}"
        wait_for(lambda: bool(self.query(self.replica_port, reached)), "the replica to catch up")

    def replay_age(self) -> float:
        """Seconds since the last transaction the standby replayed committed on the primary."""
        age = "SELECT extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp())"
        return float(self.query(self.replica_port, age))  # type: ignore[arg-type]

    def cut_off_replica(self) -> str:
        """Point the standby's WAL receiver at a port nobody listens on (it restarts on the reload): a standby
        that still answers reads but no longer hears from the primary. Returns the setting to give back to
        ``reconnect_replica``."""
        with self.connect(self.replica_port) as conn:
            conninfo = str(conn.execute("SHOW primary_conninfo").fetchone()[0])
            nowhere = f"host=127.0.0.1 port={free_port()} user=postgres connect_timeout=1"
            conn.execute(sql.SQL("ALTER SYSTEM SET primary_conninfo = {}").format(sql.Literal(nowhere)))
            conn.execute("SELECT pg_reload_conf()")
        wait_for(lambda: not self.query(self.replica_port, "SELECT count(*) FROM pg_stat_wal_receiver"),
                 "the replica's WAL receiver to go")
        return conninfo

    def reconnect_replica(self, conninfo: str) -> None:
        """Give the standby its ``primary_conninfo`` back; returns once it streams again."""
        with self.connect(self.replica_port) as conn:
            conn.execute(sql.SQL("ALTER SYSTEM SET primary_conninfo = {}").format(sql.Literal(conninfo)))
            conn.execute("SELECT pg_reload_conf()")
        wait_for(self._streaming, "the replica to stream from the primary again")

    def stop(self) -> None:
        """Stop both servers (those running) and delete their files."""
        for data in (self.replica_dir, self.primary_dir):
            if (data / "postmaster.pid").exists():
                try:
                    self._pg_ctl(data, "stop", "-m", "immediate")
                except ClusterError:
                    pass  # already gone: the files go below either way
        shutil.rmtree(self.base, ignore_errors=True)

