"""The SQLite database's own files, which brutus never opens with a plain file descriptor.

SQLite's locks on a database are POSIX advisory locks, and those belong to the process, not to the
descriptor: closing *any* descriptor of the database file in a process releases every lock SQLite holds on
it there (SQLite's "How To Corrupt An SQLite Database File", §2.2). Another process that then closes its
last connection believes it is the database's last user: it checkpoints, truncates the WAL and removes the
``-shm`` file while this process still writes to them, and what this process commits after that is lost.
SQLite's own connections share one lock bookkeeping per process (its unix VFS keeps a descriptor open
until no lock on the file is left), so they are safe; an ``open()`` of the file beside them is not.

So, in brutus:

- ``check_sqlite_file`` tells whether a path is a SQLite database by asking SQLite itself (a read-only
  connection); only ``os.stat`` touches the file otherwise (size, kind), and a stat opens no descriptor;
- ``refuse_database_file`` stops a file brutus would read or write for the user (an import source, an
  export's output) from being a file of a SQLite database that an engine of this process has open, or
  that of the store at hand: reading it would drop that database's locks, writing it would destroy it;
- gc measures the files with ``os.path.getsize`` (a stat); the compaction locks are ``flock``s on files of
  their own in ``<db>.locks/`` (``compaction/locks.py``), never on the database file.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import weakref
from collections.abc import Iterable
from pathlib import Path

from ..errors import InvalidInput, NoDatabase

__all__ = ["SUFFIXES", "check_sqlite_file", "database_files", "open_sqlite_databases", "refuse_database_file", "track"]

SUFFIXES = ("", "-wal", "-shm", "-journal")  # the database file and those SQLite keeps beside it
_NOTADB = 26  # SQLITE_NOTADB: "file is not a database"
_ENGINES: weakref.WeakSet = weakref.WeakSet()  # the engines brutus built, alive in this process


def track(engine: object) -> None:
    """Count ``engine`` (``make_engine``'s, or an async engine's ``sync_engine``) among the engines whose
    SQLite files ``refuse_database_file`` protects, for as long as it lives."""
    _ENGINES.add(engine)


def open_sqlite_databases() -> list[str]:
    """The database paths of the SQLite engines brutus built that are still alive in this process."""
    return [e.url.database for e in list(_ENGINES) if e.dialect.name == "sqlite" and e.url.database]


def check_sqlite_file(path: Path, *, create: bool) -> None:
    """Refuse a path brutus must not open as its SQLite database: a file that is not SQLite (an empty one
    included), a directory, one that cannot be read; a missing file unless ``create`` and its directory
    exists. A path is not a wish: no directory is made here. The header is read by SQLite itself (see the
    module docstring): this is safe while connections to the file are open in this process."""
    try:
        info = path.stat()
    except FileNotFoundError:
        if not create:
            raise NoDatabase(str(path)) from None
        if not path.parent.is_dir():
            raise InvalidInput(f"cannot create a database at {path}: there is no directory {path.parent}") from None
        return
    except OSError as exc:
        raise InvalidInput(f"cannot open {path}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(info.st_mode):
        raise InvalidInput(f"{path} is a directory, not a SQLite database")
    if not stat.S_ISREG(info.st_mode):
        raise InvalidInput(f"{path} is not a SQLite database (not a regular file); brutus will not overwrite it")
    if info.st_size == 0:
        raise InvalidInput(f"{path} is not a SQLite database (an empty file); brutus will not overwrite it")
    if not os.access(path, os.R_OK):
        raise InvalidInput(f"cannot open {path}: Permission denied")
    try:
        probe = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error as exc:
        raise InvalidInput(f"cannot open {path}: {exc}") from None
    try:
        probe.execute("PRAGMA schema_version").fetchone()  # reads the header: page 1
    except sqlite3.DatabaseError as exc:
        if exc.sqlite_errorcode == _NOTADB:
            raise InvalidInput(
                f"{path} is not a SQLite database (a file of another kind); brutus will not overwrite it"
            ) from None
        if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:  # busy: a SQLite database someone is holding
            raise InvalidInput(f"cannot open {path}: {exc}") from None
    finally:
        probe.close()


def database_files(databases: Iterable[str]) -> set[str]:
    """The real paths of ``databases``' files (SQLite database paths) and of the files SQLite keeps beside."""
    return {os.path.realpath(os.path.expanduser(database)) + suffix for database in databases if database for suffix in SUFFIXES}


def refuse_database_file(path: str | os.PathLike[str], *, doing: str, databases: Iterable[str] = ()) -> None:
    """``InvalidInput`` when ``path`` is a file of a SQLite database open in this process (any engine
    ``make_engine`` built that is still alive) or of ``databases``. ``doing``: what brutus was about to do
    with it, for the message ("read", "write"). Stats only: nothing is opened."""
    files = database_files([*open_sqlite_databases(), *databases])
    real = os.path.realpath(os.fspath(path))
    same = real in files
    if not same and os.path.exists(real):
        same = any(os.path.exists(other) and os.path.samefile(real, other) for other in files)
    if same:
        raise InvalidInput(
            f"{os.fspath(path)} is a file of a brutus database in use; brutus will not {doing} it "
            "(that would break the database's locks or its contents)"
        )
