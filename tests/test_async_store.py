"""``AsyncSessionStore`` on SQLite (sqlite3 in threads of its own) and PostgreSQL (psycopg async).

The parity suite runs each scenario once through ``SessionStore`` and once through ``AsyncSessionStore`` on the
same backend, with explicit ids and one injected clock, and requires the same answers and errors call by
call and the same database contents row by row. The rest covers what only the async store has: many tasks
on one event loop, batches shared with child tasks, cancellation, and an event loop that keeps running while
the database makes a call wait.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import re
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import pytest
from pydantic import BaseModel
from sqlalchemy import delete, select, text
from sqlalchemy.engine import make_url
from test_store import ALL_PARTS

import brutus.async_store
from brutus import (
    AsyncSessionStore,
    BrutusError,
    DatabaseError,
    InvalidInput,
    InvalidTransition,
    NotFound,
    SchemaOutOfDate,
    SessionStore,
    TextPart,
    TokenCounts,
)
from brutus.db.async_engine import make_async_engine, sync_url, twin_engine
from brutus.db.async_pg import PGThreads
from brutus.db.async_sqlite import SQLiteThread
from brutus.db import migrate
from brutus.db.engine import WRITE, make_engine
from brutus.db.tables import Base
from conftest import plain_url

pytestmark = pytest.mark.anyio

HOSTILE = "nul\x00 lone\ud800 low\udfff esc\ue000 \ue0000 ansi\x1b[31mred\x1b[0m crlf\r\n emoji🤖 漢字 \\u0000"
START = 1_760_000_000_000


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def fixed_clock() -> Callable[[], int]:
    return itertools.count(START, 7).__next__


# -- running one scenario through either store ------------------------------------------------------------


class SyncDriver:
    """The sync store behind the async store's interface, so one scenario drives both."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        method = getattr(self.store, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return method(*args, **kwargs)

        return call

    @asynccontextmanager
    async def batch(self) -> AsyncIterator[SyncDriver]:
        with self.store.batch():
            yield self


