"""The primary restarted under load (``pg_ctl restart -m fast`` of a throw-away cluster, ``tests/pgcluster.py``).

Writers append to sessions of their own (threads on ``SessionStore``, tasks on ``AsyncSessionStore``) while the
server restarts, and one call is held in flight on a row lock so the restart surely cuts it. What must hold:
a call the restart cuts raises ``Unavailable`` (a ``DatabaseError`` saying it is retryable), never a driver
exception; every call that returned is in the database afterwards and each session's seqs have no gap; every
call started after the server is back succeeds, with nothing done by the caller (a pooled connection the
server closed is replaced at checkout: ``brutus.db.engine.pg_events``).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator

import psycopg
import pytest
from pgcluster import Clusters, wait_for

from brutus import AsyncSessionStore, DatabaseError, SessionStore, Unavailable

WRITERS = 4
AFTER = 3  # calls each writer makes after the restart, all of which must succeed


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def clusters(pg_clusters: Clusters) -> Clusters:
    return pg_clusters


class Ledger:
    """What the writers saw: the acknowledged messages per session, the errors, the calls after the restart."""

    def __init__(self) -> None:
        self.acked: dict[str, list[str]] = {}
        self.errors: list[BaseException] = []
        self.after: dict[str, int] = {}
        self.failed_after: list[BaseException] = []
        self.lock = threading.Lock()

    def all_wrote(self) -> bool:
        return len(self.acked) == WRITERS

    def done_after(self) -> bool:
        """Every writer made its ``AFTER`` calls after the restart, or one of them failed."""
        return bool(self.failed_after) or (len(self.after) == WRITERS and min(self.after.values()) >= AFTER)


@pytest.fixture
def row_lock(clusters: Clusters) -> Iterator[Callable[[str], None]]:
    """``hold(session_id)``: lock the session's row from a connection of the test, so an append to it waits in
    the server (in flight) until the restart cuts both."""
    conns: list[psycopg.Connection] = []

    def hold(session_id: str) -> None:
        conn = clusters.connect(clusters.primary_port)
        conn.autocommit = False
        conn.execute("SELECT 1 FROM sessions WHERE id = %s FOR UPDATE", (session_id,))
        conns.append(conn)

    yield hold
    for conn in conns:
        try:
            conn.close()
        except psycopg.Error:
            pass


def waiting_on_a_lock(clusters: Clusters) -> bool:
    """Whether an append (its ``last_seq`` update) waits on a row lock in the primary."""
    sql = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%last_seq%'"
    return bool(clusters.query(clusters.primary_port, sql))


def check_nothing_lost(clusters: Clusters, acked: dict[str, list[str]]) -> None:
    """Every acknowledged message is stored, and each session's seqs run 1..n without a gap."""
    with clusters.connect(clusters.primary_port) as conn:
        for session_id, message_ids in acked.items():
            sql = "SELECT id, seq FROM messages WHERE session_id = %s ORDER BY seq"
            rows = conn.execute(sql, (session_id,)).fetchall()
            stored = {row[0] for row in rows}
            assert set(message_ids) <= stored, f"acknowledged messages lost in {session_id}"
            assert [row[1] for row in rows] == list(range(1, len(rows) + 1)), f"a gap in the seqs of {session_id}"


def check_errors(errors: list[BaseException]) -> None:
    for error in errors:
        assert isinstance(error, Unavailable), f"not an Unavailable: {error!r}"
        assert isinstance(error, DatabaseError) and error.retryable
        assert "retryable" in str(error)


