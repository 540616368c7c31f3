"""How brutus runs anything that touches a database: work declared once, run by a sync or an async runner.

**Work** is one action, or a flow: a generator that yields actions and is sent each action's outcome. Work
never sees a connection, a summarizer's client or an event loop, so it is written once for both stores.
Every public method of the stores (``brutus.calls.StoreCalls``) and of the live conversations
(``brutus.live.conversation``) returns its work; compaction (``brutus.compaction.engine.compaction_flow``),
the tiers (``brutus.tiers.manager.tier_flow``), gc, check, search and settle (``brutus.db.*_ops``) are flows.

The actions:

- ``Tx(op, write, replica, autocommit)``: a database operation (``brutus.db.*_ops``) in a transaction of its
  own, or in the batch's inside ``store.batch()``; the outcome is what the operation returns. ``replica``: a
  read that may run on the store's read replica (``brutus.db.replica`` says when it does). ``autocommit``: the
  operation needs no transaction around its statements (it writes in one statement at most, and its reads
  need no snapshot in common): an untenanted PostgreSQL store runs it without BEGIN and COMMIT, two round
  trips fewer (the async store its reads only: a cancelled write must not commit).
- ``Summarize(request, summarizer)``: the summarizer with its fallbacks (``brutus.summarizers.fallbacks``);
  the outcome is ``(summary, fallback)``.
- ``Locked(session_id, work)``: ``work`` run while holding the session's compaction lock
  (``brutus.compaction.locks``); ``CompactionInProgress`` if another caller holds it.
- ``HeldLocks(session_ids)``: which of them some process holds the compaction lock of now.
- ``Vacuum(full, pages)`` and ``StorageBytes()``: gc's storage steps, outside any transaction
  (``brutus.db.gc_ops``); ``StorageBytes`` checkpoints SQLite's WAL (TRUNCATE) before it measures.
- ``InBatch()``: whether the work runs inside ``store.batch()``.
- ``Unindexed(work)``: ``work`` with the store's background indexer paused (no snapshot held meanwhile).

A runner (``SessionStore.run``, ``AsyncSessionStore.run``) does each action. ``drive_flow(flow, do)`` and its
async twin ``adrive_flow`` are the only loops over a flow: each action goes to ``do``; what it returns is sent
back, what it raises is thrown into the flow, which may catch it (a compaction marks its marker failed, then
raises again). The flow's return value is theirs. An async run that is cancelled closes the flow instead:
nothing more is written, as after a crash.

``Runs`` binds work to a runner: a class declares each public method once, as a ``@work`` method returning
its work, and its subclasses ``Runs, mode="sync"`` / ``mode="async"`` get that method as a plain or an
``async def`` with the same name, signature and docstring, running the work on ``self.run``.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from functools import wraps
from typing import Any, Literal, TypeVar

from .errors import InvalidInput

__all__ = [
    "HeldLocks",
    "InBatch",
    "Locked",
    "Runs",
    "StorageBytes",
    "Summarize",
    "Tx",
    "Unindexed",
    "Vacuum",
    "adrive_flow",
    "drive_flow",
    "perform",
    "unbatched",
    "work",
]

T = TypeVar("T")
Flow = Generator[Any, Any, T]


class Tx:
    """A database operation (``brutus.db.statements.Op``) in a transaction of its own (or the batch's).
    ``replica``: a read that may run on the store's read replica (``brutus.db.replica``); ``autocommit``: one
    that needs no transaction around its statements (the module's docstring says when)."""

    __slots__ = ("op", "write", "replica", "autocommit")  # a plain class: made for every store call, it costs less than a dataclass

    def __init__(self, op: Any, write: bool = True, replica: bool = False, autocommit: bool = False) -> None:
        self.op = op
        self.write = write
        self.replica = replica
        self.autocommit = autocommit

    def __repr__(self) -> str:
        return f"Tx({self.op!r}, write={self.write}, replica={self.replica}, autocommit={self.autocommit})"


@dataclass(frozen=True)
class Summarize:
    request: Any  # brutus.summarizers.SummaryRequest
    summarizer: Any = None  # a Summarizer (or AsyncSummarizer)


@dataclass(frozen=True)
class Locked:
    session_id: str
    work: Any  # an action or a flow


@dataclass(frozen=True)
class HeldLocks:
    session_ids: set[str]


@dataclass(frozen=True)
class Vacuum:
    full: bool = True  # PostgreSQL: VACUUM FULL, else a plain VACUUM; SQLite: VACUUM, else an incremental step
    pages: int = 0  # SQLite's incremental step: the free pages to give back (the outcome: those left)


@dataclass(frozen=True)
class StorageBytes:
    pass


@dataclass(frozen=True)
class InBatch:
    pass


@dataclass(frozen=True)
class Unindexed:
    work: Any  # an action or a flow


def drive_flow(flow: Flow[T], do: Callable[[Any], Any]) -> T:
    """Run ``flow``, each action through ``do`` (see the module docstring)."""
    done, value = _advance(flow.send, None)  # a new generator: send(None) starts it
    while not done:
        try:
            outcome = do(value)
        except BaseException as exc:
            done, value = _advance(flow.throw, exc)
        else:
            done, value = _advance(flow.send, outcome)
    return value


async def adrive_flow(flow: Flow[T], do: Callable[[Any], Awaitable[Any]]) -> T:
    """``drive_flow`` for asyncio: ``do`` is awaited; a cancelled run closes the flow."""
    done, value = _advance(flow.send, None)  # a new generator: send(None) starts it
    while not done:
        try:
            outcome = await do(value)
        except asyncio.CancelledError:
            flow.close()  # as a crash: nothing more is written
            raise
        except BaseException as exc:
            done, value = _advance(flow.throw, exc)
        else:
            done, value = _advance(flow.send, outcome)
    return value


def _advance(resume: Callable[[Any], Any], value: Any) -> tuple[bool, Any]:
    """Resume a flow (``flow.send`` an outcome, ``flow.throw`` an error): ``(False, its next action)``, or
    ``(True, its return value)`` once it has returned."""
    try:
        return False, resume(value)
    except StopIteration as stop:
        return True, stop.value


def perform(work: Any) -> Flow[Any]:
    """``work`` (an action or a flow) as a step of the flow that ``yield from``s it; its outcome."""
    return (yield from work) if inspect.isgenerator(work) else (yield work)


def unbatched(why: str, work: Any) -> Flow[Any]:
    """``work`` (an action or a flow), refused with ``InvalidInput(why)`` inside ``store.batch()``."""
    if (yield InBatch()):
        raise InvalidInput(why)
    return (yield from perform(work))


def work(method: Callable[..., Any]) -> Callable[..., Any]:
    """Declare a public method once: it returns its work, which each ``Runs`` subclass runs its own way."""
    method.__brutus_work__ = True  # type: ignore[attr-defined]
    return method


class Runs:
    """A class whose ``@work`` methods run on ``self.run``: declared once, bound per runner (module docstring).

    ``class SessionStore(StoreCalls, mode="sync")`` gets each ``@work`` method as ``self.run(work)``;
    ``mode="async"`` as ``await self.run(work)``."""

    def __init_subclass__(cls, mode: Literal["sync", "async"] | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if mode is None:
            return
        bind = _bind_sync if mode == "sync" else _bind_async
        for name in dir(cls):
            declared = inspect.getattr_static(cls, name)
            if getattr(declared, "__brutus_work__", False):  # the nearest definition is a declaration
                setattr(cls, name, bind(declared))

    def run(self, work: Any) -> Any:  # pragma: no cover - every runner defines it
        raise NotImplementedError

    def _perform(self, work: Any) -> Any:
        """What a bound method returns (sync) or awaits (async): ``run(work)``, unless a runner has a quicker way."""
        return self.run(work)


def _bind_sync(declared: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(declared)
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return self._perform(declared(self, *args, **kwargs))

    del method.__brutus_work__  # copied by wraps: a bound method is not a declaration
    return method


def _bind_async(declared: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(declared)
    async def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return await self._perform(declared(self, *args, **kwargs))

    del method.__brutus_work__
    return method
