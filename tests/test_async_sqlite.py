"""The async store's SQLite connections (``brutus.db.async_sqlite``: sqlite3 connections on threads of their
own) and its SQLite batches.

Each call takes a kept connection and gives it back; concurrent calls each have their own; at most five
idle ones are kept; a batch is a trip per call (the first begins the transaction) and one for its COMMIT.
Whatever is cancelled or fails, nothing half-done is committed, no connection goes back inside a
transaction, ``close`` leaves no connection open, and a store dropped without ``close`` leaves no thread.
"""

from __future__ import annotations

import asyncio
import gc
import sqlite3
import subprocess
import sys
import threading
from typing import Any

import pytest

from brutus import AsyncSessionStore, DatabaseError, InvalidInput
from brutus.db.async_sqlite import SQLiteThread
from brutus.db.sqlite_driver import sqlite_end

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Boom(Exception):
    pass


@pytest.fixture
def taken(monkeypatch: pytest.MonkeyPatch) -> list[sqlite3.Connection]:
    """Every sqlite3 connection the stores of the test run an operation on, in the order first used."""
    seen: list[sqlite3.Connection] = []
    drive = AsyncSessionStore._drive_sqlite

    def recording(self: AsyncSessionStore, conn: sqlite3.Connection, op: Any) -> Any:
        if all(conn is not c for c in seen):
            seen.append(conn)
        return drive(self, conn, op)

    monkeypatch.setattr(AsyncSessionStore, "_drive_sqlite", recording)
    return seen


def trips(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the functions sent to the connections' threads from now on."""
    names: list[str] = []
    call = SQLiteThread.call

    async def counted(self: SQLiteThread, fn: Any, *args: Any) -> Any:
        names.append(fn.__name__)
        return await call(self, fn, *args)

    monkeypatch.setattr(SQLiteThread, "call", counted)
    return names


def is_open(conn: sqlite3.Connection) -> bool:
    try:
        conn.total_changes  # noqa: B018  raises on a closed connection, and runs nothing
    except sqlite3.ProgrammingError:
        return False
    return True


def sqlite_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("brutus-sqlite ")]


async def test_calls_reuse_one_kept_connection(tmp_path, taken: list[sqlite3.Connection], monkeypatch: pytest.MonkeyPatch) -> None:
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
    tmp_path, taken: list[sqlite3.Connection], monkeypatch: pytest.MonkeyPatch
) -> None:
    async with await AsyncSessionStore.open(f"sqlite:///{tmp_path / 'b.db'}") as store:
        ses = await store.create_session()
        sent = trips(monkeypatch)
        async with store.batch():
            msg = await store.append_message(ses.id, "user")
            await store.append_part(msg.id, {"type": "text", "text": "x"})
            await store.append_part(msg.id, {"type": "text", "text": "y"})
        assert sent == ["_drive_in_batch"] * 3 + ["sqlite_end"]  # the first call's trip began the transaction
        assert [p.text for p in (await store.messages(ses.id))[0].parts] == ["x", "y"]
        assert len(taken) == 1 and not taken[0].in_transaction
        sent.clear()
        async with store.batch():
            pass
        assert sent == []  # a batch without calls: no transaction, no trip


async def test_concurrent_calls_each_have_a_connection_and_five_are_kept(tmp_path, taken: list[sqlite3.Connection]) -> None:
    path = tmp_path / "c.db"
    # the calls' connections only: no background indexer taking one of its own
    async with await AsyncSessionStore.open(f"sqlite:///{path}", index_in_background=False) as store:
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
    tmp_path, taken: list[sqlite3.Connection], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "d.db"
    beginning = threading.Event()
    in_batch = AsyncSessionStore._drive_in_batch

    def begins(self: AsyncSessionStore, conn: Any, op: Any) -> Any:
        beginning.set()
        return in_batch(self, conn, op)

    monkeypatch.setattr(AsyncSessionStore, "_drive_in_batch", begins)
    async with await AsyncSessionStore.open(f"sqlite:///{path}") as store:
        ses = await store.create_session()
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")

        async def unit() -> None:
            async with store.batch():
                await store.append_message(ses.id, "user", agent="cancelled")

        task = asyncio.create_task(unit())
        assert await asyncio.to_thread(beginning.wait, 10)  # its BEGIN IMMEDIATE goes to the connection's thread
        task.cancel()
        holder.execute("ROLLBACK")  # the BEGIN gets the lock only now, after the cancel
        with pytest.raises(asyncio.CancelledError):
            await task
        # the connection went back after its ROLLBACK was queued behind the BEGIN: the next call uses it
        msg = await store.append_message(ses.id, "user", agent="after")
        holder.close()
        history = await store.messages(ses.id)
        assert [(m.info.seq, m.info.agent) for m in history] == [(1, "after")] and msg.seq == 1
        assert len(taken) == 1 and not taken[0].in_transaction