class Recorder:
    """Logs every call's answer (or error) so the two stores' transcripts can be compared."""

    def __init__(self, target: Any) -> None:
        self.target = target
        self.log: list[tuple[Any, ...]] = []

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        method = getattr(self.target, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            try:
                result = await method(*args, **kwargs)
            except BrutusError as exc:
                self.log.append((name, type(exc).__name__, str(exc)))
                raise
            self.log.append((name, _plain(result)))
            return result

        return call

    def batch(self) -> Any:
        return self.target.batch()


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


async def raises(kind: type[BaseException], call: Awaitable[Any]) -> None:
    with pytest.raises(kind):
        await call


class Boom(Exception):
    pass


def tool(part_id: str, status: str, **state: Any) -> dict[str, Any]:
    return {"type": "tool", "id": part_id, "call_id": f"call_{part_id}", "tool": "bash", "state": {"status": status, **state}}


# -- scenarios --------------------------------------------------------------------------------------------


async def sessions(s: Any) -> None:
    await s.create_session(id="ses_root", title=HOSTILE, directory="/work/\x00dir")
    await s.create_session(id="ses_child", title="sub", parent_id="ses_root")
    await s.create_session(id="ses_other")
    await s.create_session(title="store-assigned id")
    await s.get_session("ses_root")
    await s.list_sessions()
    await s.list_sessions(parent_id="ses_root")
    await s.list_sessions(limit=2)
    await s.list_sessions(limit=2, after="ses_child")
    await s.list_sessions(after="ses_other", parent_id="ses_root")
    await raises(NotFound, s.list_sessions(after="ses_missing"))
    await raises(InvalidInput, s.list_sessions(after=7))
    await raises(InvalidInput, s.create_session(id="ses_root"))
    await raises(InvalidInput, s.create_session(id="not an id!"))
    await raises(InvalidInput, s.create_session(title=3))
    await raises(NotFound, s.create_session(parent_id="ses_missing"))
    await raises(InvalidInput, s.list_sessions(limit=-1))
    await s.delete_session("ses_root")
    await raises(NotFound, s.get_session("ses_child"))
    await raises(NotFound, s.delete_session("ses_root"))
    await raises(NotFound, s.get_session("bad id!"))
    await s.list_sessions()


async def parts(s: Any) -> None:
    await s.create_session(id="ses_p")
    await s.append_message("ses_p", "user", id="msg_u")
    await s.append_message(
        "ses_p", "assistant", id="msg_a", parent_id="msg_u", agent="build", mode="build", model_id="claude-sonnet-4-5", provider_id="anthropic"
    )
    for i, part in enumerate(ALL_PARTS):
        await s.append_part("msg_a", dict(part, id=f"prt_{i:02d}"))
    for part in ALL_PARTS[:4]:
        await s.append_part("msg_u", part)  # the store assigns the ids
    await s.append_part("msg_u", TextPart(text="a model, not a dict"))
    await raises(InvalidInput, s.append_part("msg_u", {"type": "nope"}))
    await raises(InvalidInput, s.append_part("msg_u", {"type": "text", "text": "dup", "id": "prt_00"}))
    await raises(InvalidInput, s.append_message("ses_p", "user", id="msg_u"))
    await raises(NotFound, s.append_part("msg_missing", {"type": "text", "text": "x"}))
    await raises(NotFound, s.append_message("ses_missing", "user"))
    await raises(InvalidInput, s.append_message("ses_p", "system"))
    await raises(InvalidInput, s.append_message("ses_p", "user", colour="red"))
    await s.messages("ses_p")
    await s.filter_compacted("ses_p")
    await s.get_session("ses_p")


async def tools(s: Any) -> None:
    await s.create_session(id="ses_t")
    await s.append_message("ses_t", "assistant", id="msg_t")
    await s.append_part("msg_t", tool("prt_t1", "pending", input={"cmd": HOSTILE, "n": 2**62}))
    await s.append_part("msg_t", tool("prt_t2", "pending"))
    await s.append_part("msg_t", tool("prt_t3", "pending", input={"cmd": "pwd"}))
    await s.append_part("msg_t", tool("prt_t4", "completed", input={}, output="born done", title="t"))
    await s.append_part("msg_t", tool("prt_t5", "running", input={}))
    await s.append_part("msg_t", tool("prt_t6", "pending"))
    await s.append_part("msg_t", {"type": "text", "id": "prt_text", "text": "not a tool"})
    await s.update_tool("prt_t1", status="running", title="ls")
    await s.update_tool("prt_t1", status="completed", output=HOSTILE * 50, title="ls -la", metadata={"exit": 0, HOSTILE: [1]})
    await s.update_tool("prt_t2", status="error", error="boom\x00")
    await s.update_tool("prt_t3", status="running", input={"cmd": "pwd -P"})
    await s.update_tool("prt_t3", status="error", error="interrupted")
    await raises(InvalidTransition, s.update_tool("prt_t1", status="running"))
    await raises(InvalidTransition, s.update_tool("prt_t4", status="error", error="late"))
    await raises(InvalidTransition, s.update_tool("prt_t5", status="pending"))
    await raises(InvalidTransition, s.update_tool("prt_t6", status="completed", output="skipped running"))
    await raises(InvalidInput, s.update_tool("prt_t5", status="completed"))
    await raises(InvalidInput, s.update_tool("prt_t5", status="error"))
    await raises(InvalidInput, s.update_tool("prt_t5", status="done"))
    await raises(InvalidInput, s.update_tool("prt_t5", status="running", metadata=["not", "an", "object"]))
    await raises(NotFound, s.update_tool("prt_missing", status="running"))
    await raises(NotFound, s.update_tool("prt_text", status="running"))
    await s.update_tool("prt_t5", status="completed", output="")
    await s.messages("ses_t")


async def finishing(s: Any) -> None:
    await s.create_session(id="ses_f")
    await s.append_message("ses_f", "user", id="msg_u1")
    await s.append_part("msg_u1", {"type": "text", "id": "prt_u1", "text": "fix the test"})
    await s.append_message("ses_f", "assistant", id="msg_a1", parent_id="msg_u1")
    usage = {"input": 5200, "output": 310, "reasoning": 7, "cache": {"read": 100, "write": 20}}
    await s.finish_message("msg_a1", finish="tool-calls", tokens=usage, cost=0.0213)
    await s.append_message("ses_f", "assistant", id="msg_a2", parent_id="msg_u1")
    await s.finish_message("msg_a2", finish="error", tokens=TokenCounts(input=1), error="overloaded\x00")
    await s.finish_message("msg_a2", finish="stop", error={"name": "APIError", "data": {"message": HOSTILE}})
    # a completed compaction: the view starts at its user message from here on
    await s.append_message("ses_f", "user", id="msg_c")
    await s.append_part("msg_c", {"type": "compaction", "id": "prt_c", "auto": True, "overflow": False})
    await s.append_message("ses_f", "assistant", id="msg_s", parent_id="msg_c", summary=True, mode="compaction")
    await s.append_part("msg_s", {"type": "text", "id": "prt_s", "text": "summary so far"})
    await s.filter_compacted("ses_f")
    await s.finish_message("msg_s", finish="stop", tokens={"output": 40})
    await s.append_message("ses_f", "user", id="msg_u2")
    await s.filter_compacted("ses_f")
    await s.messages("ses_f")
    await raises(NotFound, s.finish_message("msg_missing", finish="stop"))
    await raises(InvalidInput, s.finish_message("msg_a1", finish=""))
    await raises(InvalidInput, s.finish_message("msg_a1", finish="stop", cost=float("nan")))
    await raises(InvalidInput, s.finish_message("msg_a1", finish="stop", tokens={"output": 2**64}))
    await s.get_session("ses_f")


async def batches(s: Any) -> None:
    await s.create_session(id="ses_b")
    async with s.batch():
        await s.append_message("ses_b", "user", id="msg_b1")
        await s.append_part("msg_b1", {"type": "text", "id": "prt_b1", "text": "one step"})
        await s.append_message("ses_b", "assistant", id="msg_b2", parent_id="msg_b1")
        await s.append_part("msg_b2", tool("prt_b2", "pending", input={"q": 1}))
        await s.update_tool("prt_b2", status="running")
        await s.update_tool("prt_b2", status="completed", output="ok")
        await s.finish_message("msg_b2", finish="stop")
    with pytest.raises(Boom):
        async with s.batch():
            await s.append_message("ses_b", "user", id="msg_gone")
            await s.append_part("msg_gone", {"type": "text", "text": "rolled back"})
            await s.create_session(id="ses_gone")
            raise Boom
    async with s.batch():
        async with s.batch():  # nested: part of the outer unit of work
            await s.append_message("ses_b", "user", id="msg_n1")
        await raises(NotFound, s.append_part("msg_missing", {"type": "text", "text": "x"}))
        await s.append_message("ses_b", "assistant", id="msg_n2", parent_id="msg_n1")
        await s.messages("ses_b")  # reads inside a batch see its writes
    with pytest.raises(InvalidTransition):
        async with s.batch():
            await s.append_message("ses_b", "user", id="msg_gone2")
            await s.update_tool("prt_b2", status="running")
    await raises(NotFound, s.get_session("ses_gone"))
    await s.messages("ses_b")
    await s.get_session("ses_b")


async def hostile(s: Any) -> None:
    big = ("0123456789abcdef\n" * 65_536) + "\x00\ud800end"
    await s.create_session(id="ses_h", title=HOSTILE, directory=HOSTILE)
    await s.append_message("ses_h", "assistant", id="msg_h", agent=HOSTILE, model_id=HOSTILE, metadata={HOSTILE: [HOSTILE, None]})
    await s.append_part("msg_h", {"type": "text", "id": "prt_h1", "text": HOSTILE, "metadata": {HOSTILE: HOSTILE}})
    await s.append_part("msg_h", {"type": "reasoning", "id": "prt_h2", "text": HOSTILE, "metadata": {"k\x00": "v\ud800"}})
    await s.append_part("msg_h", {"type": "file", "id": "prt_h3", "mime": "text/plain", "filename": HOSTILE, "url": "file:///\x00"})
    await s.append_part("msg_h", tool("prt_h4", "pending", input={HOSTILE: {"nested": [HOSTILE]}}))
    await s.update_tool("prt_h4", status="running", title=HOSTILE)
    await s.update_tool("prt_h4", status="completed", output=big)
    await s.finish_message("msg_h", finish="stop", error={"message": HOSTILE})
    deep: Any = "x"
    for _ in range(300):
        deep = [deep]
    await raises(InvalidInput, s.append_message("ses_h", "user", metadata={"deep": deep}))
    await raises(BrutusError, s.append_message("ses_h", "user", metadata={"x": float("nan")}))
    await raises(BrutusError, s.append_part("msg_h", {"type": "text", "text": "t", "metadata": {"x": object()}}))
    await s.messages("ses_h")
    await s.get_session("ses_h")


async def pruning(s: Any) -> None:
    await s.create_session(id="ses_r")
    for turn in range(4):
        await s.append_message("ses_r", "user", id=f"msg_ru{turn}")
        await s.append_message("ses_r", "assistant", id=f"msg_ra{turn}", parent_id=f"msg_ru{turn}")
        for n in range(3):
            await s.append_part(f"msg_ra{turn}", tool(f"prt_r{turn}{n}", "completed", input={}, output=f"{turn}{n}\x00" * 30_000))
        await s.finish_message(f"msg_ra{turn}", finish="stop")
    await s.prune("ses_r")
    await s.prune("ses_r")  # nothing left to prune
    await s.filter_compacted("ses_r")  # pruned outputs are not read
    await s.messages("ses_r")
    await s.compactions("ses_r")
    await raises(NotFound, s.prune("ses_missing"))
    await raises(NotFound, s.compactions("ses_missing"))


async def whole_messages(s: Any) -> None:
    await s.create_session(id="ses_w")
    turn = [
        {"info": {"role": "user", "id": "msg_w1"}, "parts": [{"type": "text", "id": "prt_w1", "text": HOSTILE}]},
        {
            "info": {"role": "assistant", "id": "msg_w2", "parent_id": "msg_w1", "finish": "stop", "tokens": {"input": 9}},
            "parts": [tool("prt_w2", "completed", input={"cmd": "ls"}, output="a\x00b"), {"type": "text", "id": "prt_w3", "text": "ok"}],
        },
    ]
    await s.append_messages("ses_w", turn)
    await s.append_messages("ses_w", [{"info": {"role": "user"}, "parts": []}])
    await raises(InvalidInput, s.append_messages("ses_w", turn))  # the ids exist: nothing written
    await raises(InvalidInput, s.append_messages("ses_w", [{"info": {"role": "system"}}]))
    await raises(NotFound, s.append_messages("ses_missing", [{"info": {"role": "user"}}]))
    await s.messages("ses_w")
    await s.get_session("ses_w")


SCENARIOS = [sessions, parts, tools, finishing, batches, hostile, pruning, whole_messages]


# -- database contents ------------------------------------------------------------------------------------

_GENERATED = re.compile(r"^(ses|msg|prt|cmp)_[0-9a-f]{12}[0-9A-Za-z]{14}$")


def dump(url: str) -> dict[str, list[dict[str, Any]]]:
    """Every row of every brutus table, in primary-key order."""
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return {
                table.name: [row._asdict() for row in conn.execute(select(table).order_by(*table.primary_key.columns))]
                for table in Base.metadata.sorted_tables
            }
    finally:
        engine.dispose()


def wipe(url: str) -> None:
    engine = make_engine(url)
    with engine.begin() as conn:
        for table in reversed(Base.metadata.sorted_tables):
            conn.execute(delete(table))
    engine.dispose()


def normalized(value: Any) -> Any:
    """``value`` with store-assigned ids replaced by their order of first appearance (``ses#1`` …)."""
    seen: dict[str, str] = {}

    def walk(v: Any) -> Any:
        if isinstance(v, str) and _GENERATED.match(v):
            return seen.setdefault(v, f"{v[:3]}#{len(seen) + 1}")
        if isinstance(v, dict):
            return {walk(k): walk(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [walk(x) for x in v]
        return v

    return walk(value)


# -- parity -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[f.__name__ for f in SCENARIOS])
async def test_same_answers_and_same_rows_as_the_sync_store(scenario: Callable[[Any], Awaitable[None]], store_url: str) -> None:
    wipe(store_url)
    sync_store = SessionStore.open(store_url, clock=fixed_clock())
    sync_run = Recorder(SyncDriver(sync_store))
    await scenario(sync_run)
    sync_store.close()
    sync_rows = dump(store_url)
    wipe(store_url)

    async with await AsyncSessionStore.open(store_url, clock=fixed_clock()) as async_store:
        async_run = Recorder(async_store)
        await scenario(async_run)
    async_rows = dump(store_url)

    assert any(sync_rows.values())
    assert normalized(async_run.log) == normalized(sync_run.log)
    assert normalized(async_rows) == normalized(sync_rows)


# Every method added to SessionStore needs its async twin here.
PENDING: set[str] = set()


def test_every_sync_method_has_an_async_twin() -> None:
    public = {name for name, _ in inspect.getmembers(SessionStore, inspect.isfunction) if not name.startswith("_")}
    public -= {"close", "batch", "conversation"}  # close is awaitable; batch is an async context manager (tested
    # below); conversation() only builds an AsyncConversation (tests/test_async_conversation.py)
    missing = {name for name in public if not inspect.iscoroutinefunction(getattr(AsyncSessionStore, name, None))}
    assert missing == PENDING, f"AsyncSessionStore lacks {sorted(missing - PENDING)}: add `async def name(...): return await self._run(ops....)`"
    public -= PENDING
    assert inspect.iscoroutinefunction(AsyncSessionStore.close) and AsyncSessionStore.aclose is AsyncSessionStore.close
    assert inspect.iscoroutinefunction(AsyncSessionStore.open.__func__)
    for name in public:
        sync_params = list(inspect.signature(getattr(SessionStore, name)).parameters.values())
        async_params = list(inspect.signature(getattr(AsyncSessionStore, name)).parameters.values())
        assert [(p.name, p.kind, p.default) for p in async_params] == [(p.name, p.kind, p.default) for p in sync_params], name


# -- what only the async store has ------------------------------------------------------------------------


@pytest.fixture
async def astore(store_url: str) -> AsyncIterator[AsyncSessionStore]:
    store = await AsyncSessionStore.open(store_url)
    yield store
    await store.close()


async def agent_step(store: AsyncSessionStore, session_id: str, i: int) -> None:
    """One agent step, as the benchmarks time it."""
    user = await store.append_message(session_id, "user")
    await store.append_part(user.id, {"type": "text", "text": f"step {i}"})
    reply = await store.append_message(session_id, "assistant", parent_id=user.id)
    call = await store.append_part(reply.id, {"type": "tool", "call_id": f"c{i}", "tool": "bash", "state": {"status": "pending", "input": {"i": i}}})
    await store.update_tool(call.id, status="running")
    await store.update_tool(call.id, status="completed", output="ok " * 50)
    await store.append_part(reply.id, {"type": "text", "text": "done"})
    await store.finish_message(reply.id, finish="stop", tokens={"input": 10, "output": 2})


async def assert_complete(store: AsyncSessionStore, session_id: str, steps: int) -> None:
    history = await store.messages(session_id)
    assert [m.info.seq for m in history] == list(range(1, 2 * steps + 1))
    by_id = {m.info.id: m for m in history}
    replies = [m for m in history if m.info.role == "assistant"]
    assert len(replies) == steps
    for reply in replies:
        assert by_id[reply.info.parent_id].info.role == "user"
        assert reply.info.finish == "stop"
        assert [p.type for p in reply.parts] == ["tool", "text"] and reply.parts[0].state.status == "completed"


def count(url: str, table: str) -> int:
    engine = make_engine(url)
    with engine.connect() as conn:
        n = conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one()
    engine.dispose()
    return n


async def test_fifty_tasks_append_to_fifty_sessions(astore: AsyncSessionStore, store_url: str) -> None:
    tasks, steps = 50, 3
    sessions = [await astore.create_session(title=f"agent {i}") for i in range(tasks)]

    async def agent(n: int, session_id: str) -> None:
        for i in range(steps):
            if n % 2:  # half the agents write each step as one batch: each task has its own
                async with astore.batch():
                    await agent_step(astore, session_id, i)
            else:
                await agent_step(astore, session_id, i)

    await asyncio.gather(*(agent(n, s.id) for n, s in enumerate(sessions)))
    for s in sessions:
        await assert_complete(astore, s.id, steps)
    assert count(store_url, "messages") == tasks * steps * 2
    assert count(store_url, "parts") == tasks * steps * 3
    assert count(store_url, "tool_outputs") == tasks * steps


async def test_five_tasks_append_to_one_session(astore: AsyncSessionStore, store_url: str) -> None:
    tasks, steps = 5, 12
    shared = await astore.create_session(title="shared")
    await asyncio.gather(*(agent_step(astore, shared.id, i) for _ in range(tasks) for i in range(steps)))
    await assert_complete(astore, shared.id, tasks * steps)
    assert (await astore.get_session(shared.id)).message_count == tasks * steps * 2
    assert count(store_url, "tool_states") == tasks * steps


async def test_tasks_started_inside_a_batch_join_it(astore: AsyncSessionStore) -> None:
    ses = await astore.create_session()
    async with astore.batch():
        await asyncio.gather(*(astore.append_message(ses.id, "user") for _ in range(10)))
    with pytest.raises(Boom):
        async with astore.batch():
            await asyncio.gather(*(astore.append_message(ses.id, "user") for _ in range(10)))
            raise Boom
    history = await astore.messages(ses.id)
    assert [m.info.seq for m in history] == list(range(1, 11))


async def test_batches_of_concurrent_tasks_are_separate(astore: AsyncSessionStore) -> None:
    ses = await astore.create_session()

    async def unit(fail: bool) -> None:
        async with astore.batch():
            await astore.append_message(ses.id, "user", agent="failed" if fail else "kept")
            await asyncio.sleep(0)  # a yield point, no wait: the other tasks' batches interleave here
            if fail:
                raise Boom

    results = await asyncio.gather(*(unit(n % 2 == 1) for n in range(6)), return_exceptions=True)
    assert [type(r) for r in results] == [type(None), Boom] * 3
    history = await astore.messages(ses.id)
    assert [m.info.agent for m in history] == ["kept"] * 3
    assert [m.info.seq for m in history] == [1, 2, 3]


async def test_invalid_transition_writes_nothing(astore: AsyncSessionStore, store_url: str) -> None:
    ses = await astore.create_session()
    msg = await astore.append_message(ses.id, "assistant")
    call = await astore.append_part(msg.id, tool("prt_x", "pending"))
    await astore.update_tool(call.id, status="running")
    await astore.update_tool(call.id, status="completed", output="done")
    before = dump(store_url)
    for status, extra in (("running", {}), ("pending", {}), ("error", {"error": "late"}), ("completed", {"output": "again"})):
        with pytest.raises(InvalidTransition):
            await astore.update_tool(call.id, status=status, **extra)
    assert dump(store_url) == before


# -- the event loop keeps running while the database makes a call wait -------------------------------------


class LockHolder:
    """Holds, from outside the store, the lock an async call will wait for: SQLite's write lock, or on
    PostgreSQL a session row (appends) or the migration advisory lock (open)."""

    def __init__(self, url: str, session_id: str | None = None) -> None:
        parsed = make_url(plain_url(sync_url(url)))
        if parsed.get_backend_name() == "sqlite":
            self.conn: Any = sqlite3.connect(parsed.database, isolation_level=None)
            self.conn.execute("BEGIN IMMEDIATE")
        else:
            self.conn = psycopg.connect(parsed.set(drivername="postgresql").render_as_string(hide_password=False))
            if session_id is None:
                self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (0x6272_7574,))
            else:
                self.conn.execute("SELECT id FROM sessions WHERE id = %s FOR UPDATE", (session_id,))

    def release(self) -> None:
        self.conn.rollback() if isinstance(self.conn, psycopg.Connection) else self.conn.execute("ROLLBACK")
        self.conn.close()


async def run_with_heartbeat(call: Awaitable[Any], holder: LockHolder, hold: float) -> tuple[Any, float, float]:
    """Await ``call`` while ``holder`` keeps it waiting for ``hold`` seconds; return its result, how long it
    took, and the longest the event loop went without running a 10 ms ticker."""
    loop = asyncio.get_running_loop()
    loop.call_later(hold, holder.release)
    longest, last, done = 0.0, time.monotonic(), False

    async def ticker() -> None:
        nonlocal longest, last
        while not done:
            await asyncio.sleep(0.01)  # the measurement: a 10 ms heartbeat, late only when the loop is blocked
            now = time.monotonic()
            longest, last = max(longest, now - last), now

    beat = asyncio.create_task(ticker())
    started = time.monotonic()
    try:
        result = await call
    finally:
        done = True
        await beat
    return result, time.monotonic() - started, longest


HOLD = 0.6


async def test_a_waiting_append_does_not_block_the_loop(astore: AsyncSessionStore, store_url: str) -> None:
    ses = await astore.create_session()
    holder = LockHolder(store_url, ses.id)
    msg, took, longest = await run_with_heartbeat(astore.append_message(ses.id, "user"), holder, HOLD)
    assert msg.seq == 1
    assert took >= HOLD * 0.8, "the append did not wait for the lock: the test proves nothing"
    assert longest < HOLD / 2


async def test_opening_while_another_process_migrates_does_not_block_the_loop(db_url: str) -> None:
    engine = make_engine(db_url)  # one revision behind head: opening must upgrade, so it waits for the holder's
    migrate.upgrade(engine, "0001")  # lock (a database already at head is opened without taking any lock)
    engine.dispose()
    holder = LockHolder(db_url)
    store, took, longest = await run_with_heartbeat(AsyncSessionStore.open(db_url), holder, HOLD)
    await store.close()
    assert took >= HOLD * 0.8
    assert longest < HOLD / 2


def waiting_for_the_lock(url: str, monkeypatch: pytest.MonkeyPatch) -> Callable[[], bool]:
    """A blocking check that a call of the store has been handed to its driver, where its first statement
    waits for the ``LockHolder``'s lock: SQLite's BEGIN IMMEDIATE in the connection's thread, PostgreSQL's
    ``SELECT … FOR UPDATE`` of the session row in the call's thread (``brutus.db.async_pg``)."""
    handed = threading.Event()
    if make_url(sync_url(url)).get_backend_name() == "sqlite":
        original = brutus.async_store.sqlite_transaction

        def begins(*args: Any, **kwargs: Any) -> Any:
            handed.set()
            return original(*args, **kwargs)

        monkeypatch.setattr(brutus.async_store, "sqlite_transaction", begins)
    else:
        original = PGThreads.transaction

        def runs(self: PGThreads, *args: Any) -> Any:
            handed.set()
            return original(self, *args)

        monkeypatch.setattr(PGThreads, "transaction", runs)
    return lambda: handed.wait(10)


async def test_a_cancelled_call_writes_nothing_and_the_store_goes_on(
    astore: AsyncSessionStore, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ses = await astore.create_session()
    holder = LockHolder(store_url, ses.id)
    waiting = waiting_for_the_lock(store_url, monkeypatch)
    task = asyncio.create_task(astore.append_message(ses.id, "user", agent="cancelled"))
    assert await asyncio.to_thread(waiting)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    holder.release()  # the call, still in its thread, gets the lock only after it was cancelled
    msg = await astore.append_message(ses.id, "user", agent="after")
    history = await astore.messages(ses.id)
    assert [(m.info.seq, m.info.agent) for m in history] == [(1, "after")] and msg.seq == 1


async def test_sqlite_runs_each_call_in_one_trip_to_the_connection_thread(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    trips: list[str] = []
    drive = AsyncSessionStore._drive_sqlite

    def counted(self: AsyncSessionStore, conn: Any, op: Any) -> Any:
        trips.append(threading.current_thread().name)
        return drive(self, conn, op)

    monkeypatch.setattr(AsyncSessionStore, "_drive_sqlite", counted)
    # no background indexer: its transactions (a moment after a commit, sooner than this test on a busy
    # machine) are trips of their own, not the calls counted here
    async with await AsyncSessionStore.open(f"sqlite:///{tmp_path / 'trips.db'}", index_in_background=False) as store:
        ses = await store.create_session()
        msg = await store.append_message(ses.id, "user")
        await store.append_part(msg.id, {"type": "text", "text": HOSTILE})
        async with store.batch():
            await store.append_part(msg.id, {"type": "text", "text": "two"})
        history = await store.messages(ses.id)
    assert [p.text for p in history[0].parts] == [HOSTILE, "two"]
    assert len(trips) == 5  # one per call, whatever its statements
    assert threading.main_thread().name not in trips


async def test_sqlite_a_call_of_its_own_is_one_trip_with_its_begin_and_commit(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside a batch, BEGIN, the operation and COMMIT go to the connection's thread together, and giving the
    connection back costs no trip: nothing is left to roll back."""
    trips: list[str] = []
    call = SQLiteThread.call

    async def counted(self: SQLiteThread, fn: Any, *args: Any) -> Any:
        trips.append(fn.__name__)
        return await call(self, fn, *args)

    async with await AsyncSessionStore.open(f"sqlite:///{tmp_path / 'one.db'}") as store:
        ses = await store.create_session()
        monkeypatch.setattr(SQLiteThread, "call", counted)
        msg = await store.append_message(ses.id, "user")
        await store.append_part(msg.id, {"type": "text", "text": "x"})
        with pytest.raises(NotFound):
            await store.append_part("msg_missing", {"type": "text", "text": "x"})
        await store.messages(ses.id)
        assert trips == ["_transaction_sqlite"] * 4


# -- opening ----------------------------------------------------------------------------------------------


async def test_open_migrates_or_refuses_an_old_schema(db_url: str) -> None:
    with pytest.raises(SchemaOutOfDate):
        await AsyncSessionStore.open(db_url, auto_migrate=False)
    async with await AsyncSessionStore.open(db_url) as store:
        assert await store.list_sessions() == []
    async with await AsyncSessionStore.open(db_url, auto_migrate=False) as store:
        assert (await store.create_session(title="t")).title == "t"


PRAGMAS = ("journal_mode", "synchronous", "foreign_keys", "busy_timeout", "page_size", "wal_autocheckpoint", "query_only")


def read_pragmas(conn: sqlite3.Connection) -> dict[str, Any]:
    return {name: conn.execute(f"PRAGMA {name}").fetchone()[0] for name in PRAGMAS}


async def test_sqlite_connections_are_set_up_as_the_sync_engines(tmp_path) -> None:
    """The async engine's connections and the store's own (``SQLiteThread``s) alike."""
    url = f"sqlite:///{tmp_path / 'a.db'}"
    engine = make_async_engine(url)
    assert engine.url.drivername == "sqlite+aiosqlite"
    async with engine.connect() as conn:
        pragmas = {name: (await conn.exec_driver_sql(f"PRAGMA {name}")).scalar() for name in PRAGMAS}
        await conn.rollback()
    expected = {
        "journal_mode": "wal",
        "synchronous": 1,
        "foreign_keys": 1,
        "busy_timeout": 30_000,
        "page_size": 2048,
        "wal_autocheckpoint": 8192,
        "query_only": 0,
    }
    assert pragmas == expected
    worker = SQLiteThread(twin_engine(engine))
    assert await worker.call(read_pragmas) == expected
    assert await worker.call(lambda conn: conn.isolation_level) is None  # brutus sends BEGIN itself
    await worker.close()
    reader = SQLiteThread(twin_engine(make_async_engine(url, read_only=True)))
    assert (await reader.call(read_pragmas))["query_only"] == 1
    await reader.close()
    async with engine.connect() as conn:
        await conn.execution_options(**WRITE)
        async with conn.begin():
            await conn.exec_driver_sql("SELECT 1")  # a write transaction holds the write lock before it writes
            other = sqlite3.connect(tmp_path / "a.db", timeout=0, isolation_level=None)
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                other.execute("BEGIN IMMEDIATE")
            other.close()
    await engine.dispose()


@pytest.mark.parametrize(
    ("url", "driver"),
    [
        ("plain/path.db", "sqlite+aiosqlite"),
        ("sqlite:///x.db", "sqlite+aiosqlite"),
        ("sqlite+aiosqlite:///x.db", "sqlite+aiosqlite"),
        ("postgres://u@h/db", "postgresql+psycopg"),
        ("postgresql+psycopg_async://u@h/db", "postgresql+psycopg"),
    ],
)
def test_urls_map_to_the_async_drivers(url: str, driver: str, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "plain").mkdir()  # a path is not a wish: a SQLite file's directory must exist
    engine = make_async_engine(url)
    assert engine.url.drivername == driver
    assert make_url(sync_url(url)).drivername == driver.replace("+aiosqlite", "")


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:", "mysql://u@h/db", "postgresql+asyncpg://u@h/db", "://nothing"])
def test_urls_brutus_cannot_use_are_refused(url: str, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInput):
        make_async_engine(url)


async def test_driver_errors_are_translated(db_url: str) -> None:
    async with await AsyncSessionStore.open(db_url) as store:
        ses = await store.create_session()
        msg = await store.append_message(ses.id, "assistant")
        engine = make_engine(db_url)
        with engine.begin() as conn:
            cascade = " CASCADE" if conn.dialect.name == "postgresql" else ""  # the search index's view reads it
            conn.execute(text("DROP TABLE tool_outputs" + cascade))
        engine.dispose()
        with pytest.raises(DatabaseError) as raised:
            await store.append_part(msg.id, tool("prt_z", "completed", input={}, output="x"))
        assert raised.value.__cause__ is not None
        assert (await store.get_session(ses.id)).message_count == 1  # the failed call wrote nothing
        assert await store.append_part(msg.id, {"type": "text", "text": "still works"})


async def test_stats_and_a_dry_run_prune(astore: AsyncSessionStore) -> None:
    ses = await astore.create_session()
    msg = await astore.append_message(ses.id, "assistant")
    await astore.append_part(msg.id, {"type": "text", "text": "hello"})
    stats = await astore.stats(ses.id)
    assert (stats.messages, stats.assistant_messages, [p.type for p in stats.part_types]) == (1, 1, ["text"])
    assert (await astore.prune(ses.id, dry_run=True)).parts == []
