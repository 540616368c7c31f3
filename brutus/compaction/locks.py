"""One compaction per session at a time, across threads and processes, released if the holder dies.

- PostgreSQL: a transaction-level advisory lock (``pg_try_advisory_xact_lock``) taken in a transaction that a
  dedicated connection keeps open for the whole compaction, and rolled back at the end (it writes nothing).
  A transaction, not the connection's session, because a transaction-pooling pooler (pgbouncer) keeps a
  client on one server connection only for the length of a transaction: a session-level lock would stay
  with a server connection the pooler hands to other clients. The server drops the lock when the
  transaction ends or its connection closes, so a killed process frees it. The transaction turns off
  ``idle_in_transaction_session_timeout`` for itself (``SET LOCAL``): it sits idle while the summarizer
  runs, and holds nothing that timeout protects (no transaction id, no row lock; at READ COMMITTED no
  snapshot between statements).
- SQLite: an exclusive ``flock`` on a small file per session beside the database (``<db>.locks/``); the
  kernel drops it when the process dies. ``flock`` locks belong to an open file, so two threads of one
  process exclude each other too.

Neither waits: a second caller gets ``CompactionInProgress`` at once.

``held_sessions`` tells which sessions' locks are held now without taking any (``brutus check``: a pending
marker whose lock is free was abandoned): PostgreSQL's ``pg_locks``, a probe ``flock`` on SQLite.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, text

from ..errors import CompactionInProgress

__all__ = ["advisory_key", "async_compaction_lock", "async_held_sessions", "compaction_lock", "held_sessions", "lock_file"]


def advisory_key(session_id: str) -> int:
    """A signed 64-bit key for PostgreSQL advisory locks, stable across processes."""
    digest = hashlib.blake2b(f"brutus-compaction:{session_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def lock_file(database: str, session_id: str) -> Path:
    """The session's lock file beside the database, named from the database's real path, so every store on
    the file (through a symlink or another spelling of its path too) takes the same lock."""
    name = hashlib.sha256(session_id.encode()).hexdigest()[:32]
    return Path(f"{os.path.realpath(database)}.locks") / f"{name}.lock"


@contextmanager
def compaction_lock(engine: Engine, session_id: str) -> Iterator[None]:
    """Hold the session's compaction lock, or raise ``CompactionInProgress``."""
    if engine.dialect.name == "postgresql":
        with _pg_lock(engine, session_id):
            yield
    else:
        with _file_lock(engine.url.database or "", session_id):
            yield


# one trip: the transaction's timeout off (module docstring), then the lock without waiting
_PG_TRY_LOCK = text("SELECT set_config('idle_in_transaction_session_timeout', '0', true), pg_try_advisory_xact_lock(:k)")


@contextmanager
def _pg_lock(engine: Engine, session_id: str) -> Iterator[None]:
    with engine.connect() as connection:  # closing it rolls the lock's transaction back: the lock goes with it
        if not connection.execute(_PG_TRY_LOCK, {"k": advisory_key(session_id)}).one()[1]:
            raise _in_progress(session_id)
        yield


def _in_progress(session_id: str) -> CompactionInProgress:
    return CompactionInProgress(f"session {session_id} is being compacted by another caller")


@contextmanager
def _file_lock(database: str, session_id: str) -> Iterator[None]:
    import fcntl

    path = lock_file(database, session_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _in_progress(session_id) from None
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


# A bigint advisory key shows in pg_locks as classid (high half) and objid (low half), objsubid 1.
_PG_HELD = text(
    "SELECT classid::int8 AS hi, objid::int8 AS lo FROM pg_locks "
    "WHERE locktype = 'advisory' AND objsubid = 1 AND granted "
    "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)


def held_sessions(engine: Engine, session_ids: Iterable[str]) -> set[str]:
    """Of ``session_ids``, those whose compaction lock some process holds now. Takes no lock and writes
    nothing (a read-only store can ask)."""
    wanted = set(session_ids)
    if not wanted or engine.dialect.name != "postgresql":
        return _files_held(engine, wanted)
    with engine.connect() as connection:
        return _pg_held(wanted, connection.execute(_PG_HELD))


async def async_held_sessions(engine: Any, session_ids: Iterable[str]) -> set[str]:
    """``held_sessions`` for an ``AsyncEngine``."""
    wanted = set(session_ids)
    if not wanted or engine.dialect.name != "postgresql":
        return _files_held(engine, wanted)
    async with engine.connect() as connection:
        return _pg_held(wanted, await connection.execute(_PG_HELD))


def _pg_held(wanted: set[str], rows: Iterable[Any]) -> set[str]:
    held = {(r.hi, r.lo) for r in rows}
    return {s for s in wanted if _halves(advisory_key(s)) in held}


def _files_held(engine: Any, wanted: set[str]) -> set[str]:
    return {s for s in wanted if _file_held(engine.url.database or "", s)}


def _halves(key: int) -> tuple[int, int]:
    unsigned = key & 0xFFFF_FFFF_FFFF_FFFF
    return unsigned >> 32, unsigned & 0xFFFF_FFFF


def _file_held(database: str, session_id: str) -> bool:
    """Whether another open file holds the session's lock file: try it without waiting, and let go at once.
    No lock file: nobody ever held it (the holder creates it)."""
    import fcntl

    try:
        fd = os.open(lock_file(database, session_id), os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


@asynccontextmanager
async def async_compaction_lock(engine: Any, session_id: str) -> AsyncIterator[None]:
    """``compaction_lock`` for an ``AsyncEngine``: the advisory lock through the async driver; on SQLite the
    same non-blocking ``flock`` (a system call that never waits)."""
    if engine.dialect.name != "postgresql":
        with _file_lock(engine.url.database or "", session_id):
            yield
        return
    async with engine.connect() as connection:  # as _pg_lock: the lock lives as long as this transaction
        if not (await connection.execute(_PG_TRY_LOCK, {"k": advisory_key(session_id)})).one()[1]:
            raise _in_progress(session_id)
        yield
