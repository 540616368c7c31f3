"""The async store's PostgreSQL calls: each transaction run whole on a thread, with psycopg's sync connection.

psycopg's async connection costs about twice its sync one per round trip (each wait adds and removes a
reader on the event loop), and a live step is some fifteen round trips: run that way, a step took 5.9 ms of
the client's CPU against 3.7 on the sync store (``benchmarks/agents.py --step-cpu``). So, as on SQLite
(``async_sqlite``), a call of ``AsyncSessionStore`` that has a transaction of its own runs BEGIN, its
statements and COMMIT in one trip to a thread, here one of a pool (``PGThreads``), on a connection of the
sync engine built beside the async one with the same settings (``async_engine.twin_engine``); the event
loop awaits the result. What keeps a connection across calls — a ``batch()``, the compaction lock — stays
on the async engine's connections.

A call whose caller was cancelled while its thread ran still runs to its end there, and rolls back instead
of committing: a cancelled call writes nothing, unless it was cancelled during its COMMIT.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sqlalchemy import Connection, Engine

from .engine import AUTOCOMMIT, WRITE
from .runner import drive
from .statements import Op

__all__ = ["PGThreads", "THREADS"]

THREADS = 32  # a store's threads at most (asyncio's own default executor has as many): calls beyond wait


class _Cancelled(Exception):
    """Raised in a transaction whose caller was cancelled: it rolls back."""


class PGThreads:
    """Runs operations each in a transaction of its own on ``engine``'s connections, on threads."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._executor = ThreadPoolExecutor(THREADS, thread_name_prefix="brutus-pg")

    async def run(self, op: Op, write: bool, autocommit: bool = False) -> Any:
        """``op`` in a transaction of its own, committed on success (``autocommit``: a read with none,
        ``brutus.flows.Tx``); its return value."""
        cancelled = threading.Event()
        try:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._executor, self.transaction, op, write, cancelled, autocommit)
        except asyncio.CancelledError:
            cancelled.set()  # a thread that has not committed yet rolls back
            raise

    def transaction(self, op: Op, write: bool, cancelled: threading.Event, autocommit: bool = False) -> Any:
        """On a thread: ``op`` in a transaction, rolled back if its caller was cancelled meanwhile."""
        try:
            with self.engine.connect() as connection:
                if autocommit:
                    return drive(connection.execution_options(**AUTOCOMMIT), op)
                return _committed(connection, op, write, cancelled)
        except _Cancelled:
            return None

    async def close(self) -> None:
        """Wait for the calls under way, then close the connections."""
        await asyncio.to_thread(self._executor.shutdown)
        self.engine.dispose()


def _committed(connection: Connection, op: Op, write: bool, cancelled: threading.Event) -> Any:
    if write:
        connection.execution_options(**WRITE)
    with connection.begin():
        value = drive(connection, op)
        if cancelled.is_set():
            raise _Cancelled
    return value
