"""WAL checkpoints off the writer's path (``brutus.db.checkpoint``): on SQLite a store checkpoints in a thread
of its own after it commits, keeps the WAL small without the commit's own automatic checkpoint, stops the
thread when it closes, and a checkpoint that cannot run harms nothing.
"""

from __future__ import annotations

import asyncio
import gc
import os
import threading
import time
from pathlib import Path

import pytest
from race_worker import agent_step

from brutus import AsyncSessionStore, SessionStore
from brutus.db.checkpoint import Checkpointer


def _wal(path: Path) -> int:
    wal = Path(f"{path}-wal")
    return wal.stat().st_size if wal.exists() else 0


def _checkpoint_threads(path: Path) -> list[threading.Thread]:
    """The live checkpoint threads of stores on ``path``."""
    return [t for t in threading.enumerate() if t.name == f"brutus-checkpoint {path}" and t.is_alive()]


def _joined(threads: list[threading.Thread], timeout: float = 5.0) -> bool:
    """Wait for ``threads`` to end; whether they all did within ``timeout`` seconds each."""
    for thread in threads:
        thread.join(timeout)
    return not any(thread.is_alive() for thread in threads)


@pytest.mark.usefixtures("plain_outputs")
def test_the_background_checkpoint_keeps_the_wal_small(tmp_path: Path) -> None:
    """With the commits' own automatic checkpoint off, only the store's thread checkpoints: an agent that
    pauses between steps (as one waiting for its model does) writes 12 MB through a WAL that stays small."""
    path = tmp_path / "bg.db"
    store = SessionStore.open(f"sqlite:///{path}")
    store._driver_connection().execute("PRAGMA wal_autocheckpoint = 0")  # the connection this thread writes on
    session_id = store.create_session().id
    sizes = []
    for step in range(60):
        agent_step(store, session_id, f"step {step}", output_bytes=200_000)
        assert store._checkpointer.wait_for_runs(store._checkpointer.runs + 1), "no checkpoint after a commit"
        sizes.append(_wal(path))
    store.close()
    assert os.path.getsize(path) > 12_000_000  # the rows reached the database
    assert max(sizes) < 3_000_000, sizes  # one step's pages at most: the log starts over after each pause


def test_a_reader_does_not_start_the_thread_and_close_stops_it(tmp_path: Path) -> None:
    path = tmp_path / "life.db"
    store = SessionStore.open(f"sqlite:///{path}")
    session_id = store.create_session().id
    store.close()
    assert not _checkpoint_threads(path)
    store.get_session(session_id)
    store.messages(session_id)
    assert store._checkpointer._thread is None  # reads commit nothing
    store.append_message(session_id, "user")
    assert len(_checkpoint_threads(path)) == 1
    store.close()
    assert not _checkpoint_threads(path)
    store.append_message(session_id, "user")  # used again after close: a new thread
    assert store._checkpointer.wait_for_runs(1)
    assert len(_checkpoint_threads(path)) == 1
    store.close()
    assert not _checkpoint_threads(path)
    assert not Path(f"{path}-wal").exists()  # the last connection closed: SQLite checkpointed and removed it


def test_a_store_dropped_without_close_stops_its_thread(tmp_path: Path) -> None:
    path = tmp_path / "dropped.db"
    store = SessionStore.open(f"sqlite:///{path}")
    store.create_session()
    assert len(_checkpoint_threads(path)) == 1
    del store
    gc.collect()
    assert _joined(_checkpoint_threads(path))


def test_inside_a_batch_the_thread_waits_for_the_commit(tmp_path: Path) -> None:
    path = tmp_path / "batch.db"
    store = SessionStore.open(f"sqlite:///{path}")
    session_id = store.create_session().id
    assert store._checkpointer.wait_for_runs(1)
    asked: list[bool] = []
    committed = store._checkpointer.committed
    store._checkpointer.committed = lambda: (asked.append(True), committed())[1]  # type: ignore[method-assign]
    with store.batch():
        for step in range(3):
            agent_step(store, session_id, f"step {step}")
        assert asked == []  # nothing committed yet: no checkpoint asked for
        assert store._checkpointer.runs == 1
    assert store._checkpointer.wait_for_runs(2) and store._checkpointer.runs == 2
    store.close()


def test_a_checkpoint_that_cannot_run_harms_nothing(tmp_path: Path) -> None:
    """The thread opens the file read-write without creating it: a database that is gone leaves no new
    empty file behind, and the caller sees no error."""
    missing = tmp_path / "gone.db"
    checkpointer = Checkpointer(str(missing))
    checkpointer.committed()
    assert checkpointer._thread is not None and _joined([checkpointer._thread])
    checkpointer.close()
    assert not missing.exists()
    assert checkpointer.runs == 0


def test_the_async_store_checkpoints_in_the_background_too(tmp_path: Path) -> None:
    path = tmp_path / "async.db"

    async def scenario() -> tuple[int, int]:
        store = await AsyncSessionStore.open(f"sqlite:///{path}")
        session_id = (await store.create_session()).id
        assert await asyncio.to_thread(store._checkpointer.wait_for_runs, 1)
        async with store.batch():
            await store.append_message(session_id, "user")
            await store.append_message(session_id, "assistant")
        assert await asyncio.to_thread(store._checkpointer.wait_for_runs, 2)
        runs = store._checkpointer.runs
        asked: list[bool] = []
        committed = store._checkpointer.committed
        store._checkpointer.committed = lambda: (asked.append(True), committed())[1]
        await store.get_session(session_id)
        assert asked == [] and store._checkpointer.runs == runs  # a read commits nothing: no checkpoint asked
        await store.close()
        return runs, len(_checkpoint_threads(path))

    runs, alive = asyncio.run(scenario())
    assert (runs, alive) == (2, 0)


def test_postgresql_has_no_checkpointer(db_url: str) -> None:
    store = SessionStore.open(db_url)
    try:
        assert (store._checkpointer is None) == db_url.startswith("postgresql")
    finally:
        store.close()


@pytest.mark.usefixtures("plain_outputs")  # a checkpoint of 2 MB of pages, not of their packed few KB
@pytest.mark.parametrize("delay", [0.0, 0.05])
def test_close_while_a_checkpoint_runs(tmp_path: Path, delay: float) -> None:
    path = tmp_path / "busy.db"
    store = SessionStore.open(f"sqlite:///{path}")
    session_id = store.create_session().id
    agent_step(store, session_id, "big", output_bytes=2_000_000)
    time.sleep(delay)  # the behaviour: close at once, or while the checkpoint of that big write is under way
    store.close()  # joins the thread, whatever it was doing
    assert not _checkpoint_threads(path)
    reopened = SessionStore.open(f"sqlite:///{path}")
    try:
        assert reopened.messages(session_id)[1].parts[0].state.output == "x" * 2_000_000
    finally:
        reopened.close()


def test_a_thread_that_outlives_close_still_stops(tmp_path: Path) -> None:
    """``close()`` that does not wait (as when a dropped store is collected), then a commit at once: the new
    thread has a stop of its own, so the old one cannot miss its stop and run on beside it."""
    path = tmp_path / "twice.db"
    SessionStore.open(f"sqlite:///{path}").close()
    checkpointer = Checkpointer(str(path))
    old_threads = []
    for _ in range(20):
        checkpointer.committed()
        old_threads.append(checkpointer._thread)
        checkpointer.close(timeout=0.0)
    checkpointer.committed()
    assert _joined(old_threads)
    assert checkpointer._thread.is_alive()
    checkpointer.close()
    assert not _checkpoint_threads(path)
