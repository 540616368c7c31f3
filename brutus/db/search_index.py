"""SQLite's full-text index, filled in batches (migration 0004 has the why).

The triggers give every new or changed document a key in the writer's transaction; its text goes into FTS5
later, in a batch: every ``INDEX_EVERY``-th write transaction of a process, and any that changed more than
``BULK_ROWS`` rows, indexes every pending document inside that transaction, before its COMMIT (``maybe_index_pending``, called where brutus commits a write on
SQLite). FTS5 writes a segment at each commit that touches it (about 45 µs, more than the write it indexes);
a batch pays that once. A search reads the pending documents itself (``search_ops``), so nothing committed
is missing from its answers. No dependencies: ``sqlite_driver.py`` imports it.
"""

from __future__ import annotations

import itertools
from typing import Any

__all__ = ["BULK_ROWS", "INDEX_EVERY", "index_pending", "maybe_index_pending"]

INDEX_EVERY = 32  # write transactions per batch
BULK_ROWS = 256  # a transaction that changed more rows than this indexes at once
_INDEX_PENDING = (
    "INSERT INTO search_index(rowid, body) SELECT key, body FROM search_documents "
    "WHERE key > (SELECT indexed FROM search_state)",
    "UPDATE search_state SET indexed = max(indexed, coalesce((SELECT max(key) FROM search_keys), 0))",
)
_writes = itertools.count(1)
_changes: dict[int, int] = {}  # sqlite3 connection id -> its total_changes at its last write transaction


def index_pending(dbapi: Any) -> None:
    """Put the pending documents into the FTS5 index, on the sqlite3 connection ``dbapi``, inside the write
    transaction it is in."""
    for statement in _INDEX_PENDING:
        dbapi.execute(statement)


def maybe_index_pending(dbapi: Any) -> None:
    """Before a write transaction's COMMIT: every ``INDEX_EVERY``-th of this process, and any that changed
    more than ``BULK_ROWS`` rows (an import, a long batch), indexes what is pending (``_indexable``)."""
    changes = dbapi.total_changes
    bulk = changes - _changes.get(id(dbapi), 0) > BULK_ROWS
    if len(_changes) > 1024:  # ids of closed connections (sqlite3 connections take no weak references)
        _changes.clear()
    _changes[id(dbapi)] = changes
    if (next(_writes) % INDEX_EVERY == 0 or bulk) and _indexable(dbapi):
        index_pending(dbapi)


def _indexable(dbapi: Any) -> bool:
    """A connection that may write, to a database that has the index (a store built on an engine at an older
    revision, which ``SessionStore(engine)`` allows, has none)."""
    if dbapi.execute("PRAGMA query_only").fetchone()[0]:
        return False
    return dbapi.execute("SELECT 1 FROM sqlite_master WHERE name = 'search_state'").fetchone() is not None
