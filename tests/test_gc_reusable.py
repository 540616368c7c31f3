"""What gc reports it freed. PostgreSQL's plain VACUUM shrinks no file (it makes dead rows' space reusable, and
its free space and visibility maps can grow the database), so there gc reports the dropped outputs' size as
stored (``bytes_reusable``), space new rows really reuse, and a ``bytes_reclaimed`` never below 0. SQLite's
report is unchanged: no ``bytes_reusable``, ``bytes_reclaimed`` the file's shrink."""

from __future__ import annotations

import os

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from brutus import SessionStore

from cli_helpers import run


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
    engine = create_engine(make_url(url))
    try:
        with engine.connect() as conn:
            return int(conn.execute(text(query)).scalar_one())
    finally:
        engine.dispose()


STORED = ("SELECT coalesce(sum(pg_column_size(o.output)), 0) FROM tool_outputs o "
          "JOIN tool_states t ON t.part_id = o.part_id WHERE t.compacted_at < 10")


def test_gc_reports_what_it_really_freed(store_url: str, backend: str) -> None:
    store = SessionStore.open(store_url)
    session = store.create_session()
    nothing = store.gc(10)  # nothing to drop: on PostgreSQL this VACUUM wrote its maps, +40 KB, once "-40.0 KB reclaimed"
    assert (nothing.parts, nothing.output_bytes) == (0, 0)
    _outputs(store, session.id, ["old0", "old1", "old2"], 5)
    _outputs(store, session.id, ["recent"], 10**13)
    _outputs(store, session.id, ["kept"], None)
    if backend == "sqlite":
        assert nothing.bytes_reusable is None and nothing.bytes_reclaimed == nothing.bytes_before - nothing.bytes_after
        done = store.gc(10)
        assert done.bytes_reusable is None and done.bytes_reclaimed == done.bytes_before - done.bytes_after
        assert done.bytes_reclaimed >= 0.9 * done.output_bytes
        store.close()
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
