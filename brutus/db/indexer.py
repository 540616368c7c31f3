"""The search index kept current off the writer's path: a thread that indexes a moment after the store commits.

A write leaves its documents pending (migration 0005): the write costs what it did without search. Without
more, the next search indexed everything written since, and after a day of writes that took minutes. A
store (``SessionStore``) keeps an ``Indexer``: a thread of its own that, ``DELAY_S`` after the store's last
commit (and ``INTERVAL_S`` after its last run began), runs ``index_pending`` in small transactions (``BATCH``
rows of each table at a time on SQLite, whose write lock an agent's next write must not wait long for) until
nothing is pending. A commit that lands meanwhile sends it back to waiting: it indexes while the writer pauses
(an agent waiting for its model). The store's search still indexes what is left first, and a store whose
thread is gone (a forked child, a store closed) loses nothing: the documents stay pending until the next run.

The thread starts at the first commit and blocks while nothing is written; ``close()`` stops it (a store used
again starts a new one), as ``brutus.db.checkpoint.Checkpointer`` does for WAL checkpoints. ``AsyncIndexer``
is its twin for ``AsyncSessionStore``: a task on the store's loop, by the same rules.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager

from .background import AfterCommits

__all__ = ["BATCH", "DELAY_S", "INTERVAL_S", "AsyncIndexer", "Indexer"]

log = logging.getLogger(__name__)

DELAY_S = 0.2  # after a commit, wait this long for more before indexing (an agent step is several commits)
# and at least this long after the last run began: under writes that never pause (many agents on one store)
# a run a second, not five; each costs the same fixed statements and the index is only a cache for search,
# which indexes what is left first (a run cost 1 ms of the client's CPU and 2 of the server's a live step
# at 50 agents, at DELAY_S alone: ``benchmarks/agents.py --no-indexer``)
INTERVAL_S = 1.0
BATCH = 500  # rows of each table per transaction (SQLite): a few ms of the write lock


class Indexer(AfterCommits):
    """Runs ``index()`` (one small transaction; True while something was pending) in a thread, after the
    store says it committed, until it returns False. ``index`` is held weakly (a ``WeakMethod`` of the store):
    the thread never keeps a dropped store alive."""

    def __init__(self, index: Callable[[], bool], *, name: str) -> None:
        super().__init__()
        self._index = weakref.WeakMethod(index)  # type: ignore[arg-type]
        self._name = name
        self._thread_name = f"brutus-indexer {name}"
        self.runs = 0  # transactions run (tests wait for the thread to finish: ``wait_idle``)
        self._idle = threading.Condition()
        self._busy = False
        self._ident: int | None = None  # the thread's: its own commits wake nothing
        self._pauses = 0  # while above 0 (gc's VACUUM, whose horizon an open snapshot holds back) nothing runs
        self._running = threading.Lock()  # held by the thread for each transaction

    def committed(self) -> None:
        """The store committed a write: index soon (starts the thread the first time). The thread's own
        commits do not call this."""
        if self._thread is not None and threading.get_ident() == self._ident:
            return
        super().committed()

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Block until nothing is left to index after the last commit (False if ``timeout`` seconds pass)."""
        with self._idle:
            return self._idle.wait_for(lambda: not self._busy and not self._wake.is_set(), timeout)

    @contextmanager
    def paused(self) -> Iterator[None]:
        """No indexing inside the block (a transaction under way finishes first); what is pending is indexed
        after it."""
        with self._idle:
            self._pauses += 1
        try:
            with self._running:
                yield
        finally:
            with self._idle:
                self._pauses -= 1
            self.committed()

    def _index_once(self) -> bool:
        with self._running:
            if self._pauses:
                return False
            index = self._index()  # the store, for this call only
            return index is not None and index()

    def _run(self, stop: threading.Event) -> None:
        self._ident = threading.get_ident()
        wake = self._wake
        began = -INTERVAL_S
        while True:
            wake.wait()
            if stop.wait(max(DELAY_S, began + INTERVAL_S - time.monotonic())):
                return
            began = time.monotonic()
            with self._idle:
                self._busy = True
                wake.clear()
            try:
                # until nothing is pending, or a new commit (a writer at work: wait for its pause again)
                while not stop.is_set() and not wake.is_set() and self._index_once():
                    self.runs += 1
            except Exception as exc:  # noqa: BLE001  the search indexes what is left; nothing is lost
                log.debug("brutus: background indexing (%s) failed: %s", self._name, exc)
            finally:
                with self._idle:
                    self._busy = False
                    self._idle.notify_all()


class AsyncIndexer:
    """``Indexer`` for ``AsyncSessionStore``: the same rules as a task on the store's event loop, ``index`` an
    awaitable call (held weakly). Under writes that never pause it runs one transaction per ``INTERVAL_S``."""

    def __init__(self, index: Callable[[], Awaitable[bool]]) -> None:
        self._index = weakref.WeakMethod(index)  # type: ignore[arg-type]
        self.runs = 0
        self._writes = 0
        self._pauses = 0
        self._task: asyncio.Task[None] | None = None
        self._began = -INTERVAL_S  # when the last run began (the loop's clock)

    def committed(self) -> None:
        """The store committed a write (called on the loop): index soon. The task's own commits do not call
        this."""
        if self._task is not None and not self._task.done():
            if asyncio.current_task() is not self._task:
                self._writes += 1
            return
        if not self._pauses:
            self._task = asyncio.get_running_loop().create_task(self._run())

    @asynccontextmanager
    async def paused(self) -> AsyncIterator[None]:
        """``Indexer.paused``: the task stopped (what it was running rolls back), started again after."""
        self._pauses += 1
        try:
            await self.close()
            yield
        finally:
            self._pauses -= 1
            self.committed()

    async def wait_idle(self) -> None:
        """Until nothing is left to index after the last commit."""
        while self._task is not None and not self._task.done():
            await asyncio.shield(self._task)

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()  # a SQLite call under way rolls back
            try:
                await task
            except asyncio.CancelledError:
                pass

    async def _run(self) -> None:
        try:
            loop = asyncio.get_running_loop()
            while True:
                await asyncio.sleep(max(DELAY_S, self._began + INTERVAL_S - loop.time()))
                self._began = loop.time()
                seen = self._writes
                while True:
                    index = self._index()
                    if index is None or not await index():
                        return
                    del index
                    self.runs += 1
                    if self._writes != seen:  # a writer at work: wait for its pause again
                        break
        except Exception as exc:  # noqa: BLE001  the search indexes what is left; nothing is lost
            log.debug("brutus: background indexing failed: %s", exc)
