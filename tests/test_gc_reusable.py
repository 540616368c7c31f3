"""What gc reports it freed. PostgreSQL's plain VACUUM shrinks no file (it makes dead rows' space reusable, and
its free space and visibility maps can grow the database), so there gc reports the dropped outputs' size as
stored (``bytes_reusable``), space new rows really reuse, and a ``bytes_reclaimed`` never below 0. SQLite's gc
rewrites nothing unless asked: ``bytes_reusable`` is what the file's free list grew by, ``bytes_free`` the
whole free list, both as ``PRAGMA freelist_count`` says, and later writes really reuse it; ``vacuum=True``
shrinks the file instead (``bytes_reclaimed``)."""

from __future__ import annotations

import os

import pytest
from sqlalchemy import create_engine, text

from brutus import SessionStore

from cli_helpers import run
from conftest import plain_url


def _outputs(store: SessionStore, session_id: str, names: list[str], compacted: int | None) -> None:
    """Tool parts with 300 KB outputs of varied text, pruned at ``compacted``."""
    user = store.append_message(session_id, "user")
    reply = store.append_message(session_id, "assistant", parent_id=user.id)
    for name in names:
        output = "".join(f"{name} {i:08x} {os.urandom(8).hex()}\n" for i in range(10_000))
        state = {"status": "completed", "input": {}, "output": output, "title": "t", "metadata": {},
                 "time": {"start": 1, "end": 2, "compacted": compacted}}
        store.append_part(reply.id, {"type": "tool", "call_id": name, "tool": "read", "state": state})
    store.finish_message(reply.id, finish="stop")


def _sql(url: str, query: str) -> int:
    engine = create_engine(plain_url(url))
    try:
        with engine.connect() as conn:
            return int(conn.execute(text(query)).scalar_one())
    finally:
        engine.dispose()


STORED = ("SELECT coalesce(sum(pg_column_size(o.output)), 0) FROM tool_outputs o "
          "JOIN tool_states t ON t.part_id = o.part_id WHERE t.compacted_at < 10")


@pytest.mark.usefixtures("plain_outputs")
def test_gc_reports_what_it_really_freed(store_url: str, backend: str) -> None:
    # no background indexing: what the file grows by below is the outputs' own pages, not the search index
    store = SessionStore.open(store_url, index_in_background=False)
    session = store.create_session()
    nothing = store.gc(10)  # nothing to drop: on PostgreSQL this VACUUM wrote its maps, +40 KB, once "-40.0 KB reclaimed"
    assert (nothing.parts, nothing.output_bytes) == (0, 0)
    _outputs(store, session.id, ["old0", "old1", "old2"], 5)
    _outputs(store, session.id, ["recent"], 10**13)
    _outputs(store, session.id, ["kept"], None)
    if backend == "sqlite":
        _sqlite_freed_for_reuse(store, session.id, nothing)
        return
    assert nothing.bytes_reusable == 0 and nothing.bytes_reclaimed == max(0, nothing.bytes_before - nothing.bytes_after) >= 0
    stored = _sql(store_url, STORED)
    assert 0 < stored < 3 * 300_000  # compressed as stored
    dry = store.gc(10, dry_run=True)
    assert (dry.parts, dry.bytes_reusable, dry.bytes_reclaimed) == (3, stored, None)
    done = store.gc(10)
    assert (done.parts, done.bytes_reusable, done.output_bytes) == (3, stored, dry.output_bytes)
    assert done.bytes_reclaimed == max(0, done.bytes_before - done.bytes_after) >= 0

    # the space is really reusable: as much output again barely grows the table (without gc: by about `stored`)
    table = "SELECT pg_total_relation_size('tool_outputs')"
    size = _sql(store_url, table)
    _outputs(store, session.id, ["again0", "again1", "again2"], None)
    grown = _sql(store_url, table) - size
    assert grown < stored / 10, (grown, stored)
    _outputs(store, session.id, ["more0", "more1", "more2"], None)
    assert _sql(store_url, table) - size - grown > stored / 2  # the control: no dropped space left to reuse
    store.close()

    people = run("gc", "--before", "1970-01-01T00:00:00.010Z", "--db", store_url)
    assert people.returncode == 0, people.stderr
    line = people.stdout.splitlines()[-1]
    assert line.startswith("vacuumed: the database ") and "-" not in line
    assert line.endswith(" B returned to the system); 0 B of dropped output (as stored) freed for reuse")


def _free_list(path: str) -> tuple[int, int]:
    """(free pages × page size, file size), read by SQLite itself."""
    import sqlite3

    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        pages = conn.execute("PRAGMA freelist_count").fetchone()[0] * conn.execute("PRAGMA page_size").fetchone()[0]
    finally:
        conn.close()
    return pages, os.path.getsize(path)


def _sqlite_freed_for_reuse(store: SessionStore, session_id: str, nothing) -> None:
    path = store.engine.url.database
    assert (nothing.bytes_reusable, nothing.vacuumed, nothing.bytes_reclaimed) == (0, False, 0)
    dry = store.gc(10, dry_run=True)
    done = store.gc(10)
    assert (done.parts, done.output_bytes, done.vacuumed) == (3, dry.output_bytes, False)
    free, size = _free_list(path)
    assert done.bytes_free == free and done.bytes_after == size  # the WAL checkpointed empty
    assert done.bytes_reusable >= 0.9 * done.output_bytes  # the text's pages are free inside the file
    assert done.bytes_reclaimed == 0  # and the file kept its size: nothing rewritten

    # the space is really reused: as much output again barely grows the file (without gc: by 900 KB)
    _outputs(store, session_id, ["again0", "again1", "again2"], 5)
    store.close()  # the last connection: the WAL checkpointed into the file
    free_again, size_again = _free_list(path)
    store = SessionStore.open(f"sqlite:///{path}", index_in_background=False)
    assert size_again - size < done.output_bytes / 10 and free_again < free - 0.9 * done.output_bytes

    vacuumed = store.gc(10, vacuum=True)  # the 3 outputs written again, dropped and the file rewritten
    assert (vacuumed.parts, vacuumed.vacuumed, vacuumed.bytes_free, vacuumed.bytes_reusable) == (3, True, 0, 0)
    assert vacuumed.bytes_reclaimed >= 0.9 * vacuumed.output_bytes  # the text is gone from the file
    assert _free_list(path) == (0, vacuumed.bytes_after)
    store.close()

    people = run("gc", "--before", "1970-01-01T00:00:00.010Z", "--db", f"sqlite:///{path}")
    assert people.returncode == 0, people.stderr
    assert people.stdout.splitlines()[-1].startswith("space: the database ")
    assert "0 B of pages freed inside the file for later writes (0 B free in all)" in people.stdout