def test_sync_calls_cut_by_a_restart_fail_retryable_and_nothing_acknowledged_is_lost(
    clusters: Clusters, row_lock: Callable[[str], None]
) -> None:
    store = SessionStore.open(clusters.primary_url)
    ledger, restarted, stop = Ledger(), threading.Event(), threading.Event()
    sessions = [store.create_session(title=f"writer {n}").id for n in range(WRITERS)]
    held = store.create_session(title="held").id

    def writer(session_id: str) -> None:
        while not stop.is_set():
            after = restarted.is_set()
            try:
                message = store.append_message(session_id, "user")
            except Exception as exc:  # noqa: BLE001  every error is checked below
                with ledger.lock:
                    (ledger.failed_after if after else ledger.errors).append(exc)
                continue
            with ledger.lock:
                ledger.acked.setdefault(session_id, []).append(message.id)
                if after:
                    ledger.after[session_id] = ledger.after.get(session_id, 0) + 1
                    if ledger.after[session_id] >= AFTER:
                        return

    in_flight: list[BaseException] = []
    threads: list[threading.Thread] = []

    def held_call() -> None:
        try:
            store.append_message(held, "user")
        except Exception as exc:  # noqa: BLE001
            in_flight.append(exc)

    try:
        row_lock(held)
        blocked = threading.Thread(target=held_call)
        blocked.start()
        wait_for(lambda: waiting_on_a_lock(clusters), "the held call to wait on the row lock")
        threads += [threading.Thread(target=writer, args=(sid,)) for sid in sessions]
        for thread in threads:
            thread.start()
        wait_for(ledger.all_wrote, "every writer to have written")
        clusters.restart_primary()
        restarted.set()
        blocked.join(30)
        wait_for(ledger.done_after, "the writers' calls after the restart")
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    assert not ledger.failed_after, f"a call after the restart failed: {ledger.failed_after[0]!r}"
    assert len(in_flight) == 1, "the call held in flight was not cut"
    assert "terminating connection" in str(in_flight[0])
    check_errors(in_flight + ledger.errors)
    check_nothing_lost(clusters, ledger.acked)
    assert store.append_message(held, "user").seq == 1  # the held call wrote nothing
    store.close()


@pytest.mark.anyio
async def test_async_calls_cut_by_a_restart_fail_retryable_and_nothing_acknowledged_is_lost(
    clusters: Clusters, row_lock: Callable[[str], None]
) -> None:
    store = await AsyncSessionStore.open(clusters.primary_url)
    ledger, restarted, stop = Ledger(), asyncio.Event(), asyncio.Event()
    sessions = [(await store.create_session(title=f"async writer {n}")).id for n in range(WRITERS)]
    held = (await store.create_session(title="async held")).id

    async def writer(session_id: str) -> None:
        while not stop.is_set():
            after = restarted.is_set()
            try:
                message = await store.append_message(session_id, "user")
            except Exception as exc:  # noqa: BLE001  every error is checked below
                (ledger.failed_after if after else ledger.errors).append(exc)
                continue
            ledger.acked.setdefault(session_id, []).append(message.id)
            if after:
                ledger.after[session_id] = ledger.after.get(session_id, 0) + 1
                if ledger.after[session_id] >= AFTER:
                    return

    tasks: list[asyncio.Task[None]] = []

    async def until(condition, what: str) -> None:  # noqa: ANN001
        await asyncio.to_thread(wait_for, condition, what)

    try:
        row_lock(held)
        blocked = asyncio.create_task(store.append_message(held, "user"))
        await until(lambda: waiting_on_a_lock(clusters), "the held call to wait on the row lock")
        tasks += [asyncio.create_task(writer(sid)) for sid in sessions]
        await until(ledger.all_wrote, "every writer to have written")
        await asyncio.to_thread(clusters.restart_primary)
        restarted.set()
        await until(ledger.done_after, "the writers' calls after the restart")
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
    in_flight = await asyncio.gather(blocked, return_exceptions=True)
    assert not ledger.failed_after, f"a call after the restart failed: {ledger.failed_after[0]!r}"
    assert isinstance(in_flight[0], BaseException), "the call held in flight was not cut"
    assert "terminating connection" in str(in_flight[0])
    check_errors(in_flight + ledger.errors)
    check_nothing_lost(clusters, ledger.acked)
    assert (await store.append_message(held, "user")).seq == 1
    await store.close()
