"""The async store's kept aiosqlite connections (``brutus.db.async_sqlite``) and its SQLite batches.

Each call takes a kept connection and gives it back; concurrent calls each have their own; at most five
idle ones are kept; a batch is a trip per call (the first begins the transaction) and one for its COMMIT.
Whatever is cancelled or fails, nothing half-done is committed, no connection goes back inside a
transaction, and ``close`` leaves no connection open.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from typing import Any

import aiosqlite
import pytest

import brutus.async_store
from brutus import AsyncSessionStore, DatabaseError
from brutus.async_store import _end_sqlite
from brutus.db.async_sqlite import DriverConnections

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Boom(Exception):
    pass


@pytest.fixture
def taken(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every aiosqlite connection the stores of the test take from their engines."""
    seen: list[Any] = []
    take = DriverConnections.take

    async def recording(self: DriverConnections) -> Any:
        driver = await take(self)
        if driver is not None and all(driver is not d for d in seen):
            seen.append(driver)
        return driver

    monkeypatch.setattr(DriverConnections, "take", recording)
    return seen


def trips(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the functions sent to aiosqlite's threads from now on."""
    names: list[str] = []
    execute = aiosqlite.Connection._execute

    async def counted(self: Any, fn: Any, *args: Any, **kwargs: Any) -> Any:
        names.append(getattr(fn, "__name__", repr(fn)))
        return await execute(self, fn, *args, **kwargs)

    monkeypatch.setattr(aiosqlite.Connection, "_execute", counted)
    return names


def is_open(driver: Any) -> bool:
    return driver._connection is not None


async def test_calls_reuse_one_kept_connection(tmp_path, taken: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    async with await AsyncSessionStore.open(f"sqlite:///{tmp_path / 'a.db'}") as store:
        ses = await store.create_session()
        sent = trips(monkeypatch)
        for _ in range(5):
            msg = await store.append_message(ses.id, "user")
            await store.append_part(msg.id, {"type": "text", "text": "x"})
        assert len(await store.messages(ses.id)) == 5
        assert len(taken) == 1 and is_open(taken[0])
        assert sent == ["_transaction_sqlite"] * 11  # one trip per call: no checkout, no reset on return
    assert not is_open(taken[0])


async def test_a_batch_is_a_trip_per_call_and_one_for_commit(
    tmp_path, taken: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    async with await AsyncSessionStore.open(f"sqlite:///{tmp_path / 'b.db'}") as store:
        ses = await store.create_session()
        sent = trips(monkeypatch)
        async with store.batch():
            msg = await store.append_message(ses.id, "user")
            await store.append_part(msg.id, {"type": "text", "text": "x"})
            await store.append_part(msg.id, {"type": "text", "text": "y"})
        assert sent == ["_drive_in_batch"] * 3 + ["_end_sqlite"]  # the first call's trip began the transaction
        assert [p.text for p in (await store.messages(ses.id))[0].parts] == ["x", "y"]
        assert len(taken) == 1 and not taken[0]._conn.in_transaction
        sent.clear()
        async with store.batch():
            pass
        assert sent == []  # a batch without calls: no transaction, no trip


async def test_concurrent_calls_each_have_a_connection_and_five_are_kept(tmp_path, taken: list[Any]) -> None:
    path = tmp_path / "c.db"
    async with await AsyncSessionStore.open(f"sqlite:///{path}") as store:
        ses = await store.create_session()
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # every append waits for the write lock: all twelve at once
        asyncio.get_running_loop().call_later(0.3, holder.execute, "ROLLBACK")
        await asyncio.gather(*(store.append_message(ses.id, "user") for _ in range(12)))
        holder.close()
        assert len(taken) == 12
        assert sum(map(is_open, taken)) == 5  # the pool's size: the others were closed when given back
        assert [m.info.seq for m in await store.messages(ses.id)] == list(range(1, 13))
    assert not any(map(is_open, taken))


async def test_a_batch_cancelled_waiting_for_begin_writes_nothing_and_the_store_goes_on(
    tmp_path, taken: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "d.db"
    beginning = threading.Event()
    in_batch = AsyncSessionStore._drive_in_batch

    def begins(self: AsyncSessionStore, driver: Any, op: Any) -> Any:
        beginning.set()
        return in_batch(self, driver, op)

    monkeypatch.setattr(AsyncSessionStore, "_drive_in_batch", begins)
    async with await AsyncSessionStore.open(f"sqlite:///{path}") as store:
        ses = await store.create_session()
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")

        async def unit() -> None:
            async with store.batch():
                await store.append_message(ses.id, "user", agent="cancelled")

        task = asyncio.create_task(unit())
        assert await asyncio.to_thread(beginning.wait, 10)  # its BEGIN IMMEDIATE goes to aiosqlite's thread
        task.cancel()
        holder.execute("ROLLBACK")  # the BEGIN gets the lock only now, after the cancel
        with pytest.raises(asyncio.CancelledError):
            await task
        # the connection went back after its ROLLBACK was queued behind the BEGIN: the next call uses it
        msg = await store.append_message(ses.id, "user", agent="after")
        holder.close()
        history = await store.messages(ses.id)
        assert [(m.info.seq, m.info.agent) for m in history] == [(1, "after")] and msg.seq == 1
        assert len(taken) == 1 and not taken[0]._conn.in_transaction


async def test_a_batch_that_raises_or_is_cancelled_inside_writes_nothing(tmp_path, taken: list[Any]) -> None:
    async with await AsyncSessionStore.open(f"sqlite:///{tmp_path / 'e.db'}") as store:
        ses = await store.create_session()
        with pytest.raises(Boom):
            async with store.batch():
                await store.append_message(ses.id, "user", agent="raised")
                raise Boom

        inside, never = asyncio.Event(), asyncio.Event()

        async def unit() -> None:
            async with store.batch():
                await store.append_message(ses.id, "user", agent="cancelled")
                inside.set()
                await never.wait()

        task = asyncio.create_task(unit())
        await inside.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await store.append_message(ses.id, "user", agent="kept")
        assert [m.info.agent for m in await store.messages(ses.id)] == ["kept"]
        assert not any(d._conn.in_transaction for d in taken)


async def test_close_waits_for_no_call_and_closes_the_connection_in_use_when_given_back(
    tmp_path, taken: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    entered, release = threading.Event(), threading.Event()
    drive = AsyncSessionStore._drive_sqlite
    store = await AsyncSessionStore.open(f"sqlite:///{tmp_path / 'f.db'}")
    ses = await store.create_session()

    def held(self: AsyncSessionStore, driver: Any, op: Any) -> Any:
        entered.set()
        release.wait(10)
        return drive(self, driver, op)

    monkeypatch.setattr(AsyncSessionStore, "_drive_sqlite", held)
    task = asyncio.create_task(store.append_message(ses.id, "user", agent="in flight"))
    assert await asyncio.to_thread(entered.wait, 10)
    await store.close()
    assert is_open(taken[0])  # still running the call
    release.set()
    assert (await task).agent == "in flight"
    assert not is_open(taken[0])  # closed when given back, not kept
    monkeypatch.setattr(AsyncSessionStore, "_drive_sqlite", drive)
    assert [m.info.agent for m in await store.messages(ses.id)] == ["in flight"]  # used again: a new connection
    await store.close()
    assert len(taken) == 2 and not any(map(is_open, taken))


class FailingCommit:
    """A sqlite3 connection stand-in whose COMMIT fails and leaves the transaction open."""

    def __init__(self) -> None:
        self.in_transaction = True
        self.sent: list[str] = []

    def execute(self, sql: str) -> None:
        self.sent.append(sql)
        if sql == "COMMIT":
            raise sqlite3.OperationalError("disk I/O error")
        self.in_transaction = False


def test_a_failed_commit_is_rolled_back() -> None:
    conn = FailingCommit()
    with pytest.raises(sqlite3.OperationalError):
        _end_sqlite(conn, True)
    assert conn.sent == ["COMMIT", "ROLLBACK"] and not conn.in_transaction
    _end_sqlite(conn, False)  # nothing open: nothing sent
    assert conn.sent == ["COMMIT", "ROLLBACK"]


async def test_a_failed_batch_commit_is_a_brutus_error_and_writes_nothing(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import brutus.async_store as async_store

    def failing(conn: Any, commit: bool) -> None:
        if commit:
            raise sqlite3.OperationalError("disk I/O error")
        _end_sqlite(conn, commit)

    async with await AsyncSessionStore.open(f"sqlite:///{tmp_path / 'g.db'}") as store:
        ses = await store.create_session()
        monkeypatch.setattr(async_store, "_end_sqlite", failing)
        with pytest.raises(DatabaseError, match="disk I/O error"):
            async with store.batch():
                await store.append_message(ses.id, "user")
        monkeypatch.setattr(async_store, "_end_sqlite", _end_sqlite)
        assert await store.messages(ses.id) == []
        await store.append_message(ses.id, "user")
        assert len(await store.messages(ses.id)) == 1
