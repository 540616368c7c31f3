"""brutus behind pgbouncer in ``pool_mode = transaction``, the way managed PostgreSQL services front their servers:
many calls of every kind from several stores over two server connections (no server-side prepared statement
outlives its transaction; without ``?pooler=transaction`` the error says to add it), the compaction race (one
winner a round, ``brutus check`` sees its lock held, the lock free afterwards; both stores), and the pooler
restarted under load on both stores (calls in flight fail with a retryable ``Unavailable``, nothing
acknowledged is lost, the store works again by itself).

They run when ``BRUTUS_TEST_PGBOUNCER_URL`` names a pgbouncer (``.ci/run`` starts one; conftest deselects them
otherwise, and under CI its absence is an error). The race goes through that pooler; the other tests start a
pgbouncer of their own (``pgpooler.Pooler``), one they may restart, with the same settings as ``.ci/pgbouncer.ini``.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from sqlalchemy.engine import make_url

from builders import Msg, Tool, write_history
from pgcluster import wait_for
from pgpooler import Pooler
from brutus import AsyncSessionStore, CompactionInProgress, DatabaseError, InvalidInput, SessionStore, Unavailable
from brutus.models import TokenCounts
from brutus.summarizers import Summary, SummaryRequest
from conftest import POOLER_ENV

pytestmark = pytest.mark.pooler


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"

WAIT_S = 60.0  # the most any condition below may take to come true (await_for; wait_for is pgcluster's)


async def await_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


@pytest.fixture
def database(pg_server: Any) -> str:
    """A new migrated database, its URL on the server itself."""
    url = pg_server.new_database()
    SessionStore.open(url).close()
    return url


def _started(pool_size: int) -> Iterator[Pooler]:
    started = Pooler(pool_size=pool_size)
    started.start()
    yield started
    started.close()


@pytest.fixture
def pooler() -> Iterator[Pooler]:
    """A pgbouncer of this test's own with two server connections per database."""
    yield from _started(2)


WORDS = [(f"store {n}", f"needle{n}x") for n in range(4)]  # each store's (session title, word to search)

STEPS = 8  # each kind of call below runs STEPS times per store: more than psycopg's prepare threshold of 5


def _agent_steps(store: SessionStore, title: str, word: str) -> str:
    """A live agent's calls, STEPS times each, with a read of every kind after each step."""
    session = store.create_session(title=title).id
    for i in range(STEPS):
        user = store.append_message(session, "user")
        store.append_part(user.id, {"type": "text", "text": f"please look at {word} number {i}"})
        reply = store.append_message(session, "assistant", parent_id=user.id)
        tool = store.append_part(reply.id, {"type": "tool", "call_id": f"c{i}", "tool": "bash", "state": {"status": "pending", "input": {"n": i}}})
        store.update_tool(tool.id, status="running")
        store.update_tool(tool.id, status="completed", output=f"output {i}", title="ls")
        assert store.get_session(session).title == title
        assert len(store.messages(session)) == 2 * (i + 1)
        assert len(store.search(word)) == i + 1
        assert session in {s.id for s in store.list_sessions()}
    return session


