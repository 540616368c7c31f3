"""No backlog (issue 32): ordinary live writes are indexed by the store's background indexer, in small
transactions, a moment after they commit (``brutus.db.indexer``), so a search after them has nothing left to
index; a store without it leaves them pending for the next search, as before."""

from __future__ import annotations

import asyncio
import gc
import threading

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
