"""Engines: the URL brutus uses by default, SQLite pragmas, and write transactions that wait their turn.

SQLite runs in WAL mode with ``synchronous=NORMAL``, ``foreign_keys=ON`` and a busy timeout. A database file
brutus creates has 2 KB pages (SQLite's default is 4 KB): a commit writes each page it changed to the WAL
whole, and an agent's commits change a few rows each, so smaller pages mean fewer bytes per commit (an
existing file keeps its page size). A store checkpoints the WAL in a thread of its own shortly after it
commits (``checkpoint.py``), so a commit does not wait for the checkpoint's syncs; SQLite's automatic
checkpoint, run by the commit that crosses it, stays as the backstop at 16 MB (8192 pages of 2 KB, 4096 of
4 KB; SQLite's default is 1000 pages), so the WAL stays under 16 MB under a long-running writer. A reader
that holds a snapshot stops checkpoints from restarting the log, so the file grows while it reads, and
``journal_size_limit`` gives that space back at the next restart instead of keeping the peak. brutus takes
over BEGIN from the sqlite3 driver: a write transaction starts with ``BEGIN IMMEDIATE``, so a second process
waits for the write lock (up to the busy timeout) instead of failing with "database is locked" when its
read snapshot goes stale mid-transaction. PostgreSQL goes through psycopg 3; behind a transaction-pooling
pooler (pgbouncer) the URL says so, ``?pooler=transaction``, and psycopg then prepares no statement on the
server (a prepared statement belongs to one server connection, a transaction may get another).
"""

from __future__ import annotations

import os
import select
import weakref
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DisconnectionError

from .. import codec
from ..errors import InvalidInput
from ..extras import require
from .files import check_sqlite_file, track

__all__ = [
    "AUTOCOMMIT",
    "BUSY_TIMEOUT_MS",
    "PAGE_SIZE",
    "WAL_CHECKPOINT",
    "WAL_CHECKPOINT_BYTES",
    "WAL_SIZE_LIMIT",
    "WRITE",
    "check_sqlite_file",
    "default_url",
    "describe",
    "engine_options",
    "hung_up",
    "is_brutus_engine",
    "make_engine",
    "normalize_url",
    "pg_events",
    "redact",
    "sqlite_events",
    "sqlite_pragmas",
]

BUSY_TIMEOUT_MS = 30_000
PAGE_SIZE = 2048  # bytes per page of a database file brutus creates
WAL_CHECKPOINT_BYTES = 16 * 1024 * 1024  # a commit checkpoints itself once the WAL holds this much (backstop)
# the automatic checkpoint in pages of each size SQLite allows: WAL_CHECKPOINT_BYTES of them (whole
# statements, so no SQL is built from a value read back)
WAL_CHECKPOINT = {
    512: "PRAGMA wal_autocheckpoint = 32768",
    1024: "PRAGMA wal_autocheckpoint = 16384",
    2048: "PRAGMA wal_autocheckpoint = 8192",
    4096: "PRAGMA wal_autocheckpoint = 4096",
    8192: "PRAGMA wal_autocheckpoint = 2048",
    16384: "PRAGMA wal_autocheckpoint = 1024",
    32768: "PRAGMA wal_autocheckpoint = 512",
    65536: "PRAGMA wal_autocheckpoint = 256",
}
WAL_SIZE_LIMIT = 16 * 1024 * 1024  # bytes the -wal file is truncated back to once a checkpoint restarts it
WRITE = {"brutus_write": True}  # execution option marking a connection whose transaction will write
# PostgreSQL: a connection whose statements each commit on their own (``Tx(autocommit=True)``): psycopg sends
# no BEGIN, and its COMMIT and the pool's reset are no-ops on an idle connection (two round trips fewer)
AUTOCOMMIT = {"isolation_level": "AUTOCOMMIT"}

_CONFIGURED: weakref.WeakSet[Engine] = weakref.WeakSet()  # the engines make_engine built (brutus's settings)