async def test_a_batch_that_raises_or_is_cancelled_inside_writes_nothing(tmp_path, taken: list[sqlite3.Connection]) -> None:
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
        assert not any(c.in_transaction for c in taken)


async def test_close_waits_for_no_call_and_closes_the_connection_in_use_when_given_back(
    tmp_path, taken: list[sqlite3.Connection], monkeypatch: pytest.MonkeyPatch
) -> None:
    entered, release = threading.Event(), threading.Event()
    drive = AsyncSessionStore._drive_sqlite
    before = sqlite_threads()
    store = await AsyncSessionStore.open(f"sqlite:///{tmp_path / 'f.db'}")
    ses = await store.create_session()

    def held(self: AsyncSessionStore, conn: Any, op: Any) -> Any:
        entered.set()
        release.wait(10)
        return drive(self, conn, op)

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
    threads = [t for t in sqlite_threads() if t not in before]
    for thread in threads:
        thread.join(10)  # each ends right after closing its connection
    assert len(threads) <= 2 and not any(t.is_alive() for t in threads)


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
        sqlite_end(conn, True)
    assert conn.sent == ["COMMIT", "ROLLBACK"] and not conn.in_transaction
    sqlite_end(conn, False)  # nothing open: nothing sent
    assert conn.sent == ["COMMIT", "ROLLBACK"]


