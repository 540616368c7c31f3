"""Async engines: ``make_engine``'s settings on SQLAlchemy's asyncio extension.

SQLite goes through aiosqlite, PostgreSQL through psycopg 3's async connection; the URL a user gives is the
same one the sync store takes (``sqlite:///…``, ``postgresql://…``). The options (JSON codec, busy timeout)
and the events (SQLite's pragmas and ``BEGIN IMMEDIATE`` for write transactions, PostgreSQL's check of a
pooled connection at checkout) come from ``brutus.db.engine``; the events are installed on
``engine.sync_engine``, where SQLAlchemy runs them for the async driver, so both stores take the write lock
the same way.

Beside each async engine ``make_async_engine`` builds a sync one with the same arguments (``twin_engine``):
the async store's calls run on threads with its connections, sqlite3 ones on SQLite (``async_sqlite``),
psycopg's sync ones on PostgreSQL (``async_pg``), set up exactly as the async engine's would be. The async
engine's own connections serve what holds a connection across awaits: a batch, the compaction lock.
"""

from __future__ import annotations

import weakref
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from ..extras import require
from .engine import _CONFIGURED, engine_options, make_engine, normalize_url, pg_events, sqlite_events
from .files import track

__all__ = ["make_async_engine", "sync_url", "twin_engine"]

_ASYNC_DRIVERS = {"sqlite": "sqlite+aiosqlite", "postgresql": "postgresql+psycopg"}
_SYNC_DRIVERS = {
    "sqlite+aiosqlite": "sqlite",
    "postgresql+psycopg_async": "postgresql+psycopg",
}
_TWINS: weakref.WeakKeyDictionary[Engine, Engine] = weakref.WeakKeyDictionary()  # by sync_engine


def sync_url(url: str) -> str:
    """``url`` with the sync twin of an async driver (``sqlite+aiosqlite`` → ``sqlite``, ``psycopg_async`` →
    ``psycopg``); any other URL as ``normalize_url`` gives it, for ``engine_options`` to accept or refuse."""
    url = normalize_url(url)
    try:
        parsed = make_url(url)
    except ArgumentError:
        return url
    driver = _SYNC_DRIVERS.get(parsed.drivername)
    if driver is None:
        return url
    return parsed.set(drivername=driver).render_as_string(hide_password=False)


def make_async_engine(url: str, *, create: bool = True, read_only: bool = False, **kwargs: Any) -> AsyncEngine:
    """An ``AsyncEngine`` for ``url`` with brutus's connection settings (see ``make_engine``)."""
    parsed, backend, options = engine_options(sync_url(url), create=create, read_only=read_only, **kwargs)
    if backend == "sqlite":
        require("the async store on SQLite", {"greenlet": "async", "aiosqlite": "async"})
    else:
        require("the async store on PostgreSQL", {"greenlet": "async", "psycopg": "postgres"})
    engine = create_async_engine(parsed.set(drivername=_ASYNC_DRIVERS[backend]), **options)
    if backend == "sqlite":
        sqlite_events(engine.sync_engine, read_only=read_only)
    else:
        pg_events(engine.sync_engine)
    # the store's connections for calls run on threads (``async_sqlite``, ``async_pg``): same settings
    _TWINS[engine.sync_engine] = make_engine(sync_url(url), create=create, read_only=read_only, **kwargs)
    _CONFIGURED.add(engine.sync_engine)
    track(engine.sync_engine)
    return engine


def twin_engine(engine: AsyncEngine) -> Engine:
    """The sync engine built beside ``engine`` by ``make_async_engine``, with the same settings: the
    connections of the async store's calls that run on threads."""
    return _TWINS[engine.sync_engine]
