"""The store's prune and filter_compacted agree exactly with the pure rules, read no output text, and
scan back to the last boundary only."""

from __future__ import annotations

import copy
from contextlib import contextmanager

from hypothesis import HealthCheck, given, settings
from sqlalchemy import create_engine, event, text

from brutus import CompactionConfig, SessionStore
from brutus.history import filter_compacted
from brutus.pruning import prune

from builders import Msg, Tool, histories, write_history
from conftest import plain_url

@contextmanager
def capture_sql(engine, statements: list[str]):
    """Every SQL statement run on ``engine``: SQLAlchemy's event on PostgreSQL; on SQLite, where brutus runs
    statements on the driver connection directly, sqlite3's trace callback on fresh connections."""
    if engine.dialect.name == "sqlite":
        def trace(dbapi_connection, _record):
            dbapi_connection.set_trace_callback(statements.append)

        engine.dispose()
        event.listen(engine, "connect", trace)
        try:
            yield
        finally:
            event.remove(engine, "connect", trace)
            engine.dispose()
    else:
        def capture(conn, cursor, statement, *args):
            statements.append(statement)

        event.listen(engine, "before_cursor_execute", capture)
        try:
            yield
        finally:
            event.remove(engine, "before_cursor_execute", capture)


FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _blank_pruned_outputs(history):
    history = copy.deepcopy(history)
    for message in history:
        for part in message.parts:
            if part.type == "tool" and part.state.time.compacted:
                part.state.output = None
    return history


def test_prune_marks_exactly_the_seed_parts(store: SessionStore, store_url: str) -> None:
    # 12 old reads of 10,000 bytes (2,500 tokens each) then two protected user turns.
    spec = [Msg("user", text="start")]
    for _ in range(12):
        spec.append(Msg("assistant", tools=[Tool("read", output_bytes=10_000)]))
    spec += [Msg("user", text="turn 1"), Msg("assistant", tools=[Tool("read", output_bytes=10_000)]), Msg("user", text="turn 0")]
    session_id = write_history(store, spec)
    history = store.messages(session_id)
    expected = prune(copy.deepcopy(history), CompactionConfig(), now=99)

    result = store.prune(session_id)
    # the read after "turn 1" sits inside the two protected turns; the 12 older reads total 30,000 tokens,
    # never above the 40,000 protect window: nothing to prune.
    assert (result.pruned, result.total, result.parts) == (0, 30_000, [])
    assert (expected.pruned, expected.total) == (0, 30_000)

    more = [Msg("assistant", tools=[Tool("read", output_bytes=10_000)]) for _ in range(20)]
    session_id = write_history(store, [Msg("user", text="start"), *more, Msg("user", text="turn 1"), Msg("user", text="turn 0")])
    history = store.messages(session_id)
    expected = prune(copy.deepcopy(history), CompactionConfig(), now=99)
    result = store.prune(session_id)
    # 20 parts × 2,500 = 50,000 total; the first 16 (40,000) are protected, the 4 oldest (10,000) would be
    # pruned, which is not above the 20,000 minimum: nothing commits.
    assert (result.pruned, result.total, len(result.parts)) == (0, 50_000, 0)
    assert (expected.pruned, expected.total) == (0, 50_000)

    more = [Msg("assistant", tools=[Tool("read", output_bytes=10_000)]) for _ in range(30)]
    session_id = write_history(store, [Msg("user", text="start"), *more, Msg("user", text="turn 1"), Msg("user", text="turn 0")])
    history = store.messages(session_id)
    expected = prune(copy.deepcopy(history), CompactionConfig(), now=99)
    result = store.prune(session_id)
    oldest_14 = [m.parts[0].id for m in history[1:15]]
    assert (result.pruned, result.total) == (35_000, 75_000)
    assert [p.id for p in result.parts] == list(reversed(oldest_14))
    assert [p.id for p in expected.parts] == [p.id for p in result.parts]
    assert all(p.state.time.compacted is not None and p.state.output is None for p in result.parts)

    engine = create_engine(plain_url(store_url))
    with engine.connect() as conn:
        pruned = conn.execute(text("SELECT part_id FROM pruned_parts WHERE session_id = :s"), {"s": session_id}).scalars().all()
        kept = conn.execute(text("SELECT count(*) FROM tool_outputs o JOIN pruned_parts p ON p.part_id = o.part_id WHERE p.session_id = :s"), {"s": session_id}).scalar()
    engine.dispose()
    assert sorted(pruned) == sorted(oldest_14)
    assert kept == 14  # the output text is kept
    # a second prune stops at the already-compacted part: nothing more
    again = store.prune(session_id)
    assert (again.pruned, again.parts) == (0, [])


