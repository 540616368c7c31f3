"""Migrations with data: a database as each past revision wrote it (tests/data/migrations, see
tests/migration_fixtures.py) upgraded to head keeps every row, column for column, on SQLite and PostgreSQL;
the store reads it as it was; downgrades keep the rows too, and downgrade → upgrade lands where it started.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import inspect

from brutus import SchemaOutOfDate, SessionStore
from brutus.db import migrate
from brutus.db.engine import make_engine

from integrity import integrity_problems
from migration_fixtures import load_rows, past_revisions, raw_rows, read_fixture

PAST = [r for r in past_revisions() if r != migrate.head_revision()]


def _upgrade(url: str, revision: str = "head") -> None:
    engine = make_engine(url)
    try:
        migrate.upgrade(engine, revision)
    finally:
        engine.dispose()


def _downgrade(url: str, revision: str) -> None:
    engine = make_engine(url)
    try:
        migrate.downgrade(engine, revision)
    finally:
        engine.dispose()


def _revision(url: str) -> str | None:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return migrate.current_revision(conn)
    finally:
        engine.dispose()


def _indexes(url: str, table: str) -> set[str]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return {ix["name"] for ix in inspect(conn).get_indexes(table)}
    finally:
        engine.dispose()


def assert_rows_intact(url: str, fixture: dict[str, Any]) -> None:
    """Every fixture row is in the database with the same values (columns added since may hold anything)."""
    now = raw_rows(url)
    for table, rows in fixture["tables"].items():
        assert len(now[table]) == len(rows), table
        for before, after in zip(rows, now[table]):
            assert {column: after[column] for column in before} == before, f"{table} row changed"


def assert_reads_as_written(url: str, fixture: dict[str, Any]) -> None:
    """The store reads the sample as brutus wrote it (the sample's contents are in migration_fixtures.py; the
    compactions as that revision's brutus left them: 0001's also kept a failed one for a refused compaction)."""
    odd = "nul \x00, lone \ud800, escape \ue000, crlf\r\n, é漢🤖"
    with SessionStore.open(url, auto_migrate=False) as store:
        main, child = sorted(store.list_sessions(), key=lambda s: s.parent_id is not None)
        assert main.title == f"main {odd}" and child.parent_id == main.id
        history = store.messages(main.id)
        first = history[0]
        assert first.info.metadata == {"k": odd} and first.parts[0].text == f"please {odd}"
        assert [p.type for p in first.parts] == ["text", "file", "agent", "subtask"]
        tools = {p.call_id: p for p in history[1].parts if p.type == "tool"}
        assert {c: p.state.status for c, p in tools.items()} == {f"call_{s}": s for s in ("pending", "running", "completed", "error")}
        assert tools["call_completed"].state.output == f"done {odd}\n" * 50
        assert tools["call_error"].state.error == f"failed {odd}"
        assert history[1].info.tokens.cache.read == 300
        pruned = [p for m in history for p in m.parts if p.type == "tool" and p.state.time.compacted]
        assert pruned and all(p.state.output for p in pruned)  # pruned, the text kept
        view = store.filter_compacted(main.id)
        assert view[0].parts[0].type == "compaction" and view[1].info.summary
        assert view[1].parts[0].text == "We added the parser; next: tests."
        compactions = sorted(fixture["tables"]["compactions"], key=lambda row: (row["created_at"], row["id"]))
        assert [c.status for c in store.compactions(main.id)] == [row["status"] for row in compactions]
        assert compactions[0]["status"] == "completed"
        assert len(store.messages(child.id)) == 1
        assert integrity_problems(store) == []


@pytest.mark.parametrize("revision", PAST)
def test_a_past_revision_upgrades_to_head_with_every_row(db_url: str, revision: str) -> None:
    fixture = read_fixture(revision)
    _upgrade(db_url, revision)
    load_rows(db_url, fixture["tables"])
    assert_rows_intact(db_url, fixture)  # the fixture went in as it is

    with pytest.raises(SchemaOutOfDate):
        SessionStore.open(db_url, auto_migrate=False)
    SessionStore.open(db_url).close()  # auto_migrate upgrades in place
    assert _revision(db_url) == migrate.head_revision()
    assert_rows_intact(db_url, fixture)
    assert_reads_as_written(db_url, fixture)


@pytest.mark.parametrize("revision", PAST)
def test_downgrade_to_a_past_revision_keeps_the_rows_and_upgrades_again(db_url: str, revision: str) -> None:
    fixture = read_fixture(revision)
    _upgrade(db_url, revision)
    load_rows(db_url, fixture["tables"])
    _upgrade(db_url)
    head_indexes = _indexes(db_url, "messages")

    _downgrade(db_url, revision)
    assert _revision(db_url) == revision
    assert_rows_intact(db_url, fixture)
    _upgrade(db_url)
    assert _indexes(db_url, "messages") == head_indexes
    assert_rows_intact(db_url, fixture)
    assert_reads_as_written(db_url, fixture)


def test_0002_swaps_the_summary_index(db_url: str) -> None:
    _upgrade(db_url, "0001")
    assert {"ix_messages_session_id_summary"} <= _indexes(db_url, "messages")
    _upgrade(db_url, "0002")
    messages = _indexes(db_url, "messages")
    assert "ix_messages_session_id_summary_seq" in messages and "ix_messages_session_id_summary" not in messages
    _downgrade(db_url, "0001")
    messages = _indexes(db_url, "messages")
    assert "ix_messages_session_id_summary" in messages and "ix_messages_session_id_summary_seq" not in messages


def test_0006_swaps_the_summary_and_session_part_indexes(db_url: str) -> None:
    old = ({"ix_messages_session_id_summary_seq"}, {"ix_parts_session_id_type_id"})
    new = ({"ix_messages_summaries"}, {"ix_parts_session_id_message_id_position"})
    _upgrade(db_url, "0005")
    fixture = read_fixture("0005")
    load_rows(db_url, fixture["tables"])
    for revision, (present, gone) in (("0006", (new, old)), ("0005", (old, new)), ("0006", (new, old))):
        (_upgrade if revision == "0006" else _downgrade)(db_url, revision)
        messages, parts = _indexes(db_url, "messages"), _indexes(db_url, "parts")
        assert present[0] <= messages and present[1] <= parts, revision
        assert not (gone[0] & messages or gone[1] & parts), revision
    assert_rows_intact(db_url, fixture)
    _upgrade(db_url)  # the store reads a database at head
    assert_reads_as_written(db_url, fixture)


def _query_plan(url: str, statement: Any, params: dict[str, Any] | None = None) -> list[str]:
    """The plan of one of brutus's statements for session ``ses_x`` (or ``params``): SQLite's ``EXPLAIN QUERY
    PLAN`` steps, or PostgreSQL's ``EXPLAIN`` lines with sequential scans off (so it shows whether an index can
    serve at all)."""
    from sqlalchemy import text

    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            compiled = statement.compile(dialect=conn.dialect)
            params = compiled.construct_params(params or {"b_sid": "ses_x"})
            if conn.dialect.name == "postgresql":
                conn.execute(text("SET enable_seqscan = off"))
                return [row[0] for row in conn.exec_driver_sql("EXPLAIN " + str(compiled), params)]
            raw = conn.connection.driver_connection
            args = [params[name] for name in compiled.positiontup]
            return [row[3] for row in raw.execute("EXPLAIN QUERY PLAN " + str(compiled), args)]
    finally:
        engine.dispose()


def test_the_boundary_query_uses_the_summary_index_which_holds_only_summaries(db_url: str) -> None:
    """Without ``seq`` in the summary index (0002) SQLite ran the boundary query (each compaction's final
    transaction) in time quadratic in the session's history: 11.6 s at 20,000 messages. Since 0006 the index is
    partial, on the query's own term, so each planner can use it (PostgreSQL must prove the query implies the
    index's condition)."""
    from sqlalchemy import text

    from brutus.db import statements

    _upgrade(db_url)
    fixture = read_fixture("0005")
    load_rows(db_url, fixture["tables"])
    summaries = sum(1 for row in fixture["tables"]["messages"] if row["summary"])
    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            if conn.dialect.name == "postgresql":
                counted = "SELECT count(*) FROM messages WHERE summary IS true"
            else:
                counted = "SELECT count(*) FROM messages INDEXED BY ix_messages_summaries WHERE summary IS 1"
            assert conn.execute(text(counted)).scalar() == summaries == 1
    finally:
        engine.dispose()
    plan = _query_plan(db_url, statements.NEWEST_BOUNDARY)
    assert any("ix_messages_summaries" in step for step in plan), plan