def default_url() -> str:
    """``$BRUTUS_DATABASE_URL``, else a SQLite file in the user data directory."""
    url = os.environ.get("BRUTUS_DATABASE_URL")
    if url:
        return url
    from platformdirs import user_data_dir

    path = Path(user_data_dir("brutus", appauthor=False)) / "brutus.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


def normalize_url(url: str) -> str:
    """Accept plain file paths and ``postgres://`` URLs; pick the drivers brutus ships with."""
    if "://" not in url:
        return f"sqlite:///{url}"
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def redact(url: str) -> str:
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url


def describe(url: str) -> str:
    """How messages name a database: a SQLite file by its path, anything else by its URL without password."""
    try:
        parsed = make_url(normalize_url(url))
    except ArgumentError:
        return url
    if parsed.get_backend_name() == "sqlite" and parsed.database:
        return str(Path(parsed.database).expanduser())
    return redact(url)


def make_engine(url: str, *, create: bool = True, read_only: bool = False, **kwargs: Any) -> Engine:
    """An engine for ``url`` with brutus's connection settings (the engine a ``SessionStore`` is handed must
    come from here: its JSON codec and SQLite pragmas are part of how brutus stores rows).

    ``create=False``: a SQLite file must exist already (``NoDatabase`` otherwise). ``read_only``: nothing can
    be written through the engine (SQLite ``query_only``, PostgreSQL read-only transactions). Other keyword
    arguments go to ``sqlalchemy.create_engine`` (pool settings, echo…)."""
    parsed, backend, options = engine_options(url, create=create, read_only=read_only, **kwargs)
    if backend == "postgresql":
        require("brutus on PostgreSQL", {"psycopg": "postgres"})
    engine = create_engine(parsed, **options)
    if backend == "sqlite":
        sqlite_events(engine, read_only=read_only)
    else:
        pg_events(engine)
    _CONFIGURED.add(engine)
    track(engine)
    return engine


def is_brutus_engine(engine: Engine) -> bool:
    """Whether ``engine`` was built by ``make_engine`` (an async engine: its ``sync_engine``)."""
    return engine in _CONFIGURED


def engine_options(url: str, *, create: bool = True, read_only: bool = False, **kwargs: Any) -> tuple[URL, str, dict[str, Any]]:
    """The parsed URL, its backend and the engine options brutus uses for it (shared with the async engine);
    ``InvalidInput`` for a URL brutus cannot use, ``NoDatabase`` for a missing SQLite file without ``create``."""
    url = normalize_url(url)
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise InvalidInput(f"not a database URL: {url!r}") from None
    options: dict[str, Any] = {
        "json_serializer": codec.dumps_json,
        "json_deserializer": codec.loads_json,
    }
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        database = parsed.database or ""
        if database in ("", ":memory:") or parsed.query.get("mode") == "memory":
            raise InvalidInput("brutus needs a SQLite file, not an in-memory database")
        path = Path(database).expanduser()
        check_sqlite_file(path, create=create and not read_only)  # its messages name the path as given
        parsed = parsed.set(database=str(path.absolute()))  # one file, whatever the working directory is later
        options["connect_args"] = {"timeout": BUSY_TIMEOUT_MS / 1000, "check_same_thread": False}
        options["max_overflow"] = -1  # the store keeps one connection per thread: never block on the pool
    elif backend == "postgresql":
        if parsed.get_driver_name() != "psycopg":
            raise InvalidInput(f"brutus talks to PostgreSQL through psycopg 3: use postgresql+psycopg://…, got {redact(url)}")
        parsed, pooler = _pooler(parsed)
        if pooler == "transaction":
            # no server-side prepared statements (psycopg prepares a statement run 5 times on its connection):
            # the pooler gives the next transaction another server connection, where the statement does not
            # exist, or another client's does. Only then: direct, they save a third to a half of a call's time
            # (benchmarks/RESULTS.md)
            options["connect_args"] = {"prepare_threshold": None}
        if read_only:  # each transaction BEGIN READ ONLY (pgbouncer refuses a startup parameter that would say so)
            options["execution_options"] = {"postgresql_readonly": True}
    else:
        raise InvalidInput(f"brutus supports SQLite and PostgreSQL, not {backend!r} ({redact(url)})")
    if "connect_args" in kwargs:  # the caller's beside brutus's (a replica's timeout keeps ?pooler= working)
        kwargs = {**kwargs, "connect_args": {**options.get("connect_args", {}), **kwargs["connect_args"]}}
    options.update(kwargs)
    return parsed, backend, options


