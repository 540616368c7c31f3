"""The async store's SQLite connections: aiosqlite connections kept between calls.

A call of ``AsyncSessionStore`` on SQLite runs its whole operation in one trip to aiosqlite's worker thread
(``AsyncSessionStore._drive_sqlite``). Checking a connection out of SQLAlchemy's pool for each call and
returning it after cost more than that trip: a checkout and a return through the asyncio extension's
greenlets, some 60 µs, and with the worker thread still finishing its trip, more. ``DriverConnections``
takes connections from the engine once (so they are set up by the engine's ``connect`` events: pragmas,
busy timeout), detaches them from the pool and keeps them:

- a call takes an idle connection (a new one when none is idle: concurrent calls each have their own, as
  they had from the pool) and gives it back when it is done, even when it was cancelled: the worker thread
  runs what it was sent before anything sent after, so the next user's BEGIN waits for the cancelled
  call's ROLLBACK;
- at most ``keep`` idle connections are kept (the pool's size); one given back beyond that is closed;
- ``close`` closes the idle ones and marks those in use to be closed when given back. A store dropped
  without ``close`` leaves them to aiosqlite's own cleanup when they are collected, as the pool's were.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.util import greenlet_spawn

__all__ = ["DriverConnections", "usable_driver"]


def usable_driver(driver: Any) -> Any:
    """``driver`` if it is an aiosqlite connection offering what the store runs on (the queue of calls to its
    thread, which SQLAlchemy's own aiosqlite adapter uses too, and the sqlite3 connection); else None."""
    if callable(getattr(driver, "_execute", None)) and getattr(driver, "_connection", None) is not None:
        return driver
    return None


class DriverConnections:
    """aiosqlite connections of one engine, kept between the store's calls (see the module docstring)."""

    def __init__(self, engine: AsyncEngine, keep: int = 5) -> None:
        self._engine = engine
        self._keep = keep
        self._idle: list[Any] = []
        self._busy: set[Any] = set()
        self._retired: set[Any] = set()  # in use when the store closed: closed when given back

    async def take(self) -> Any:
        """An idle connection, or a new one from the engine; None if the driver is not a usable aiosqlite."""
        try:
            driver = self._idle.pop()  # no check first: loops in other threads may share the store
        except IndexError:
            pooled = await self._engine.raw_connection()
            driver = usable_driver(pooled.driver_connection)
            if driver is None:
                await greenlet_spawn(pooled.close)
                return None
            pooled.detach()  # the store closes it: the pool neither tracks it nor warns when it is collected
        self._busy.add(driver)
        return driver

    async def give_back(self, driver: Any) -> None:
        """Return ``driver`` after a call (also a cancelled one: see the module docstring)."""
        self._busy.discard(driver)
        if driver not in self._retired and len(self._idle) < self._keep:
            self._idle.append(driver)  # the usual case: nothing awaited
            return
        self._retired.discard(driver)
        await driver.close()  # in its thread, after what it was sent before

    async def close(self) -> None:
        """Close the idle connections; those in use are closed when given back."""
        self._retired |= self._busy
        idle, self._idle = self._idle, []
        for driver in idle:
            await driver.close()