def test_every_kind_of_call_many_times_from_several_stores_over_two_server_connections(database: str, pooler: Pooler) -> None:
    stores = [SessionStore.open(pooler.url(database)) for _ in range(4)]
    failures: list[BaseException] = []
    sessions: dict[str, str] = {}

    def agent(store: SessionStore, title: str, word: str) -> None:
        try:
            sessions[word] = _agent_steps(store, title, word)
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    threads = [threading.Thread(target=agent, args=(s, *w)) for s, w in zip(stores, WORDS, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    with SessionStore.open(database) as direct:
        for word, session in sessions.items():
            history = direct.messages(session)
            assert [m.info.seq for m in history] == list(range(1, 2 * STEPS + 1))
            assert [p.state.status for m in history for p in m.parts if p.type == "tool"] == ["completed"] * STEPS
            assert {h.session_id for h in direct.search(word)} == {session}
    for store in stores:
        store.close()


def test_without_the_urls_pooler_the_error_says_to_add_it(database: str, pooler: Pooler) -> None:
    bare = make_url(pooler.url(database)).difference_update_query(["pooler"]).render_as_string(hide_password=False)
    first, second = SessionStore.open(bare), SessionStore.open(bare)
    session = first.create_session().id
    with pytest.raises(DatabaseError, match=r"prepared statement .* \(behind a transaction-pooling pooler .* add \?pooler=transaction"):
        for _ in range(10):  # both prepare the same statement under the same name, on the one server connection
            first.get_session(session)
            second.get_session(session)
    first.close()
    second.close()
    for mode in ("statement", "yes"):
        with pytest.raises(InvalidInput, match=f"takes session or transaction .* got '{mode}'"):
            SessionStore.open(f"{bare}?pooler={mode}")


async def _async_agent_steps(store: AsyncSessionStore, title: str, word: str) -> str:
    session = (await store.create_session(title=title)).id
    for i in range(STEPS):
        user = await store.append_message(session, "user")
        await store.append_part(user.id, {"type": "text", "text": f"please look at {word} number {i}"})
        reply = await store.append_message(session, "assistant", parent_id=user.id)
        tool = await store.append_part(reply.id, {"type": "tool", "call_id": f"c{i}", "tool": "bash", "state": {"status": "pending", "input": {"n": i}}})
        await store.update_tool(tool.id, status="running")
        await store.update_tool(tool.id, status="completed", output=f"output {i}", title="ls")
        assert (await store.get_session(session)).title == title
        assert len(await store.messages(session)) == 2 * (i + 1)
        assert len(await store.search(word)) == i + 1
        assert session in {s.id for s in await store.list_sessions()}
    return session


@pytest.mark.anyio
async def test_the_async_store_the_same_over_two_server_connections(database: str, pooler: Pooler) -> None:
    stores = [await AsyncSessionStore.open(pooler.url(database)) for _ in range(4)]
    sessions = await asyncio.gather(*(_async_agent_steps(s, *w) for s, w in zip(stores, WORDS, strict=True)))
    for store in stores:
        await store.close()
    with SessionStore.open(database) as direct:
        for session, (_, word) in zip(sessions, WORDS, strict=True):
            assert [m.info.seq for m in direct.messages(session)] == list(range(1, 2 * STEPS + 1))
            assert {h.session_id for h in direct.search(word)} == {session}


class Held:
    """A summarizer that, once it runs (its caller holds the lock), waits until the round's other racers have
    all returned, then lets ``during`` look (``brutus check`` through the pooler), and answers; ``runs``
    counts the racers that got that far."""

    def __init__(self, others_returned: Callable[[], bool], during: Callable[[], None]) -> None:
        self.others_returned = others_returned
        self.during = during
        self.runs = 0

    def summarize(self, request: SummaryRequest) -> Summary:
        self.runs += 1
        wait_for(self.others_returned, "the other racers to return")
        self.during()
        return Summary(text="fixed it; next: the tests", model="fake", tokens=TokenCounts(input=500, output=20))


def _turns(round: int) -> list[Msg]:
    return [
        m
        for i in range(3)
        for m in (Msg("user", text=f"round {round}: fix bug {i}"), Msg("assistant", text="looking", tools=[Tool("read", output_bytes=8_000)]))
    ]


def _append_turns(store: SessionStore, session: str, round: int) -> None:
    """Three more turns, so the session has something new to compact."""
    for i in range(3):
        user = store.append_message(session, "user")
        store.append_part(user.id, {"type": "text", "text": f"round {round}: fix bug {i}"})
        reply = store.append_message(session, "assistant", parent_id=user.id)
        state = {"status": "completed", "input": {"path": f"r{round}_{i}.py"}, "output": "x" * 8_000, "time": {"start": 1, "end": 2}}
        store.append_part(reply.id, {"type": "tool", "call_id": f"r{round}c{i}", "tool": "read", "state": state})


def _advisory_locks(database_url: str) -> int:
    """Advisory locks granted in the database now, asked on the server itself."""
    url = make_url(database_url)
    with psycopg.connect(host=url.host, port=url.port, user=url.username, dbname=url.database) as conn:
        query = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = %s)"
        return conn.execute(query, (url.database,)).fetchone()[0]


def _pending(report: Any) -> list[str]:
    return sorted(n.kind for n in report.notices if n.kind.endswith("-compaction"))


def test_the_compaction_race_through_the_pooler_has_one_winner_each_round(database: str) -> None:
    through = make_url(os.environ[POOLER_ENV]).set(database=make_url(database).database).render_as_string(hide_password=False)
    racers = [SessionStore.open(through) for _ in range(4)]
    observer = SessionStore.open(through)
    session = write_history(observer, _turns(0))
    for round in range(1, 6):
        outcomes: list[Any] = []
        seen_running: list[list[str]] = []
        summarizer = Held(
            lambda: sum(1 for o in outcomes if o != "completed") >= len(racers) - 1,
            lambda: seen_running.append(_pending(observer.check())),
        )
        start = threading.Barrier(len(racers))

        def race(store: SessionStore) -> None:
            start.wait()
            try:
                store.compact(session, summarizer)
                outcomes.append("completed")
            except BaseException as exc:  # noqa: BLE001 - checked below
                outcomes.append(exc)

        threads = [threading.Thread(target=race, args=(store,)) for store in racers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert outcomes.count("completed") == 1 and summarizer.runs == 1, outcomes
        assert all(isinstance(o, CompactionInProgress) for o in outcomes if o != "completed"), outcomes
        assert seen_running == [["running-compaction"]]  # check saw the lock held, through the pooler
        assert _advisory_locks(database) == 0  # the winner's lock went with its transaction
        assert _pending(observer.check()) == []
        assert [c.status for c in observer.compactions(session)] == ["completed"] * round
        _append_turns(observer, session, round)
    for store in (*racers, observer):
        store.close()


class AsyncHeld:
    """An async summarizer that answers once released."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    async def asummarize(self, request: SummaryRequest) -> Summary:
        self.started.set()
        await self.release.wait()
        return Summary(text="fixed it; next: the tests", model="fake", tokens=TokenCounts(input=500, output=20))


@pytest.mark.anyio
async def test_the_async_stores_compaction_lock_through_the_pooler(database: str) -> None:
    through = make_url(os.environ[POOLER_ENV]).set(database=make_url(database).database).render_as_string(hide_password=False)
    first, second = await AsyncSessionStore.open(through), await AsyncSessionStore.open(through)
    writer = SessionStore.open(through)
    session = write_history(writer, _turns(0))
    for round in range(1, 4):
        held = AsyncHeld()
        winner = asyncio.create_task(first.compact(session, held))
        await held.started.wait()
        with pytest.raises(CompactionInProgress):
            await second.compact(session, AsyncHeld())
        assert _pending(await second.check()) == ["running-compaction"]
        held.release.set()
        await winner
        assert _advisory_locks(database) == 0 and _pending(await second.check()) == []
        assert [c.status for c in await second.compactions(session)] == ["completed"] * round
        _append_turns(writer, session, round)
        first, second = second, first
    for store in (first, second):
        await store.close()
    writer.close()


@pytest.fixture
def restartable() -> Iterator[Pooler]:
    """A pgbouncer of this test's own, to restart."""
    yield from _started(4)


class Writer:
    """One agent appending messages to its session as fast as it can, through its own store; what was
    acknowledged, and the errors (a retryable one is counted and the next call made, anything else ends it)."""

    def __init__(self, session: str) -> None:
        self.session = session
        self.acked: list[str] = []
        self.unavailable: list[Unavailable] = []
        self.unexpected: list[BaseException] = []

    def outcome(self, call: Callable[[], Any]) -> bool:
        """Make one call; whether to go on."""
        try:
            self.acked.append(call().id)
        except Unavailable as exc:
            self.unavailable.append(exc)
        except BaseException as exc:  # noqa: BLE001 - the test fails on it
            self.unexpected.append(exc)
            return False
        return True


def _check_nothing_lost(database: str, writers: list[Writer]) -> None:
    """Every acknowledged message is there, each session's seqs are gapless, and a message that is there but
    was not acknowledged can only be one whose call failed (its commit in flight when the pooler went)."""
    assert [w.unexpected for w in writers] == [[]] * len(writers)
    with SessionStore.open(database) as direct:
        for w in writers:
            history = [m.info for m in direct.messages(w.session)]
            assert [m.seq for m in history] == list(range(1, len(history) + 1))
            there = [m.id for m in history]
            assert set(w.acked) <= set(there) and len(there) - len(w.acked) <= len(w.unavailable)
    for w in writers:
        assert all(e.retryable and str(e).startswith("database unavailable: ") for e in w.unavailable)


def test_a_pooler_restart_fails_the_calls_in_flight_retryably_and_loses_nothing(database: str, restartable: Pooler) -> None:
    stores = [SessionStore.open(restartable.url(database)) for _ in range(3)]
    writers = [Writer(store.create_session().id) for store in stores]
    stop = threading.Event()

    def write(store: SessionStore, writer: Writer) -> None:
        while not stop.is_set() and writer.outcome(lambda: store.append_message(writer.session, "user")):
            pass

    threads = [threading.Thread(target=write, args=pair) for pair in zip(stores, writers, strict=True)]
    for thread in threads:
        thread.start()
    try:
        wait_for(lambda: all(len(w.acked) >= 20 for w in writers), "every writer to write")
        restartable.stop()
        wait_for(lambda: all(w.unavailable or w.unexpected for w in writers), "every writer to find the pooler gone")
        before = [len(w.acked) for w in writers]
        restartable.start()
        wait_for(lambda: all(len(w.acked) >= n + 20 or w.unexpected for w, n in zip(writers, before, strict=True)), "every writer to write again")
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    _check_nothing_lost(database, writers)
    for store in stores:
        store.close()


@pytest.mark.anyio
async def test_the_async_store_through_a_pooler_restart_the_same(database: str, restartable: Pooler) -> None:
    stores = [await AsyncSessionStore.open(restartable.url(database)) for _ in range(3)]
    writers = [Writer((await store.create_session()).id) for store in stores]
    stop = asyncio.Event()

    async def write(store: AsyncSessionStore, writer: Writer) -> None:
        while not stop.is_set():
            try:
                writer.acked.append((await store.append_message(writer.session, "user")).id)
            except Unavailable as exc:
                writer.unavailable.append(exc)
                await asyncio.sleep(0)  # let the test's own coroutine run while the pooler is gone
            except BaseException as exc:  # noqa: BLE001 - the test fails on it
                writer.unexpected.append(exc)
                return

    tasks = [asyncio.create_task(write(store, writer)) for store, writer in zip(stores, writers, strict=True)]
    try:
        await await_for(lambda: all(len(w.acked) >= 20 for w in writers), "every writer to write")
        await asyncio.to_thread(restartable.stop)
        await await_for(lambda: all(w.unavailable or w.unexpected for w in writers), "every writer to find the pooler gone")
        before = [len(w.acked) for w in writers]
        await asyncio.to_thread(restartable.start)
        await await_for(lambda: all(len(w.acked) >= n + 20 or w.unexpected for w, n in zip(writers, before, strict=True)), "every writer to write again")
    finally:
        stop.set()
        await asyncio.gather(*tasks)
    _check_nothing_lost(database, writers)
    for store in stores:
        await store.close()
