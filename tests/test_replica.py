"""A read replica (``open(url, read_url=...)``) against a real streaming standby (``tests/pgcluster.py``).

What is shown on the standby itself, with its WAL replay paused so it lags on demand: the lag-tolerant reads
(listing, search, stats, export) really come from it (a row written by another store while replay is paused
is missing from them, and present for a read the primary serves); the store that wrote never reads anything
older than its own acknowledged writes (its reads go to the primary until the standby has replayed them), nor
inside a batch, nor before the standby has the schema its open created; threads and tasks sharing a store
read their own writes through a streaming standby; writes never go to the standby; a standby that is stopped
sends the reads to the primary and is tried again only after a rest; one cut mid-read raises ``Unavailable``.
The CLI's ``--read-url`` / ``$BRUTUS_READ_URL``. Both stores, sync and async.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.engine import make_url
from cli_helpers import run
from pgcluster import Clusters, wait_for
from pgpooler import Pooler

from brutus import AsyncSessionStore, DatabaseError, InvalidInput, NotFound, SessionStore, TextPart, Unavailable
from brutus.db import replica as replica_module
from brutus.db.engine import make_engine
from brutus.db.runner import drive
from brutus.db.statements import step
from brutus.flows import Tx
from brutus.importers.export import write_export


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def clusters(pg_clusters: Clusters) -> Iterator[Clusters]:
    """The clusters, the standby streaming and replaying at the start and at the end of each test."""
    pg_clusters.wait_caught_up()
    yield pg_clusters
    if not pg_clusters.answers(pg_clusters.replica_port):
        pg_clusters.start_replica()
    pg_clusters.resume_replay()


class FakeClock:
    """The replica's monotonic clock, moved by hand: how long a failed replica rests, without sleeping."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def ids(sessions: list) -> set[str]:
    return {session.id for session in sessions}


def replica_store(clusters: Clusters) -> SessionStore:
    """A store reading from the replica (no background indexer: its commits would make this store's reads wait
    for them on the replica at moments a test does not choose)."""
    return SessionStore.open(clusters.primary_url, read_url=clusters.replica_url, index_in_background=False)


def primary_store(clusters: Clusters) -> SessionStore:
    """Another process's store, on the primary only."""
    return SessionStore.open(clusters.primary_url, index_in_background=False)


def word_session(store: SessionStore, word: str) -> str:
    """A session holding one user message with ``word`` in it; its id."""
    session = store.create_session(title=word)
    message = store.append_message(session.id, "user")
    store.append_part(message.id, TextPart(text=f"look for {word} here"))
    return session.id


# -- SQLite and bad URLs ---------------------------------------------------------------------------------------


