"""The errors brutus raises: one tree, so callers can catch ``BrutusError`` and nothing else.

::

    BrutusError
    ├── NotFound                 an id names no session, message or part
    │   └── NoDatabase           no brutus database where a reading command or create=False looked
    ├── InvalidInput             a value brutus cannot store or does not accept (nothing was written)
    │   ├── InvalidTransition    a tool state change the state machine forbids
    │   └── ImportFormatError    a file to import is malformed or in no format brutus reads (nothing was written)
    ├── SchemaOutOfDate          the database is behind the code's migrations (run `brutus db upgrade`)
    ├── MissingDependency        an optional part is used without its extra installed (says what to install)
    ├── DatabaseError            the database refused or failed (wraps the SQLAlchemy/driver error)
    │   ├── DatabaseBusy         a lock could not be had within the busy timeout
    │   └── Unavailable          the server went away (restart, connection cut): retryable
    └── CompactionError
        ├── CompactionInProgress another compaction of the session is running
        ├── CompactionStalled    a compaction would not reduce the context, or repeats back to back
        │   └── NothingToCompact refused before it started: an empty session, nothing new (also InvalidInput)
        └── SummarizerError      the summarizer gave no usable summary (API error, timeout, empty, cut off)

SQLAlchemy and driver exceptions never leave the store: they are translated here with ``raise … from exc``.
"""

from __future__ import annotations

__all__ = [
    "BrutusError",
    "CompactionError",
    "CompactionInProgress",
    "CompactionStalled",
    "DatabaseBusy",
    "DatabaseError",
    "ImportFormatError",
    "InvalidInput",
    "InvalidTransition",
    "MissingDependency",
    "NoDatabase",
    "NotFound",
    "NothingToCompact",
    "SchemaOutOfDate",
    "SummarizerError",
    "Unavailable",
]


class BrutusError(Exception):
    """Base of every error brutus raises on purpose."""


class NotFound(BrutusError, LookupError):
    """An id names nothing in the store."""

    def __init__(self, kind: str, id: object) -> None:
        self.kind = kind
        self.id = id
        super().__init__(f"{kind} not found: {id!r}")


class NoDatabase(NotFound):
    """No brutus database at the place asked for (and none was to be created there). ``reason``: what the
    server said when the database itself is not there (PostgreSQL: 'database "x" does not exist')."""

    def __init__(self, where: str, *, reason: str | None = None) -> None:
        self.kind = "database"
        self.id = where
        self.reason = reason
        BrutusError.__init__(self, f"cannot open {where}: {reason}" if reason else f"no brutus database at {where}")


class InvalidInput(BrutusError, ValueError):
    """A value brutus does not accept; nothing was written."""


class InvalidTransition(InvalidInput):
    """A tool state change that the state machine forbids; nothing was written."""

    def __init__(self, part_id: str, current: str, requested: str) -> None:
        self.part_id = part_id
        self.current = current
        self.requested = requested
        super().__init__(f"tool part {part_id}: cannot go from {current!r} to {requested!r}")


class ImportFormatError(InvalidInput):
    """A file to import is empty, binary, truncated, or neither an OpenCode export nor a Claude Code session;
    nothing was written. The message names the file and, where it can, the line or the entry at fault."""


class SchemaOutOfDate(BrutusError):
    """The database schema is behind the migrations this version of brutus ships."""

    def __init__(self, current: str | None, head: str, url: str) -> None:
        self.current = current
        self.head = head
        super().__init__(
            f"the database is at revision {current or 'base (empty)'}, brutus needs {head}: "
            f"run brutus db upgrade --db {url} (or open the store with auto_migrate=True)"
        )


class MissingDependency(BrutusError, ImportError):
    """An optional part of brutus was used without the packages of its extra."""


class DatabaseError(BrutusError):
    """The database failed or refused a statement."""


class DatabaseBusy(DatabaseError):
    """The database stayed locked by another writer for longer than the busy timeout."""


class Unavailable(DatabaseError):
    """The database server could not be reached, or the connection was cut in the middle of a call (a restart,
    a failover, a network cut). The call wrote nothing, or, if the cut came during its commit, it may have
    committed; ``retryable``: calling again is the remedy, and the store reconnects by itself."""

    retryable = True


class CompactionError(BrutusError):
    """Base of the compaction errors."""


class CompactionInProgress(CompactionError):
    """Another compaction of the same session is running."""


class CompactionStalled(CompactionError):
    """A compaction that would not reduce the context, or one that repeats another with no new turn."""


class NothingToCompact(CompactionStalled, InvalidInput):
    """A compaction refused before it started, writing nothing (no marker): the session has nothing to
    summarize, or nothing new since its previous compaction. A ``CompactionStalled`` (it would loop) and an
    ``InvalidInput`` (what older brutus raised for an empty session)."""


class SummarizerError(CompactionError):
    """The summarizer gave no usable summary: the provider failed or timed out, or the answer was empty.

    ``status_code`` is the provider's HTTP status when there was one; ``context_overflow`` is true when the
    request did not fit the summarizer model's context (shrink it and try again, or fall back).
    """

    def __init__(
        self,
        message: str,
        *,
        model: str | None = None,
        status_code: int | None = None,
        stop_reason: str | None = None,
        context_overflow: bool = False,
    ) -> None:
        self.model = model
        self.status_code = status_code
        self.stop_reason = stop_reason
        self.context_overflow = context_overflow
        super().__init__(message)
