"""No backlog (issue 32): ordinary live writes are indexed by the store's background indexer, in small
transactions, a moment after they commit (``brutus.db.indexer``), so a search after them has nothing left to
index; a store without it leaves them pending for the next search, as before."""

from __future__ import annotations

import asyncio
import gc
import threading
from typing import Any

import pytest
from sqlalchemy import text

from brutus import SessionStore


def pending(store: SessionStore) -> int:
    with store.engine.connect() as conn:
        return conn.execute(text("SELECT count(*) FROM search_pending")).scalar_one()


def indexed(store: SessionStore) -> int:
    table = "search_keys" if store.engine.dialect.name == "sqlite" else "search_vectors"
    with store.engine.connect() as conn:
        return conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one()


def live_writes(store: SessionStore, count: int) -> list[str]:
    """An agent's writes, one call (and commit) each: a message, its text, a tool call completed."""
    session = store.create_session()
    ids = []
    for n in range(count):
        message = store.append_message(session.id, "assistant")
        store.append_part(message.id, {"type": "text", "text": f"step {n} quokka{n}"})
        tool = store.append_part(message.id, {"type": "tool", "call_id": f"c{n}", "tool": "bash",
                                              "state": {"status": "running", "input": {"command": f"ls {n}"}}})
        store.update_tool(tool.id, status="completed", output=f"listed quokka{n}")
        ids.append(message.id)
    return ids