async def test_a_failed_batch_commit_is_a_brutus_error_and_writes_nothing(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import brutus.async_store as async_store

    def failing(conn: Any, commit: bool) -> None:
        if commit:
            raise sqlite3.OperationalError("disk I/O error")
        sqlite_end(conn, commit)

    async with await AsyncSessionStore.open(f"sqlite:///{tmp_path / 'g.db'}") as store:
        ses = await store.create_session()
        monkeypatch.setattr(async_store, "sqlite_end", failing)
        with pytest.raises(DatabaseError, match="disk I/O error"):
            async with store.batch():
                await store.append_message(ses.id, "user")
        monkeypatch.setattr(async_store, "sqlite_end", sqlite_end)
        assert await store.messages(ses.id) == []
        await store.append_message(ses.id, "user")
        assert len(await store.messages(ses.id)) == 1


async def test_a_call_cancelled_in_the_thread_is_rolled_back_and_its_connection_is_used_again(
    tmp_path, taken: list[sqlite3.Connection], monkeypatch: pytest.MonkeyPatch
) -> None:
    entered = threading.Event()
    transaction = AsyncSessionStore._transaction_sqlite

    def held(self: AsyncSessionStore, conn: Any, op: Any, write: bool, cancelled: threading.Event) -> Any:
        if not entered.is_set():  # the first call goes on only once its caller is cancelled: no race to time
            entered.set()
            assert cancelled.wait(10)
        return transaction(self, conn, op, write, cancelled)

    async with await AsyncSessionStore.open(f"sqlite:///{tmp_path / 'h.db'}") as store:
        ses = await store.create_session()
        monkeypatch.setattr(AsyncSessionStore, "_transaction_sqlite", held)
        task = asyncio.create_task(store.append_message(ses.id, "user", agent="cancelled"))
        assert await asyncio.to_thread(entered.wait, 10)
        task.cancel()  # the operation goes on in the thread; its transaction is rolled back, not committed
        with pytest.raises(asyncio.CancelledError):
            await task
        # given back at once: the next call is sent to the same thread, after the cancelled call's ROLLBACK
        msg = await store.append_message(ses.id, "user", agent="after")
        assert [(m.info.seq, m.info.agent) for m in await store.messages(ses.id)] == [(1, "after")] and msg.seq == 1
        assert len(taken) == 1 and not taken[0].in_transaction


async def test_many_calls_use_one_thread(tmp_path) -> None:
    before = sqlite_threads()
    async with await AsyncSessionStore.open(f"sqlite:///{tmp_path / 'i.db'}") as store:
        ses = await store.create_session()
        for _ in range(20):
            await store.append_message(ses.id, "user")
        async with store.batch():
            await store.append_message(ses.id, "user")
        assert len([t for t in sqlite_threads() if t not in before]) == 1


def test_a_store_dropped_without_close_leaves_no_thread(tmp_path) -> None:
    before = sqlite_threads()

    async def use_and_drop() -> list[threading.Thread]:
        store = await AsyncSessionStore.open(f"sqlite:///{tmp_path / 'j.db'}")
        ses = await store.create_session()
        # each append takes its connection before its first await: three at once, three connections
        await asyncio.gather(*(store.append_message(ses.id, "user") for _ in range(3)))
        return [t for t in sqlite_threads() if t not in before]

    threads = asyncio.run(use_and_drop())  # the store is not closed; its loop is gone
    assert len(threads) == 3
    gc.collect()
    for thread in threads:
        thread.join(10)
    assert not any(t.is_alive() for t in threads)


def test_an_unclosed_store_does_not_hold_up_the_interpreter_exit(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'k.db'}"
    script = (
        "import asyncio\n"
        "from brutus import AsyncSessionStore\n"
        "async def main():\n"
        f"    store = await AsyncSessionStore.open({url!r})\n"
        "    await store.create_session()\n"
        "    return store\n"
        "kept = asyncio.run(main())\n"
        "print('done')\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert (out.returncode, out.stdout) == (0, "done\n"), out.stderr


async def test_driver_errors_in_the_thread_are_brutus_errors_and_write_nothing(tmp_path) -> None:
    path = tmp_path / "l.db"
    async with await AsyncSessionStore.open(f"sqlite:///{path}") as store:
        ses = await store.create_session(title="kept")
        trigger = sqlite3.connect(path)
        trigger.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON sessions WHEN NEW.title = 'refused' "
            "BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END"
        )
        trigger.close()
        with pytest.raises(InvalidInput, match="refused by a trigger") as raised:
            await store.create_session(title="refused")
        assert isinstance(raised.value.__cause__, sqlite3.IntegrityError)
        with pytest.raises(InvalidInput, match="refused by a trigger"):
            async with store.batch():
                await store.update_session(ses.id, title="changed in the batch")
                await store.create_session(title="refused")
        assert [s.title for s in await store.list_sessions()] == ["kept"]
    async with await AsyncSessionStore.open(f"sqlite:///{path}", read_only=True) as reader:
        with pytest.raises(DatabaseError, match="readonly") as raised:
            await reader.create_session(title="refused too")
        assert isinstance(raised.value.__cause__, sqlite3.OperationalError)
        assert [s.title for s in await reader.list_sessions()] == ["kept"]


async def test_a_connection_that_cannot_open_is_a_brutus_error_and_the_next_call_tries_again(tmp_path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    url = f"sqlite:///{home / 'm.db'}"
    store = await AsyncSessionStore.open(url)
    ses = await store.create_session()
    await store.close()  # the next call opens a new connection
    home.rename(tmp_path / "away")
    with pytest.raises(DatabaseError, match="unable to open database file"):
        await store.get_session(ses.id)
    (tmp_path / "away").rename(home)
    assert (await store.get_session(ses.id)).id == ses.id
    await store.close()


async def test_a_call_on_a_closed_connection_is_an_error_not_a_hang(tmp_path) -> None:
    store = await AsyncSessionStore.open(f"sqlite:///{tmp_path / 'c.db'}")
    worker = store._workers.take()  # type: ignore[union-attr]
    assert await worker.call(lambda conn: conn.execute("SELECT 41 + 1").fetchone()[0]) == 42
    await worker.close()
    with pytest.raises(DatabaseError, match="closed"):
        await worker.call(lambda conn: None)
    await store.close()