def test_prune_does_not_walk_past_the_last_boundary(store: SessionStore) -> None:
    # The summary sits inside the two protected turns; seed 004 on the full history would walk on past it
    # into messages the model no longer sees. The store prunes the view only.
    old_work = [Msg("assistant", tools=[Tool("read", output_bytes=40_000)]) for _ in range(10)]
    spec = [Msg("user", text="start"), *old_work, Msg("user", compaction=True), Msg("assistant", text="summary", summary=True, parent=11), Msg("user", text="next")]
    session_id = write_history(store, spec)
    full = store.messages(session_id)
    assert prune(copy.deepcopy(full), CompactionConfig(), now=1).pruned == 60_000  # the seed on everything
    result = store.prune(session_id)
    assert (result.pruned, result.total, result.parts) == (0, 0, [])


def test_prune_reads_no_output_text(store: SessionStore) -> None:
    spec = [Msg("user", text="go"), *[Msg("assistant", tools=[Tool("bash", output_bytes=20_000)]) for _ in range(20)], Msg("user"), Msg("user")]
    session_id = write_history(store, spec)
    statements: list[str] = []
    store.close()  # drop pooled connections so the capture sees new ones
    with capture_sql(store.engine, statements):
        result = store.prune(session_id)
    assert result.pruned > 0 and statements
    assert not any("tool_outputs" in s for s in statements)


@FAST
@given(spec=histories())
def test_store_prune_equals_pure_prune(store: SessionStore, spec) -> None:
    session_id = write_history(store, spec)
    # The store prunes the view (back to the last boundary): the pure rule applied to filter_compacted.
    view = filter_compacted(store.messages(session_id))
    expected = prune(copy.deepcopy(view), CompactionConfig(), now=1)
    result = store.prune(session_id)
    assert (result.pruned, result.total) == (expected.pruned, expected.total)
    assert [p.id for p in result.parts] == [p.id for p in expected.parts]
    after = store.messages(session_id)
    marked = {p.id for m in after for p in m.parts if p.type == "tool" and p.state.time.compacted and p.state.time.compacted != 3}
    assert marked == {p.id for p in expected.parts}


@FAST
@given(spec=histories())
def test_store_filter_compacted_equals_pure(store: SessionStore, spec) -> None:
    session_id = write_history(store, spec)
    full = store.messages(session_id)
    assert store.filter_compacted(session_id) == _blank_pruned_outputs(filter_compacted(full))


def test_filter_compacted_stops_at_the_newest_completed_boundary(store: SessionStore) -> None:
    spec = [
        Msg("user", text="first"),
        Msg("assistant", text="a"),
        Msg("user", compaction=True),
        Msg("assistant", text="summary 1", summary=True, parent=2),
        Msg("user", text="second"),
        Msg("assistant", text="b"),
        Msg("user", compaction=True, tail_back=2),
        Msg("assistant", text="summary 2", summary=True, parent=6),
        Msg("user", text="third"),
        Msg("user", compaction=True),
        Msg("assistant", text="pending summary", summary=True, finish=None, parent=9),
    ]
    session_id = write_history(store, spec)
    view = store.filter_compacted(session_id)
    full = store.messages(session_id)
    assert [m.info.id for m in view] == [m.info.id for m in full[4:]]  # tail starts two back from the boundary
    assert store.get_session(session_id).message_count == len(spec)