def test_a_session_loads_its_parts_in_index_order_without_a_sort(tmp_path) -> None:
    """``SESSION_PARTS`` reads the parts' session index in its order (0006): SQLite sorts nothing."""
    from brutus.db import statements

    url = f"sqlite:///{tmp_path / 'plan.db'}"
    SessionStore.open(url).close()
    plan = _query_plan(url, statements.SESSION_PARTS)
    assert plan == ["SEARCH parts USING INDEX ix_parts_session_id_message_id_position (session_id=?)"], plan


def test_0007_swaps_the_session_list_index(db_url: str) -> None:
    old, new = {"ix_sessions_updated_at"}, {"ix_sessions_updated_at_id"}
    _upgrade(db_url, "0006")
    fixture = read_fixture("0006")
    load_rows(db_url, fixture["tables"])
    for revision, present, gone in (("0007", new, old), ("0006", old, new), ("0007", new, old)):
        (_upgrade if revision == "0007" else _downgrade)(db_url, revision)
        sessions = _indexes(db_url, "sessions")
        assert present <= sessions and not gone & sessions, revision
        assert "ix_sessions_parent_id" in sessions
    assert_rows_intact(db_url, fixture)
    _upgrade(db_url)  # the store reads a database at head
    assert_reads_as_written(db_url, fixture)


