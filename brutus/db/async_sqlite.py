"""The async store's SQLite connections: each a sqlite3 connection on a thread of brutus's own.

A call of ``AsyncSessionStore`` on SQLite runs its whole operation, BEGIN and COMMIT included, in one trip to
the thread of a connection (``AsyncSessionStore._run``), and the event loop awaits the result. Rules:

- a ``SQLiteThread`` runs what it is sent in the order sent, one call at a time, on a sqlite3 connection it
  opens itself (sqlite3 objects belong to the thread that made them), from a sync engine with the async
  engine's settings (``async_engine.twin_engine``: pragmas, busy timeout, ``query_only`` when read-only),
  taken out of that engine's pool (``detach``) so that the thread alone closes it;
- a call's result or error is handed to the event loop that sent it (``call_soon_threadsafe``); a call
  whose caller was cancelled still runs to its end, and the thread runs nothing sent after it before then,
  so the next user's BEGIN comes after the cancelled call's ROLLBACK;
- ``SQLiteConnections`` keeps them between calls: a call takes an idle one (a new one when none is idle:
  concurrent calls each have their own) and gives it back when it is done, cancelled or not; at most
  ``keep`` idle ones are kept, one given back beyond that is closed; ``close`` closes the idle ones and
  marks those in use to be closed when given back;
- a ``SQLiteThread`` dropped without ``close`` (a store dropped without ``close``) closes its connection
  and ends once it is collected (the thread holds no reference to it); the threads are daemons, so none
  holds up the interpreter's exit.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Callable
from queue import SimpleQueue
from typing import Any

from sqlalchemy import Engine

from ..errors import DatabaseError

__all__ = ["SQLiteConnections", "SQLiteThread"]

_Call = tuple[Any, tuple[Any, ...], Any]  # (function or None to close, its arguments, future or None)


class SQLiteThread:
    """A sqlite3 connection on a thread of its own: ``await call(fn, *args)`` runs ``fn(connection, *args)``
    there and returns its result (see the module docstring)."""

    def __init__(self, engine: Engine) -> None:
        self._calls: SimpleQueue[_Call] = SimpleQueue()
        name = f"brutus-sqlite {engine.url.database}"
        threading.Thread(target=_serve, args=(engine, self._calls), name=name, daemon=True).start()
        self.closed = False
        weakref.finalize(self, self._calls.put, (None, (), None))  # dropped: the thread closes and ends

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        if self.closed:  # its thread has ended: nothing would ever answer
            raise DatabaseError("this SQLite connection is closed")
        future = asyncio.get_running_loop().create_future()
        self._calls.put((fn, args, future))
        return await future

    async def close(self) -> None:
        """Close the connection once the calls sent before are done; the thread ends."""
        if not self.closed:
            self.closed = True
            future = asyncio.get_running_loop().create_future()
            self._calls.put((None, (), future))
            await future


def _serve(engine: Engine, calls: SimpleQueue[_Call]) -> None:
    """The thread of a ``SQLiteThread``: connect at the first call (again at the next if that failed), run the
    calls in order, close the connection at ``(None, …)``."""
    pooled: Any = None
    while True:
        fn, args, future = calls.get()
        if fn is None:
            break
        value = None
        try:
            if pooled is None:
                pooled = engine.raw_connection()  # set up by the engine's connect events
                conn = pooled.driver_connection
                pooled.detach()  # closed by this thread alone, never returned to the pool
            value = fn(conn, *args)
        except BaseException as exc:  # noqa: BLE001  the caller's to handle, in its event loop
            _settle(future, None, exc)
        else:
            _settle(future, value, None)
        del fn, args, future, value  # kept while the thread waits, they would keep the store alive
    try:
        if pooled is not None:
            pooled.close()
    except BaseException as exc:  # noqa: BLE001
        _settle(future, None, exc)
    else:
        _settle(future, None, None)


def _settle(future: asyncio.Future[Any] | None, value: Any, error: BaseException | None) -> None:
    if future is None:
        return
    try:
        future.get_loop().call_soon_threadsafe(_set, future, value, error)
    except RuntimeError:  # the loop is closed: nobody waits for this any more
        pass


def _set(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)


class SQLiteConnections:
    """The ``SQLiteThread``s of one store, kept between its calls (see the module docstring)."""

    def __init__(self, engine: Engine, keep: int = 5) -> None:
        self._engine = engine
        self._keep = keep
        self._idle: list[SQLiteThread] = []
        self._busy: set[SQLiteThread] = set()
        self._retired: set[SQLiteThread] = set()  # in use when the store closed: closed when given back

    def take(self) -> SQLiteThread:
        """An idle connection, or a new one."""
        try:
            worker = self._idle.pop()  # no check first: loops in other threads may share the store
        except IndexError:
            worker = SQLiteThread(self._engine)
        self._busy.add(worker)
        return worker

    async def give_back(self, worker: SQLiteThread) -> None:
        """Return ``worker`` after a call (also a cancelled one: see the module docstring)."""
        self._busy.discard(worker)
        if worker not in self._retired and len(self._idle) < self._keep:
            self._idle.append(worker)  # the usual case: nothing awaited
            return
        self._retired.discard(worker)
        await worker.close()

    async def close(self) -> None:
        """Close the idle connections; those in use are closed when given back."""
        self._retired |= self._busy
        idle, self._idle = self._idle, []
        for worker in idle:
            await worker.close()
