"""PostgreSQL connections: a pooled connection the server closed is replaced as it is checked out (no pre-ping
round trip: ``brutus.db.engine.pg_events``), and the async store's calls run on threads with psycopg's sync
connection (``brutus.db.async_pg``)."""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest
from pgcluster import wait_for
from sqlalchemy.engine import make_url

from brutus import AsyncSessionStore, SessionStore
from brutus.db.async_pg import PGThreads
from conftest import plain_url

pytestmark = [pytest.mark.parametrize("backend", ["postgresql"], indirect=True)]
NAME = "brutus_test_hung_up"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _named(url: str) -> str:
    """``url`` whose connections say who they are (``application_name``), so the test can find and end them."""
    return make_url(url).update_query_dict({"application_name": NAME}).render_as_string(hide_password=False)


class Backends:
    """The server's side of the store's connections, seen and terminated from a connection of the test's."""

    def __init__(self, url: str) -> None:
        libpq = make_url(plain_url(url)).set(drivername="postgresql").render_as_string(hide_password=False)
        self.conn = psycopg.connect(libpq, autocommit=True)

    def pids(self) -> set[int]:
        rows = self.conn.execute("SELECT pid FROM pg_stat_activity WHERE application_name = %s", (NAME,)).fetchall()
        return {pid for (pid,) in rows}

    def terminate(self) -> set[int]:
        """End every backend of the store; once they are gone, their pids."""
        pids = self.pids()
        assert pids, "the store keeps no connection in its pool"
        for pid in pids:
            self.conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        wait_for(lambda: not (self.pids() & pids), "the terminated backends to end")
        return pids

    def close(self) -> None:
        self.conn.close()


@pytest.mark.direct  # through a pooler the client's connection is the pooler's, which outlives a backend
def test_a_pooled_connection_the_server_closed_is_replaced_without_an_error(store_url: str) -> None:
    backends = Backends(store_url)
    try:
        with SessionStore.open(_named(store_url), index_in_background=False) as store:
            session = store.create_session()
            ended = backends.terminate()
            message = store.append_message(session.id, "user")  # no error: the dead connection is not used
            assert message.seq == 1 and [m.info.id for m in store.messages(session.id)] == [message.id]
            assert backends.pids() and not (backends.pids() & ended)
    finally:
        backends.close()


@pytest.mark.direct
@pytest.mark.anyio
async def test_the_async_stores_dead_connections_are_replaced_too(store_url: str) -> None:
    backends = Backends(store_url)
    try:
        async with await AsyncSessionStore.open(_named(store_url), index_in_background=False) as store:
            session = await store.create_session()
            async with store.batch():  # a connection of the async engine (a batch), and of the twin (the calls)
                await store.append_message(session.id, "user")
            await store.append_message(session.id, "user")
            ended = backends.terminate()
            async with store.batch():
                await store.append_message(session.id, "user")
            message = await store.append_message(session.id, "user")
            assert message.seq == 4 and len(await store.messages(session.id)) == 4
            assert not (backends.pids() & ended)
    finally:
        backends.close()


@pytest.mark.anyio
async def test_async_calls_run_whole_on_threads_of_the_store(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    trips: list[str] = []
    original = PGThreads.transaction

    def counted(self: PGThreads, *args: Any) -> Any:
        trips.append(threading.current_thread().name)
        return original(self, *args)

    monkeypatch.setattr(PGThreads, "transaction", counted)
    async with await AsyncSessionStore.open(store_url, index_in_background=False) as store:
        session = await store.create_session()
        message = await store.append_message(session.id, "user")
        await store.append_part(message.id, {"type": "text", "text": "one"})
        async with store.batch():  # a batch's calls share its connection on the event loop's side
            await store.append_part(message.id, {"type": "text", "text": "two"})
        history = await store.messages(session.id)
    assert [p.text for p in history[0].parts] == ["one", "two"]
    assert len(trips) == 4 and all(name.startswith("brutus-pg") for name in trips)