def test_live_writes_are_indexed_in_the_background_in_small_transactions(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("brutus.store.BATCH", 7)  # rows of each table per transaction (SQLite)
    with SessionStore.open(store_url) as store:
        ids = live_writes(store, 30)
        assert store._indexer is not None and store._indexer.wait_idle()
        assert pending(store) == 0 and indexed(store) == 90  # 30 texts, 30 calls, 30 outputs
        if store.engine.dialect.name == "sqlite":
            assert store._indexer.runs >= 60 // 7  # 60 parts (text and tool), 7 rows a transaction
        hits = store.search("quokka7")
        assert [(h.message_id, h.field) for h in hits] == [(ids[7], "output"), (ids[7], "text")]
        runs = store._indexer.runs
        assert store.search("quokka29") and store._indexer.wait_idle() and store._indexer.runs == runs  # reads wake nothing


def test_without_the_background_indexer_writes_stay_pending_for_the_next_search(store_url: str) -> None:
    with SessionStore.open(store_url, index_in_background=False) as store:
        ids = live_writes(store, 5)
        assert store._indexer is None and pending(store) == 15 and indexed(store) == 0
        assert [h.message_id for h in store.search("quokka3")] == [ids[3], ids[3]]
        assert pending(store) == 0 and indexed(store) == 15


def test_a_read_only_store_has_no_indexer(store_url: str) -> None:
    with SessionStore.open(store_url) as store:
        live_writes(store, 1)
    with SessionStore.open(store_url, read_only=True) as reader:
        assert reader._indexer is None and len(reader.search("quokka0")) == 2


def test_a_store_dropped_without_close_stops_its_indexer(store_url: str) -> None:
    others = set(threading.enumerate())  # other tests' stores may still have theirs
    store = SessionStore.open(store_url)
    live_writes(store, 2)
    assert store._indexer is not None and store._indexer.wait_idle()
    threads = [t for t in threading.enumerate() if t.name.startswith("brutus-indexer") and t not in others]
    assert len(threads) == 1
    del store
    gc.collect()
    for thread in threads:
        thread.join(10)
        assert not thread.is_alive()


def test_the_async_store_indexes_live_writes_in_the_background(store_url: str) -> None:
    from brutus import AsyncSessionStore

    async def main() -> tuple[int, int, list[str], list[str]]:
        async with await AsyncSessionStore.open(store_url) as store:
            session = await store.create_session()
            ids = []
            for n in range(12):
                message = await store.append_message(session.id, "user")
                await store.append_part(message.id, {"type": "text", "text": f"a wallaby{n}"})
                ids.append(message.id)
            async with store.batch():
                last = await store.append_message(session.id, "user")
                await store.append_part(last.id, {"type": "text", "text": "a batched wallaby"})
            assert store._indexer is not None
            await store._indexer.wait_idle()
            hits = await store.search("wallaby5")
            return pending(sync), indexed(sync), [h.message_id for h in hits], [ids[5]]

    sync = SessionStore.open(store_url, index_in_background=False)
    try:
        left, done, found, want = asyncio.run(main())
    finally:
        sync.close()
    assert (left, done, found) == (0, 13, want)


def test_close_on_the_indexer_thread_itself_stops_it_without_an_error() -> None:
    """A dropped store can be collected on its indexer's thread (the thread's call held its last reference):
    its finalizer closes the indexer there, which must not try to join the thread it runs on."""
    from brutus.db.indexer import Indexer

    closed, results = threading.Event(), []

    class Owner:
        def index(self) -> bool:
            try:
                indexer.close()
            except Exception as exc:  # noqa: BLE001  what the test looks for
                results.append(exc)
            else:
                results.append(None)
            closed.set()
            return False

    owner = Owner()
    indexer = Indexer(owner.index, name="self-close")
    indexer.committed()
    thread = indexer._thread
    assert closed.wait(10), "the indexer never ran"
    thread.join(10)
    assert results == [None] and not thread.is_alive() and indexer._thread is None


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_an_index_run_gives_way_to_a_delete_that_waits_on_it(store_url: str) -> None:
    """PostgreSQL: a delete's cascade locks a part's vector, then waits on a text part that an index run holds
    (its upsert of texts checked that part's key), while the run's upsert of calls waits on that vector: a
    deadlock, which PostgreSQL ended by failing the delete (CI, a session cleared under the background
    indexer). The run gives up instead (its lock timeout), the delete commits, what the run left is indexed by
    the next."""
    import psycopg
    from pgcluster import wait_for
    from sqlalchemy import event
    from sqlalchemy.engine import make_url

    from brutus import DatabaseError
    from brutus.db.search_ops import index_pending
    from brutus.flows import Tx
    from conftest import plain_url

    libpq = make_url(plain_url(store_url)).set(drivername="postgresql").render_as_string(hide_password=False)
    with SessionStore.open(store_url, index_in_background=False) as store:
        session = store.create_session()
        message = store.append_message(session.id, "assistant")
        words = store.append_part(message.id, {"type": "text", "text": "a numbat"})
        call = store.append_part(message.id, {"type": "tool", "call_id": "c1", "tool": "bash",
                                              "state": {"status": "running", "input": {"command": "ls bilby"}}})
        assert store.run(Tx(index_pending("postgresql"))) and indexed(store) == 2
        with store.engine.begin() as conn:  # both pending again, as after an edit (what migration 0005's triggers do)
            conn.execute(text("UPDATE parts SET search_xid = pg_current_xact_id() WHERE id = :t"), {"t": words.id})
            conn.execute(text("UPDATE tool_states SET search_xid = pg_current_xact_id() WHERE part_id = :c"), {"c": call.id})

        at_calls, go = threading.Event(), threading.Event()

        @event.listens_for(store.engine, "before_cursor_execute")
        def hold(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
            if statement.startswith("INSERT INTO search_vectors") and "FROM tool_states" in statement:
                driver = conn.connection.driver_connection
                if driver.pgconn.pipeline_status:  # the upsert of texts sent, pipelined (``runner.drive``): run
                    with driver.pipeline():  # an inner pipeline's end waits for the results sent so far
                        pass
                at_calls.set()  # the texts upserted: the text part's key held
                assert go.wait(30)

        outcome: list[Any] = []
        deleted: list[Any] = []

        def into(results: list[Any], call: Any) -> Any:
            def run() -> None:
                try:
                    results.append(call())
                except Exception as exc:  # noqa: BLE001  what the test looks at
                    results.append(exc)

            return threading.Thread(target=run)

        # nothing prepared: through a transaction pooler the next statement may reach another server connection
        deleter = psycopg.connect(libpq, prepare_threshold=None)
        watcher = psycopg.connect(libpq, autocommit=True, prepare_threshold=None)
        try:
            deleter.execute("DELETE FROM search_vectors WHERE part_id = %s AND kind = 1", (call.id,))
            (pid,) = deleter.execute("SELECT pg_backend_pid()").fetchone()
            indexing = into(outcome, lambda: store.run(Tx(index_pending("postgresql"))))
            indexing.start()
            assert at_calls.wait(30), outcome
            deleting = into(deleted, lambda: deleter.execute("DELETE FROM parts WHERE id = %s", (words.id,)).rowcount)
            deleting.start()
            wait_for(lambda: watcher.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone() == ("Lock",),
                     "the delete to wait on the text part")
            go.set()
            deleting.join(30)
            indexing.join(30)
            assert not deleting.is_alive() and not indexing.is_alive()
            assert deleted == [1]
            deleter.commit()
        finally:
            go.set()
            deleter.close()
            watcher.close()
            event.remove(store.engine, "before_cursor_execute", hold)
        assert len(outcome) == 1 and isinstance(outcome[0], DatabaseError) and "lock timeout" in str(outcome[0])
        assert pending(store) == 1  # the call, still
        assert store.run(Tx(index_pending("postgresql"))) and pending(store) == 0
        assert [h.part_id for h in store.search("bilby")] == [call.id] and store.search("numbat") == []