def test_a_page_of_sessions_is_a_range_of_the_list_index(db_url: str) -> None:
    """A page after a session reads ``ix_sessions_updated_at_id`` from that position, in its order (0007): on
    SQLite a range search and no sort, on PostgreSQL an index condition on the row comparison."""
    from sqlalchemy import text

    from brutus.db import statements

    _upgrade(db_url)
    engine = make_engine(db_url)  # 5,000 sessions, three to a time, and planner statistics
    try:
        with engine.begin() as conn:
            conn.execute(
                text("INSERT INTO sessions (id, created_at, updated_at, last_seq, boundary_seq) VALUES (:id, :n, :t, 0, 0)"),
                [{"id": f"ses_{n:06d}", "n": n, "t": n // 3} for n in range(5_000)],
            )
            conn.execute(text("ANALYZE"))
    finally:
        engine.dispose()
    params = {"b_updated": 1000, "b_after": "ses_003000", "b_limit": 50}
    for archived, after in ((True, "id"), (False, "id"), (True, "position"), (False, "position")):
        page = statements.session_list(parent=False, include_archived=archived, after=after, limit=True)
        plan = _query_plan(db_url, page, params)
        if db_url.startswith("sqlite"):
            assert plan[0] == "SEARCH sessions USING INDEX ix_sessions_updated_at_id ((updated_at,id)<(?,?))", plan
            # by id, the cursor's position is one primary-key lookup, made once
            assert plan[1:] == ([] if after == "position" else [
                "SCALAR SUBQUERY 1", "SEARCH after USING INDEX sqlite_autoindex_sessions_1 (id=?)", "REUSE SUBQUERY 1"]), plan
        else:
            assert any("Index Scan Backward using ix_sessions_updated_at_id" in line for line in plan), plan
            assert any("Index Cond: (ROW(updated_at, (id)::text) < ROW(" in line for line in plan), plan
            assert not any("Sort" in line for line in plan), plan
    first = statements.session_list(parent=False, include_archived=True, after=None, limit=True)
    plan = _query_plan(db_url, first, {"b_limit": 50})
    assert any("ix_sessions_updated_at_id" in line for line in plan) and not any("Sort" in line or "B-TREE" in line for line in plan), plan


def test_every_revision_downgrades_to_base_and_back(db_url: str) -> None:
    """Walk the whole chain one revision at a time, both ways, on an empty database."""
    script = migrate._script()
    chain = [r.revision for r in reversed(list(script.walk_revisions()))]
    for revision in chain:
        _upgrade(db_url, revision)
        assert _revision(db_url) == revision
    for revision in reversed(chain[:-1]):
        _downgrade(db_url, revision)
        assert _revision(db_url) == revision
    _downgrade(db_url, "base")
    assert _revision(db_url) is None
    _upgrade(db_url)
    assert _revision(db_url) == migrate.head_revision()


def _boundary_query_steps(tmp_path, turns: int) -> tuple[int, Any]:
    """SQLite VM steps of the boundary query on a session of ``turns`` user/assistant pairs and a compaction
    not summarized yet (no boundary anywhere, as at a session's first compaction), and what it found."""
    import sqlite3

    from sqlalchemy.dialects import sqlite

    from brutus.db import statements

    path = tmp_path / f"steps-{turns}.db"
    store = SessionStore.open(f"sqlite:///{path}")
    session_id = store.create_session().id
    turn = [
        {"info": {"role": "user"}, "parts": [{"type": "text", "text": "do it"}]},
        {"info": {"role": "assistant", "finish": "stop"}, "parts": [{"type": "text", "text": "done"}]},
    ]
    store.append_messages(session_id, turn * turns)
    store.append_messages(session_id, [{"info": {"role": "user"}, "parts": [{"type": "compaction"}]}])
    store.close()
    compiled = statements.NEWEST_BOUNDARY.compile(dialect=sqlite.dialect())
    params = compiled.construct_params({"b_sid": session_id})
    raw = sqlite3.connect(path)
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    raw.set_progress_handler(count, 1)
    found = raw.execute(str(compiled), [params[n] for n in compiled.positiontup]).fetchall()
    raw.close()
    return steps, found


def test_the_boundary_query_reads_the_summaries_not_the_history(tmp_path) -> None:
    """Before the first boundary of a session, the boundary query walked every message newest first and
    probed each for a summary after it (3.5 ms at 4,000 messages, growing with the history); it starts from
    the session's summaries now. VM steps are counted, not timed: the same at 100 and 2,000 turns. (After an
    operator's ANALYZE of a one-session file, SQLite scans the table either way: its statistics cannot tell
    that summaries are rare.)"""
    small, found_small = _boundary_query_steps(tmp_path, 100)
    large, found_large = _boundary_query_steps(tmp_path, 2000)
    assert found_small == found_large == []
    assert large <= small + 50, (small, large)


def _index_as_0007(url: str) -> None:
    """Index every document the way 0007's brutus did (SQLite: keys 1, 2, 3, … in the order rows were
    written; PostgreSQL: vectors without a time), with plain SQL."""
    from sqlalchemy import text

    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(text("INSERT INTO search_vectors (part_id, kind, vector) SELECT id, 0, "
                                  "coalesce(brutus_search_vector(data ->> 'text'), ''::tsvector) FROM parts "
                                  "WHERE type IN ('text', 'reasoning')"))
                conn.execute(text("INSERT INTO search_vectors (part_id, kind, vector) SELECT part_id, 2, "
                                  "coalesce(brutus_search_vector(output), ''::tsvector) FROM tool_outputs"))
                conn.execute(text("UPDATE search_state SET indexed = pg_current_snapshot()"))
                return
            conn.execute(text("INSERT INTO search_keys (part_id, kind) SELECT part_id, kind FROM search_pending"))
            conn.execute(text("INSERT INTO search_index (rowid, body) SELECT key, body FROM search_documents"))
            conn.execute(text("UPDATE search_state SET parts_seen = (SELECT max(rowid) FROM parts), "
                              "tool_states_seen = (SELECT max(rowid) FROM tool_states), "
                              "tool_outputs_seen = (SELECT max(rowid) FROM tool_outputs)"))
    finally:
        engine.dispose()


def _search_index(url: str) -> list[tuple[Any, ...]]:
    """SQLite: (key, part, kind, the key's millisecond, its message's time) of every key, and FTS5's count of
    documents; PostgreSQL: (part, kind, the vector's time, its message's time)."""
    from sqlalchemy import text

    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            if conn.dialect.name == "postgresql":
                if "created_at" not in {c["name"] for c in inspect(conn).get_columns("search_vectors")}:
                    return []
                return [tuple(r) for r in conn.execute(text(
                    "SELECT v.part_id, v.kind, v.created_at, m.created_at FROM search_vectors v JOIN parts p ON p.id = v.part_id "
                    "JOIN messages m ON m.id = p.message_id ORDER BY v.part_id, v.kind"))]
            rows = [tuple(r) for r in conn.execute(text(
                "SELECT k.key, k.part_id, k.kind, k.key / 2097152, m.created_at FROM search_keys k JOIN parts p ON p.id = k.part_id "
                "JOIN messages m ON m.id = p.message_id ORDER BY k.key"))]
            (indexed,) = conn.execute(text("SELECT count(*) FROM search_index_docsize")).one()
            return rows + [("fts5 documents", indexed)]
    finally:
        engine.dispose()


def _vector_statistics(url: str) -> int | None:
    from sqlalchemy import text

    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return conn.execute(text("SELECT attstattarget FROM pg_attribute WHERE attrelid = 'search_vectors'::regclass "
                                     "AND attname = 'vector'")).scalar_one()
    finally:
        engine.dispose()


def test_0008_gives_the_index_time_order_and_downgrades(db_url: str) -> None:
    """A 0007 database indexed as 0007 left it: 0008 keys every document by its message's time (SQLite) or
    gives every vector its message's time (PostgreSQL), FTS5 holding each document once under its new key; a
    read-only store (which indexes nothing) finds what it found before; the downgrade gives 0007's shape
    back (keys 1, 2, 3, …, no time column), and up again."""
    fixture = read_fixture("0007")
    _upgrade(db_url, "0007")
    load_rows(db_url, fixture["tables"])
    _index_as_0007(db_url)
    sqlite = db_url.startswith("sqlite")
    before = _search_index(db_url)

    _upgrade(db_url, "0008")
    after = _search_index(db_url)
    if sqlite:
        keys, (label, indexed) = after[:-1], after[-1]
        assert len(keys) == len(before) - 1 == indexed and label == "fts5 documents"
        assert {k[1:3] for k in keys} == {k[1:3] for k in before[:-1]}
        assert all(bucket == created for _, _, _, bucket, created in keys)  # the key's millisecond is its message's
        assert [k[4] for k in keys] == sorted(k[4] for k in keys)
    else:
        assert before == [] and after and all(v[2] == v[3] for v in after)
        assert "ix_search_vectors_created_at" in _indexes(db_url, "search_vectors")
        assert _vector_statistics(db_url) == 1000  # a rare word's estimate: GIN, not the walk
    assert_rows_intact(db_url, fixture)
    _upgrade(db_url)  # a store opens only a database at head; the later revisions leave the index as it is
    with SessionStore.open(db_url, read_only=True) as reader:
        hits = reader.search("turn", limit=10)
        assert [h.message_id for h in hits] == sorted((h.message_id for h in hits), reverse=True) and len(hits) == 4
        assert [h.field for h in reader.search("done", limit=10)] == ["text", "output"]  # one message: position
    _downgrade(db_url, "0007")
    down = _search_index(db_url)
    if sqlite:
        assert [k[0] for k in down[:-1]] == list(range(1, len(down))) and down[-1] == ("fts5 documents", len(down) - 1)
        assert [k[1:3] for k in down[:-1]] == [k[1:3] for k in after[:-1]]  # in time order
    else:
        assert down == [] and "ix_search_vectors_created_at" not in _indexes(db_url, "search_vectors")
        assert _vector_statistics(db_url) in (-1, None)  # the default again (None from PostgreSQL 17)
    _upgrade(db_url)
    assert _search_index(db_url) == after
    assert_reads_as_written(db_url, fixture)