_POOLER = "pooler"  # the URL's query parameter naming the pool_mode of a pooler in front of PostgreSQL
_POOL_MODES = ("session", "transaction")


def _pooler(parsed: URL) -> tuple[URL, str | None]:
    """The URL without brutus's ``?pooler=`` (libpq does not know it), and its value: ``transaction`` when a
    transaction-pooling pooler (pgbouncer's ``pool_mode = transaction``) stands in front of the server."""
    mode = parsed.query.get(_POOLER)
    if mode is None:
        return parsed, None
    if mode not in _POOL_MODES:
        raise InvalidInput(f"?{_POOLER}= takes {' or '.join(_POOL_MODES)} (a pooler's pool_mode; brutus needs transactions), got {mode!r}")
    return parsed.difference_update_query([_POOLER]), mode


def sqlite_pragmas(dbapi_connection: Any, *, read_only: bool = False) -> None:
    """brutus's settings on a new sqlite3 connection (what every connection of a brutus engine runs first).
    A read-only connection changes nothing in the file: no journal mode or page size, and ``query_only``."""
    # packed outputs (0009): the search views and triggers read them with the shell's function of that name
    dbapi_connection.create_function("sqlar_uncompress", 2, codec.sqlar_uncompress, deterministic=True)
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if read_only:
            cursor.execute("PRAGMA foreign_keys = ON")
            cursor.execute("PRAGMA query_only = ON")
            return
        # before anything writes the file: a new database takes this page size, an existing one ignores it
        cursor.execute(f"PRAGMA page_size = {PAGE_SIZE}")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}")
        cursor.execute("PRAGMA page_size")
        page_size = cursor.fetchone()[0]  # read from the cursor: the async driver's execute returns no rows
        cursor.execute(WAL_CHECKPOINT[page_size])
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
    finally:
        cursor.close()


def pg_events(engine: Engine) -> None:
    """PostgreSQL: a pooled connection the server hung up on is replaced as it is checked out (an async
    engine's ``sync_engine`` too).

    Instead of the pool's pre-ping (a ``SELECT 1`` round trip before every transaction, a third of a live
    step's round trips), the connection's socket is polled: a server that restarted, or a pooler that went
    away, closed it and said why, so it reads as ready; an idle connection brutus keeps has nothing to read
    otherwise (it never LISTENs). Such a connection is dropped and the pool connects anew
    (``DisconnectionError``). A server that goes away during a call still fails that call
    (``brutus.Unavailable``)."""

    @event.listens_for(engine, "checkout")
    def _on_checkout(_dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        if hung_up(record.driver_connection):
            raise DisconnectionError("the server closed this pooled connection")


def hung_up(connection: Any) -> bool:
    """Whether an idle psycopg connection's socket has something to read (the server's goodbye, or its
    end) or is gone: no round trip, one ``poll``."""
    try:
        fd = connection.fileno()
    except Exception:  # noqa: BLE001  closed: psycopg raises OperationalError
        return True
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))


def sqlite_events(engine: Engine, *, read_only: bool = False) -> None:
    """Install the SQLite pragmas and brutus's own BEGIN on ``engine`` (an async engine's ``sync_engine`` too)."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # brutus emits BEGIN itself, below
        sqlite_pragmas(dbapi_connection, read_only=read_only)

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        write = conn.get_execution_options().get("brutus_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

