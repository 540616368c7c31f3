"""Work declared once (``brutus.flows``): both surfaces bound from one declaration, one behaviour for errors
and cancellation on both runners, and what a runner refuses."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest

from brutus import AsyncSessionStore, InvalidInput, NotFound, SessionStore
from brutus.calls import StoreCalls
from brutus.db import ops
from brutus.flows import InBatch, Runs, Tx, adrive_flow, drive_flow, work
from brutus.live.conversation import AsyncConversation, Conversation, ConversationCalls


def _declared(cls: type) -> dict[str, Any]:
    return {name: fn for name, fn in vars(cls).items() if getattr(fn, "__brutus_work__", False)}


@pytest.mark.parametrize(
    ("declaring", "sync", "async_"),
    [(StoreCalls, SessionStore, AsyncSessionStore), (ConversationCalls, Conversation, AsyncConversation)],
)
def test_each_declared_method_is_bound_once_per_surface(declaring: type, sync: type, async_: type) -> None:
    declared = _declared(declaring)
    assert len(declared) >= (20 if declaring is StoreCalls else 7)
    for name, fn in declared.items():
        plain, awaitable = getattr(sync, name), getattr(async_, name)
        assert not inspect.iscoroutinefunction(plain) and inspect.iscoroutinefunction(awaitable), name
        assert plain.__wrapped__ is fn and awaitable.__wrapped__ is fn, name  # one declaration behind both
        assert inspect.signature(plain) == inspect.signature(awaitable) == inspect.signature(fn), name
        assert plain.__doc__ == awaitable.__doc__ == fn.__doc__ and fn.__doc__, name
    public = {n for n in dir(sync) if not n.startswith("_")} & {n for n in dir(declaring) if not n.startswith("_")}
    assert public == {n for n in dir(async_) if not n.startswith("_")} & public  # nothing only one side has


def test_a_method_defined_again_below_a_declaration_is_kept() -> None:
    class Declaring(Runs):
        @work
        def answer(self) -> int:
            return 41

    class Runner(Declaring, mode="sync"):
        def run(self, work: Any) -> Any:
            return work + 1

    class Overriding(Declaring, mode="sync"):
        def run(self, work: Any) -> Any:
            raise AssertionError("an override is not run through run()")

        def answer(self) -> int:
            return 7

    assert Runner().answer() == 42 and Overriding().answer() == 7


def _catching() -> Any:
    """A flow that handles the error of its first action and reports what it saw."""
    try:
        yield "fails"
    except BaseException as exc:  # noqa: BLE001  the flow decides what it handles
        return f"caught {type(exc).__name__}"
    return "not reached"


def test_both_runners_throw_every_error_into_the_flow() -> None:
    def do(action: Any) -> Any:
        raise KeyboardInterrupt

    async def ado(action: Any) -> Any:
        raise KeyboardInterrupt

    assert drive_flow(_catching(), do) == "caught KeyboardInterrupt"
    assert asyncio.run(adrive_flow(_catching(), ado)) == "caught KeyboardInterrupt"


def test_a_cancelled_async_run_closes_the_flow_without_throwing_into_it() -> None:
    seen: list[str] = []

    def flow() -> Any:
        try:
            yield "waits"
            seen.append("resumed")
        except BaseException as exc:  # noqa: BLE001
            seen.append(f"thrown {type(exc).__name__}")
            raise
        finally:
            seen.append("closed")

    async def do(action: Any) -> Any:
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(adrive_flow(flow(), do))
    assert seen == ["thrown GeneratorExit", "closed"]  # closed as after a crash: no CancelledError to handle


def test_a_store_refuses_what_is_not_work_and_writes_nothing(store: SessionStore) -> None:
    session = store.create_session()
    for bad in ("not an action", 3, None):
        with pytest.raises(InvalidInput, match="not an action of brutus.flows"):
            store.run(bad)
    assert [s.id for s in store.list_sessions()] == [session.id]


def test_a_store_runs_an_operation_and_a_flow_in_and_out_of_a_batch(store: SessionStore) -> None:
    def flow() -> Any:
        in_batch = yield InBatch()
        created = yield Tx(ops.create_session(now=1, title="from a flow", directory=None, parent_id=None, id=None))
        return in_batch, created

    assert store.run(flow())[0] is False
    with store.batch():
        in_batch, created = store.run(flow())
    assert in_batch is True and store.run(Tx(ops.get_session(created.id), write=False)).title == "from a flow"
    with pytest.raises(NotFound):
        store.run(Tx(ops.get_session("ses_0000000000000000000000000"), write=False))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_the_async_store_runs_the_same_work(store_url: str) -> None:
    async with await AsyncSessionStore.open(store_url) as store:
        session = await store.run(Tx(ops.create_session(now=1, title="t", directory=None, parent_id=None, id=None)))
        async with store.batch():
            assert await store.run(InBatch()) is True
        assert await store.run(InBatch()) is False
        assert (await store.get_session(session.id)).title == "t"
        with pytest.raises(InvalidInput, match="not an action of brutus.flows"):
            await store.run("not an action")