def test_read_url_needs_postgresql_on_both_sides(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    with pytest.raises(InvalidInput, match="read_url needs PostgreSQL.*url is sqlite"):
        SessionStore.open(str(path), read_url="postgresql://127.0.0.1/x")
    with pytest.raises(InvalidInput, match="read_url is sqlite"):
        SessionStore.open("postgresql://127.0.0.1:1/x", read_url=str(path))
    with pytest.raises(InvalidInput, match="read_url is mysql"):
        SessionStore.open("postgresql://127.0.0.1:1/x", read_url="mysql://127.0.0.1/x")
    assert not path.exists()  # refused before anything was made


@pytest.mark.anyio
async def test_async_read_url_needs_postgresql(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    with pytest.raises(InvalidInput, match="read_url needs PostgreSQL.*url is sqlite"):
        await AsyncSessionStore.open(str(path), read_url="postgresql://127.0.0.1/x")
    assert not path.exists()


# -- the reads that go to the replica ---------------------------------------------------------------------------


def test_lag_tolerant_reads_come_from_the_replica(clusters: Clusters) -> None:
    with replica_store(clusters) as store, primary_store(clusters) as other:
        mine = word_session(store, "heron")
        store.list_sessions(limit=1)  # this store learns where the primary is after its writes
        clusters.wait_caught_up()  # and the replica gets there
        clusters.pause_replay()
        theirs = word_session(other, "heron")  # on the primary only, while the replica lags
        listed = ids(store.list_sessions())
        assert mine in listed and theirs not in listed
        assert [hit.session_id for hit in store.search("heron")] == [mine]
        assert ids(other.list_sessions()) >= {mine, theirs}
        assert store.get_session(theirs).id == theirs  # a read that must be current: the primary
        assert [entry.info.session_id for entry in store.messages(theirs)] == [theirs]
        with pytest.raises(NotFound):
            store.stats(theirs)  # the replica has not seen it yet
        out = io.BytesIO()
        with pytest.raises(NotFound):
            write_export(store, theirs, out)
        clusters.resume_replay()
        assert store.stats(theirs).messages == 1
        write_export(store, theirs, out)
        assert json.loads(out.getvalue())["info"]["id"] == theirs


def test_the_writer_reads_its_own_writes_while_the_replica_lags(clusters: Clusters) -> None:
    with replica_store(clusters) as store, primary_store(clusters) as other:
        clusters.pause_replay()
        mine = word_session(store, "osprey")  # writes never go to the paused, read-only replica
        theirs = word_session(other, "osprey")
        # the replica has not replayed this store's writes: every read that could use it goes to the primary,
        # and so sees the other store's session too
        assert ids(store.list_sessions()) >= {mine, theirs}
        assert {hit.session_id for hit in store.search("osprey")} == {mine, theirs}
        assert store.stats(mine).messages == 1
        # once the replica has replayed them, the reads go back to it
        clusters.resume_replay()
        clusters.pause_replay()
        later = other.create_session(title="later").id
        listed = ids(store.list_sessions())
        assert {mine, theirs} <= listed and later not in listed


def test_the_schema_a_store_migrated_is_waited_for(clusters: Clusters) -> None:
    """A store whose open created the schema reads the primary until the replica has it too."""
    clusters.query(clusters.primary_port, "CREATE DATABASE brutus_replica_fresh")
    clusters.wait_caught_up()
    clusters.pause_replay()
    primary = clusters.url(clusters.primary_port, "brutus_replica_fresh")
    replica = clusters.url(clusters.replica_port, "brutus_replica_fresh")
    try:
        with SessionStore.open(primary, read_url=replica, index_in_background=False) as store:
            assert store.list_sessions() == []  # not "relation sessions does not exist" from the replica
            assert store.search("anything") == []
    finally:
        clusters.resume_replay()
        clusters.query(clusters.primary_port, "DROP DATABASE brutus_replica_fresh WITH (FORCE)")


def test_a_replica_reads_snapshot_is_taken_after_its_check(clusters: Clusters) -> None:
    """The check that the replica has replayed this store's writes runs before the read's snapshot is taken,
    not as its first statement (whose snapshot precedes the function it evaluates: replay passing the position
    in between would let a stale snapshot pass the check). Shown by a write made, and replayed, after the check
    and before the read's first statement: the read, on the replica, sees it. Both stores."""

    def hooked(engine: Any, other: SessionStore, late: list[str]) -> None:
        checked: list[bool] = []

        def listener(_conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
            if "pg_last_wal_replay_lsn" in statement:
                checked.append(True)
            elif checked and not late:  # the read's first statement, on the replica
                late.append(other.create_session(title="written after the check").id)
                clusters.wait_caught_up()

        event.listen(engine, "before_cursor_execute", listener)

    with replica_store(clusters) as store, primary_store(clusters) as other:
        mine = store.create_session(title="mine").id  # a write: the next replica read checks
        late: list[str] = []
        hooked(store._replica.engine, other, late)  # type: ignore[union-attr]  # reaching in: the replica's engine
        listed = ids(store.list_sessions())
        assert late and {mine, late[0]} <= listed

    async def in_async() -> tuple[str, set[str]]:
        store = await AsyncSessionStore.open(clusters.primary_url, read_url=clusters.replica_url, index_in_background=False)
        try:
            with primary_store(clusters) as other:
                mine = (await store.create_session(title="mine")).id
                hooked(store._replica.engine.sync_engine, other, late_async)  # type: ignore[union-attr]
                return mine, ids(await store.list_sessions())
        finally:
            await store.close()

    late_async: list[str] = []
    mine, listed = asyncio.run(in_async())
    assert late_async and {mine, late_async[0]} <= listed


def test_threads_and_tasks_read_their_own_writes_from_a_streaming_replica(clusters: Clusters) -> None:
    """Writers sharing a store each read back what they just wrote through a replica-routed read (``stats``),
    while the replica streams a few milliseconds behind: never a stale answer."""
    rounds, stale = 25, []

    def writer(store: SessionStore) -> None:
        for _ in range(rounds):
            session = store.create_session(title="own write")
            store.append_message(session.id, "user")
            if store.stats(session.id).messages != 1:
                stale.append(session.id)

    with replica_store(clusters) as store:
        threads = [threading.Thread(target=writer, args=(store,)) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert stale == []

    async def tasks() -> None:
        store = await AsyncSessionStore.open(clusters.primary_url, read_url=clusters.replica_url, index_in_background=False)

        async def task() -> None:
            for _ in range(rounds):
                session = await store.create_session(title="own write")
                await store.append_message(session.id, "user")
                if (await store.stats(session.id)).messages != 1:
                    stale.append(session.id)

        try:
            await asyncio.gather(*(task() for _ in range(4)))
        finally:
            await store.close()

    asyncio.run(tasks())
    assert stale == []


def test_a_tenants_replica_reads_are_the_tenants_own(clusters: Clusters) -> None:
    """A tenanted store with a replica: the reads the replica serves pass its row-level security too, in the
    store's tenant (another tenant's session is not listed or found there), while they really come from the
    replica (a session of the same tenant written while replay is paused is not there yet)."""
    role = f"brutus_replica_app_{os.getpid()}"
    SessionStore.open(clusters.primary_url).close()  # at head, migrated by the owner
    with clusters.connect(clusters.primary_port) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN NOSUPERUSER NOBYPASSRLS")
        admin.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}")
    primary, replica = (make_url(url).set(username=role).render_as_string(hide_password=False)
                        for url in (clusters.primary_url, clusters.replica_url))
    opened = dict(auto_migrate=False, index_in_background=False)
    try:
        with (
            SessionStore.open(primary, read_url=replica, tenant="acme", **opened) as acme,
            SessionStore.open(primary, read_url=replica, tenant="globex", **opened) as globex,
            SessionStore.open(primary, tenant="acme", **opened) as acme_elsewhere,
        ):
            mine, theirs = word_session(acme, "otter"), word_session(globex, "otter")
            acme.list_sessions(limit=1)  # the store learns where the primary is after its writes
            clusters.wait_caught_up()
            clusters.pause_replay()
            later = word_session(acme_elsewhere, "otter")  # the tenant's, on the primary only
            assert ids(acme.list_sessions()) == {mine}
            assert [hit.session_id for hit in acme.search("otter")] == [mine]
            with pytest.raises(NotFound):
                acme.stats(theirs)
            assert acme.get_session(later).id == later  # a read that must be current: the primary
            clusters.resume_replay()
            clusters.wait_caught_up()
            assert ids(acme.list_sessions()) == {mine, later}
            for store, session_id in ((acme, mine), (acme, later), (globex, theirs)):
                store.delete_session(session_id)
    finally:
        clusters.resume_replay()
        with clusters.connect(clusters.primary_port) as admin:
            admin.execute(f"DROP OWNED BY {role}")
            admin.execute(f"DROP ROLE {role}")


def test_a_read_waits_while_another_reads_the_primarys_position() -> None:
    """The reader that asks the primary for its position clears ``stale`` as it begins; until it has the answer,
    every other read must wait for it (a write committed just before it began is in that answer, not in the
    position held now). Seen once without: a task's ``stats`` of its own new session, served stale."""
    replica = replica_module.Replica(engine=None, lock=threading.Lock())
    assert not replica.asking()
    replica.wrote()
    assert replica.asking()
    with replica.lock:  # another thread reading the position
        assert replica.take_stale()
        assert replica.asking()
        replica.seen(100)
    assert not replica.asking() and replica.needed == 100


def test_a_batch_reads_the_primary(clusters: Clusters) -> None:
    with replica_store(clusters) as store:
        store.list_sessions(limit=1)  # the replica is caught up with this store: it serves reads
        with store.batch():
            inside = store.create_session(title="in a batch").id
            assert inside in ids(store.list_sessions())  # not committed yet: only the batch's connection has it
        assert inside in ids(store.list_sessions())


def test_a_stopped_replica_sends_reads_to_the_primary_until_its_rest_is_over(clusters: Clusters) -> None:
    with replica_store(clusters) as store, primary_store(clusters) as other:
        clock = FakeClock()
        store._replica.clock = clock  # type: ignore[union-attr]  # reaching in: the rest without sleeping
        store.list_sessions(limit=1)  # a pooled connection to the replica, which the stop kills
        clusters.stop_replica()
        first = other.create_session(title="replica down").id
        assert first in ids(store.list_sessions())  # fell back in the same call
        assert store.stats(first).messages == 0
        mine = store.create_session(title="written with the replica down").id  # writes: the primary only
        assert store.get_session(mine).title == "written with the replica down"
        # the replica is back, but resting: reads stay on the primary (which sees what the replica lacks)
        clusters.start_replica()
        clusters.pause_replay()
        second = other.create_session(title="replica resting").id
        assert second in ids(store.list_sessions())
        clock.now += replica_module.RETRY_S  # the rest is over: the replica is tried again, and serves
        clusters.resume_replay()
        store.list_sessions(limit=1)  # where the primary is after this store's write...
        clusters.wait_caught_up()  # ...the replica has replayed
        clusters.pause_replay()
        third = other.create_session(title="replica lagging").id  # ...and not with this one
        listed = ids(store.list_sessions())
        assert {first, second, mine} <= listed and third not in listed


def cut() -> Any:
    """A read whose replica connection dies under it: the server ends its own backend."""
    yield step(text("SELECT pg_terminate_backend(pg_backend_pid())"), {}, fetch="first")
    yield step(text("SELECT 1"), {}, fetch="first")


def divide_by_zero() -> Any:
    """A read the server refuses: a query error, not a failing replica."""
    yield step(text("SELECT 1 / 0"), {}, fetch="first")


def test_a_replica_cut_during_a_read_raises_unavailable_and_rests(clusters: Clusters) -> None:
    with replica_store(clusters) as store, primary_store(clusters) as other:
        store.list_sessions(limit=1)  # where the primary is when the store opened...
        clusters.wait_caught_up()  # ...the replica has replayed: the next read goes to it
        with pytest.raises(DatabaseError, match="division by zero") as refused:
            store.run(Tx(divide_by_zero(), write=False, replica=True))
        assert not isinstance(refused.value, Unavailable)  # the replica does not rest for it: the cut reaches it
        with pytest.raises(Unavailable, match="read replica failed during the read.*retryable") as raised:
            store.run(Tx(cut(), write=False, replica=True))
        assert raised.value.retryable
        clusters.pause_replay()
        theirs = other.create_session(title="after the cut").id
        assert theirs in ids(store.list_sessions())  # the replica rests: the primary serves


def counted(engine: Any) -> list[str]:
    """The statements ``engine`` runs from now on (a listener: they go through Core)."""
    statements: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda _c, _cur, statement, *_rest: statements.append(statement))
    return statements


def test_a_replica_further_behind_than_read_max_lag_serves_nothing(clusters: Clusters) -> None:
    """``read_max_lag``: once the replica's replay is held up (paused here) with WAL waiting, and the last
    transaction it replayed committed longer ago than the bound, a bounded store's lag-tolerant reads go to the
    primary, while an unbounded one's (and the default's 30 s) still come from the replica. No write of the
    reading stores is involved: the bound covers everyone's writes. Caught up again, the replica serves."""
    bound = 1.0
    replica = clusters.replica_url
    with (
        SessionStore.open(clusters.primary_url, read_url=replica, read_max_lag=bound, index_in_background=False) as bounded,
        SessionStore.open(clusters.primary_url, read_url=replica, read_max_lag=None, index_in_background=False) as unbounded,
        replica_store(clusters) as default,
        primary_store(clusters) as other,
    ):
        clusters.wait_caught_up()
        clusters.pause_replay()
        theirs = word_session(other, "grebe")  # received by the replica, not replayed
        wait_for(lambda: clusters.replay_age() > bound, "the replica to fall a second behind")
        on_replica = counted(bounded._replica.engine)  # type: ignore[union-attr]  # reaching in: where reads run
        assert theirs in ids(bounded.list_sessions())  # the primary's answer
        assert [hit.session_id for hit in bounded.search("grebe")] == [theirs]
        assert bounded.stats(theirs).messages == 1
        assert len(on_replica) == 3  # each read only checked the replica
        for store in (unbounded, default):
            assert theirs not in ids(store.list_sessions())  # the replica's answer
            assert store.search("grebe") == []
        clusters.resume_replay()

        def served_by_replica() -> bool:  # the WAL a quiet primary writes now and then can be pending a moment
            on_replica.clear()
            return theirs in ids(bounded.list_sessions()) and len(on_replica) > 1  # the check and the read
        wait_for(served_by_replica, "the caught-up replica to serve the bounded store")


def test_a_replica_cut_off_from_the_primary_serves_nothing(clusters: Clusters) -> None:
    """A standby whose WAL receiver has no connection to the primary cannot tell how far the primary has moved
    on: with a bound (the default's too) its reads go to the primary; without one it still serves."""
    with (
        replica_store(clusters) as default,
        SessionStore.open(clusters.primary_url, read_url=clusters.replica_url, read_max_lag=None,
                          index_in_background=False) as unbounded,
        primary_store(clusters) as other,
    ):
        clusters.wait_caught_up()
        conninfo = clusters.cut_off_replica()
        try:
            theirs = other.create_session(title="written while the replica is cut off").id
            assert theirs in ids(default.list_sessions())
            assert theirs not in ids(unbounded.list_sessions())
        finally:
            clusters.reconnect_replica(conninfo)
        clusters.wait_caught_up()
        assert theirs in ids(unbounded.list_sessions())


@pytest.fixture
def poolers(clusters: Clusters) -> Iterator[tuple[Pooler, Pooler]]:
    """A pgbouncer in transaction mode in front of each of the primary and the replica."""
    started = [Pooler(pool_size=2, server_port=port) for port in (clusters.primary_port, clusters.replica_port)]
    try:
        for pooler in started:
            pooler.start()
        yield started[0], started[1]
    finally:
        for pooler in started:
            pooler.close()


def test_a_replica_behind_a_pooler(clusters: Clusters, poolers: tuple[Pooler, Pooler]) -> None:
    """Primary and replica each behind a transaction-pooling pgbouncer with two server connections: the
    replica's check and its read are separate transactions, which the pooler may give different server
    connections, of the one replica. Lag-tolerant reads come from the replica, the writer reads its own
    writes, and the lag bound holds, as directly."""
    primary, replica = poolers[0].url(clusters.primary_url), poolers[1].url(clusters.replica_url)
    with (
        SessionStore.open(primary, read_url=replica, index_in_background=False) as store,
        SessionStore.open(primary, read_url=replica, read_max_lag=1.0, index_in_background=False) as bounded,
        primary_store(clusters) as other,
    ):
        mine = word_session(store, "dunlin")
        assert store.stats(mine).messages == 1  # its own write, checked for on the replica through the pooler
        clusters.wait_caught_up()
        clusters.pause_replay()
        theirs = word_session(other, "dunlin")
        for _ in range(6):  # more than psycopg's prepare threshold: nothing prepared outlives a transaction
            listed = ids(store.list_sessions())
            assert mine in listed and theirs not in listed
            assert [hit.session_id for hit in store.search("dunlin")] == [mine]
        wait_for(lambda: clusters.replay_age() > 1.0, "the replica to fall a second behind")
        assert theirs in ids(bounded.list_sessions())  # too far behind for this one: the primary
        later = store.create_session(title="later").id
        assert {mine, theirs, later} <= ids(store.list_sessions())  # its write not replayed: the primary


def test_read_max_lag_must_be_a_positive_number_of_seconds(clusters: Clusters) -> None:
    for bad in (0, -1.0, float("nan"), float("inf"), "10", True):
        with pytest.raises(InvalidInput, match="read_max_lag is a number of seconds above 0, or None"):
            SessionStore.open(clusters.primary_url, read_url=clusters.replica_url, read_max_lag=bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidInput, match="read_max_lag is a number of seconds above 0, or None"):
            asyncio.run(AsyncSessionStore.open(clusters.primary_url, read_url=clusters.replica_url, read_max_lag=bad))  # type: ignore[arg-type]
    engine = make_engine(clusters.primary_url)
    try:
        with pytest.raises(InvalidInput, match="read_max_lag is a number of seconds"):
            SessionStore(engine, read_max_lag=0)  # the constructor too, before its indexer's thread starts
    finally:
        engine.dispose()


# -- the async store ----------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_async_replica_reads_writes_and_fallback(clusters: Clusters) -> None:
    store = await AsyncSessionStore.open(clusters.primary_url, read_url=clusters.replica_url, index_in_background=False)
    other = await AsyncSessionStore.open(clusters.primary_url, index_in_background=False)
    try:
        clusters.pause_replay()
        mine = (await store.create_session(title="async mine")).id
        theirs = (await other.create_session(title="async theirs")).id
        assert {mine, theirs} <= ids(await store.list_sessions())  # its own write not replayed: the primary
        clusters.resume_replay()
        clusters.pause_replay()
        later = (await other.create_session(title="async later")).id
        listed = ids(await store.list_sessions())
        assert mine in listed and later not in listed  # caught up with its writes: the replica serves
        async with store.batch():
            inside = (await store.create_session(title="async batch")).id
            assert inside in ids(await store.list_sessions())
        assert (await store.stats(mine)).messages == 0
        clusters.resume_replay()
        await store.list_sessions(limit=1)  # where the primary is after this store's writes...
        clusters.wait_caught_up()  # ...the replica has replayed: the next read goes to it
        with pytest.raises(Unavailable, match="read replica failed during the read"):
            await store.run(Tx(cut(), write=False, replica=True))
        clusters.stop_replica()
        assert {mine, theirs, later, inside} <= ids(await store.list_sessions())  # replica gone: the primary
    finally:
        await store.close()
        await other.close()


@pytest.mark.anyio
async def test_async_replica_further_behind_than_read_max_lag_serves_nothing(clusters: Clusters) -> None:
    bound, replica = 1.0, clusters.replica_url
    bounded = await AsyncSessionStore.open(clusters.primary_url, read_url=replica, read_max_lag=bound,
                                           index_in_background=False)
    patient = await AsyncSessionStore.open(clusters.primary_url, read_url=replica, read_max_lag=3600,
                                           index_in_background=False)
    other = await AsyncSessionStore.open(clusters.primary_url, index_in_background=False)
    try:
        clusters.wait_caught_up()
        clusters.pause_replay()
        theirs = (await other.create_session(title="async, while replay is held up")).id
        wait_for(lambda: clusters.replay_age() > bound, "the replica to fall a second behind")
        assert theirs in ids(await bounded.list_sessions())  # the primary's answer
        assert theirs not in ids(await patient.list_sessions())  # the replica's: within an hour's bound
    finally:
        clusters.resume_replay()
        for store in (bounded, patient, other):
            await store.close()


def test_the_position_after_a_wal_segment_switch_is_reached_by_the_replica(clusters: Clusters) -> None:
    """After a WAL segment switch the primary's insert position sits past the new segment's page header, where
    a standby never reports being: the position asked for is the page's start, which an idle standby reaches
    (else a store that wrote would read from the primary until the next WAL record, up to 15 s later)."""
    clusters.query(clusters.primary_port, "CREATE TABLE IF NOT EXISTS probe (x int); INSERT INTO probe VALUES (1)")
    clusters.query(clusters.primary_port, "SELECT pg_switch_wal()")
    primary, replica = make_engine(clusters.primary_url), make_engine(clusters.replica_url)
    try:
        with primary.connect() as conn:
            position = drive(conn, replica_module.primary_position())

        def reached() -> bool:
            with replica.connect() as conn:
                return drive(conn, replica_module.caught_up(position))

        wait_for(reached, "the replica to reach the primary's position", timeout=5.0)
    finally:
        primary.dispose()
        replica.dispose()


# -- the CLI ------------------------------------------------------------------------------------------------------


def test_cli_reading_commands_take_read_url(clusters: Clusters) -> None:
    with primary_store(clusters) as other:
        before = word_session(other, "plover")
        clusters.wait_caught_up()
        clusters.pause_replay()
        after = word_session(other, "plover")
    db = ("--db", clusters.primary_url)
    replica = {"BRUTUS_READ_URL": clusters.replica_url}

    listed = run("sessions", "list", "--json", *db, "--read-url", clusters.replica_url)
    assert listed.returncode == 0, listed.stderr
    assert before in {s["id"] for s in json.loads(listed.stdout)} and after not in listed.stdout
    found = run("search", "plover", "--json", *db, env=replica)  # $BRUTUS_READ_URL
    assert [hit["session_id"] for hit in json.loads(found.stdout)] == [before]
    assert run("stats", before, "--json", *db, env=replica).returncode == 0
    missing = run("stats", after, *db, env=replica)
    assert missing.returncode != 0 and "not found" in missing.stderr
    exported = run("export", before, *db, env=replica)
    assert json.loads(exported.stdout)["info"]["id"] == before
    assert after in run("sessions", "list", "--json", *db).stdout  # without a replica: the primary


def test_cli_read_url_on_sqlite_is_a_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    SessionStore.open(str(path)).close()
    result = run("sessions", "list", "--db", str(path), "--read-url", "postgresql://127.0.0.1/x")
    assert result.returncode != 0 and result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        f"brutus: error: read_url needs PostgreSQL for both the primary and the replica; url is sqlite ({path})"
    ]
