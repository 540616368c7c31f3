"""After a bulk write the database reads as fast as before it (issue 32): the search index holds what was
written (no backlog for the first search), and PostgreSQL's planner statistics are current when the write grew
the tables by a tenth (``store.settle``, run by ``import`` and by ``append_messages`` of 1,000 or more)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text

from brutus import SessionStore
from brutus.db.settle_ops import BULK_MESSAGES, TABLES
from brutus.importers import import_file
from corpus_helpers import all_files


@pytest.fixture
def bulk_store(db_url: str, backend: str) -> Iterator[SessionStore]:
    """A new database whose tables autovacuum leaves alone, so only brutus analyzes them here."""
    store = SessionStore.open(db_url, index_in_background=False)  # only settle indexes here
    if backend == "postgresql":
        with store.engine.begin() as conn:
            for table in TABLES:
                conn.execute(text(f"ALTER TABLE {table} SET (autovacuum_enabled = false)"))
    yield store
    store.close()


def pending(store: SessionStore) -> int:
    with store.engine.connect() as conn:
        return conn.execute(text("SELECT count(*) FROM search_pending")).scalar_one()


def estimated_messages(store: SessionStore) -> float:
    """PostgreSQL's row estimate for ``messages`` (-1: never analyzed)."""
    engine = create_engine(store.engine.url)
    try:
        with engine.connect() as conn:
            return conn.execute(text("SELECT reltuples FROM pg_class WHERE relname = 'messages'")).scalar_one()
    finally:
        engine.dispose()


def turns(count: int, word: str) -> list[dict]:
    return [{"info": {"role": "user"}, "parts": [{"type": "text", "text": f"{word} {i}"}]} for i in range(count)]


def test_a_bulk_append_leaves_nothing_pending_and_current_statistics(bulk_store: SessionStore, backend: str) -> None:
    store, pg = bulk_store, backend == "postgresql"
    session = store.create_session()
    store.append_messages(session.id, turns(BULK_MESSAGES - 1, "small"))
    assert pending(store) == BULK_MESSAGES - 1  # below a bulk write: indexed by the next search, as before
    if pg:
        assert estimated_messages(store) == -1
    store.append_messages(session.id, turns(BULK_MESSAGES, "bulk"))
    assert pending(store) == 0
    if pg:
        assert estimated_messages(store) == 2 * BULK_MESSAGES - 1  # a small table: ANALYZE reads every row
    hits = store.search("bulk", limit=3)
    assert [h.snippet for h in hits] == ["bulk 999", "bulk 998", "bulk 997"]


def test_settle_renews_statistics_only_for_a_tenth_of_growth(bulk_store: SessionStore, backend: str) -> None:
    store = bulk_store
    session = store.create_session()
    store.append_messages(session.id, turns(BULK_MESSAGES, "first"))
    store.append_messages(session.id, turns(300, "more"))  # 300 rows the statistics do not know of
    if backend == "sqlite":
        assert store.settle(messages=300) is False and pending(store) == 0  # no statistics to renew
        return
    assert estimated_messages(store) == BULK_MESSAGES
    assert store.settle(messages=99) is False  # under a tenth of 1,000
    assert estimated_messages(store) == BULK_MESSAGES and pending(store) == 0
    assert store.settle(messages=100) is True
    assert estimated_messages(store) == BULK_MESSAGES + 300
    assert store.settle() is True  # asked outright


def test_settle_inside_a_batch_waits_for_the_commit(bulk_store: SessionStore, backend: str) -> None:
    store = bulk_store
    session = store.create_session()
    with store.batch():
        store.append_messages(session.id, turns(BULK_MESSAGES, "batched"))
        assert store.settle() is False
    assert pending(store) == BULK_MESSAGES
    assert store.settle(messages=BULK_MESSAGES) is (backend == "postgresql") and pending(store) == 0


def test_an_import_leaves_nothing_pending(bulk_store: SessionStore, backend: str) -> None:
    store = bulk_store
    source = next(path for path in all_files() if "opencode" in str(path))
    created = import_file(store, source)
    assert created and pending(store) == 0
    if backend == "postgresql":
        assert estimated_messages(store) == len(store.messages(created[0])) + sum(
            len(store.messages(s)) for s in created[1:]
        )