def _old_reads(count: int) -> list[Msg]:
    reads = [Msg("assistant", tools=[Tool("read", output_bytes=10_000)]) for _ in range(count)]
    return [Msg("user", text="start"), *reads, Msg("user", text="turn 1"), Msg("user", text="turn 0")]


def test_prune_reads_the_marked_parts_back_in_one_query(store: SessionStore) -> None:
    # 16 reads (40,000 tokens) are protected: 30 reads mark 14, 60 mark 44; the queries are the same (the marks
    # are one executemany, which SQLite's trace reports once per part)
    counts = []
    for reads, marked in ((30, 14), (60, 44)):
        session_id = write_history(store, _old_reads(reads))
        statements: list[str] = []
        store.close()
        with capture_sql(store.engine, statements):
            result = store.prune(session_id)
        assert len(result.parts) == marked
        counts.append(sum(1 for sql in statements if sql.lstrip().upper().startswith("SELECT")))
    assert counts[0] == counts[1]


def test_prune_returns_a_marked_part_whose_tool_row_names_another_session(store: SessionStore, store_url: str) -> None:
    # tool_states.session_id out of step with its part (an operator's UPDATE): the part is read back by id
    session_id = write_history(store, _old_reads(30))
    other = store.create_session().id
    oldest = store.messages(session_id)[1].parts[0].id
    engine = create_engine(plain_url(store_url))
    with engine.begin() as conn:
        conn.execute(text("UPDATE tool_states SET session_id = :o WHERE part_id = :p"), {"o": other, "p": oldest})
    engine.dispose()
    result = store.prune(session_id)
    assert len(result.parts) == 14 and result.parts[-1].id == oldest  # newest first: the oldest is last
    engine = create_engine(plain_url(store_url))
    with engine.connect() as conn:
        stamps = dict(conn.execute(text("SELECT part_id, compacted_at FROM tool_states WHERE compacted_at IS NOT NULL")).all())
    engine.dispose()
    assert sorted(stamps) == sorted(p.id for p in result.parts)
    assert all(p.state.time.compacted == stamps[p.id] and p.state.output is None for p in result.parts)


def test_a_dry_run_chooses_what_the_prune_marks_and_writes_nothing(store: SessionStore) -> None:
    more = [Msg("assistant", tools=[Tool("read", output_bytes=10_000)]) for _ in range(30)]
    session_id = write_history(store, [Msg("user", text="start"), *more, Msg("user", text="turn 1"), Msg("user", text="turn 0")])
    before = store.messages(session_id)
    planned = store.prune(session_id, dry_run=True)
    assert store.messages(session_id) == before  # nothing marked
    assert all(part.state.time.compacted is None for part in planned.parts)
    # 30 parts x 2,500 = 75,000: the newest 16 (40,000) protected, the 14 oldest (35,000) pruned
    assert (planned.pruned, planned.total, len(planned.parts)) == (35_000, 75_000, 14)
    done = store.prune(session_id)
    assert (done.pruned, done.total) == (planned.pruned, planned.total)
    assert [p.id for p in done.parts] == [p.id for p in planned.parts]
    assert store.prune(session_id, dry_run=True).parts == []  # pruned already: nothing more to choose


def test_stats_from_the_library(store: SessionStore) -> None:
    session_id = write_history(store, [Msg("user", text="start"), Msg("assistant", tools=[Tool("read", output_bytes=4_000)])])
    stats = store.stats(session_id)
    assert (stats.session_id, stats.messages, stats.user_messages, stats.assistant_messages) == (session_id, 2, 1, 1)
    assert [(t.tool, t.calls, t.completed) for t in stats.tools] == [("read", 1, 1)]
