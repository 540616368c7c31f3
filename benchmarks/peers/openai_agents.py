"""OpenAI Agents' sessions (package ``openai-agents``): ``SQLiteSession`` and ``SQLAlchemySession`` on aiosqlite.

Runs in /tmp/peers-openai-agents (see setup.sh). A turn is its four Responses input items; "per item" stores
each with its own ``add_items([item])`` call (a commit each), "per turn" stores the four in one call, as its
Runner does. Both run in WAL mode with ``synchronous=NORMAL`` (brutus's setting); ``SQLiteSession`` ships with
WAL and SQLite's default ``synchronous=FULL``, measured too as "as shipped".
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from importlib.metadata import version
from pathlib import Path
from typing import Any

from _common import (
    ITEMS_PER_TURN,
    checkpoint_truncate,
    OUTPUT,
    REPLY,
    TOOL,
    TOOL_INPUT,
    call_id,
    emit,
    peer_args,
    serve_async,
    sqlite_bytes,
    timed_async,
    user_text,
    wal_kib,
    wal_normal,
)
from agents import SQLiteSession
from agents.extensions.memory import SQLAlchemySession
from sqlalchemy import event
from sqlalchemy.ext.asyncio import create_async_engine

VERSIONS = {name: version(name) for name in ("openai-agents", "sqlalchemy", "aiosqlite")}


def turn_items(i: int) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": user_text(i)},
        {
            "type": "function_call",
            "id": f"fc_{i}",
            "call_id": call_id(i),
            "name": TOOL,
            "arguments": json.dumps(TOOL_INPUT),
            "status": "completed",
        },
        {"type": "function_call_output", "call_id": call_id(i), "output": OUTPUT},
        {
            "type": "message",
            "id": f"msg_{i}",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": REPLY, "annotations": []}],
        },
    ]


class NormalSyncSQLiteSession(SQLiteSession):
    """``SQLiteSession`` with ``synchronous=NORMAL`` added to its WAL setup."""

    @staticmethod
    def _configure_connection(conn: sqlite3.Connection) -> None:
        SQLiteSession._configure_connection(conn)
        conn.execute("PRAGMA synchronous = NORMAL")


class BrutusSettingsSQLiteSession(NormalSyncSQLiteSession):
    """``NormalSyncSQLiteSession`` with brutus's SQLite settings: its file made with 2 KiB pages (see
    ``Store``) and the automatic checkpoint at 16 MiB (8192 pages of 2 KiB), as ``brutus.db.engine`` sets
    them. brutus's checkpoint thread is code of its own, not a setting: this session checkpoints inline."""

    @staticmethod
    def _configure_connection(conn: sqlite3.Connection) -> None:
        NormalSyncSQLiteSession._configure_connection(conn)
        conn.execute("PRAGMA wal_autocheckpoint = 8192")


class CountingSQLiteSession(NormalSyncSQLiteSession):
    """``NormalSyncSQLiteSession`` with automatic checkpoints off, so its write-ahead log counts the pages written."""

    @staticmethod
    def _configure_connection(conn: sqlite3.Connection) -> None:
        NormalSyncSQLiteSession._configure_connection(conn)
        conn.execute("PRAGMA wal_autocheckpoint = 0")


async def pages_per_turn(tmp: Path, turns: int = 100) -> dict[str, float]:
    """Pages ``SQLiteSession`` writes to the WAL per turn: four items per call, and one item per call."""
    path = tmp / "oa_pages.db"
    session = CountingSQLiteSession("pages", db_path=path)
    pages = {}
    for how, start in (("turn", 0), ("item", 10_000)):
        for i in range(start, start + 20):  # warm: the tables and indexes exist past their first pages
            await session.add_items(turn_items(i))
        checkpoint_truncate(path)
        for i in range(start + 20, start + 20 + turns):
            if how == "turn":
                await session.add_items(turn_items(i))
            else:
                for item in turn_items(i):
                    await session.add_items([item])
        pages[how] = wal_kib(path) / turns
    session.close()
    return pages


class Store:
    """One way of storing sessions in one SQLite file."""

    def __init__(self, label: str, path: Path, kind: str) -> None:
        self.label, self.path, self.kind = label, path, kind
        self.engine = None
        if kind == "brutus_settings":  # the page size holds only if set before the file is first written
            conn = sqlite3.connect(path)
            conn.execute("PRAGMA page_size = 2048")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.close()
        if kind == "sqlalchemy":
            self.engine = create_async_engine(f"sqlite+aiosqlite:///{path}")
            event.listen(self.engine.sync_engine, "connect", wal_normal)

    def session(self, session_id: str) -> Any:
        if self.kind == "sqlalchemy":
            return SQLAlchemySession(session_id, engine=self.engine, create_tables=True)
        classes = {"shipped": SQLiteSession, "brutus_settings": BrutusSettingsSQLiteSession}
        return classes.get(self.kind, NormalSyncSQLiteSession)(session_id, db_path=self.path)

    async def close(self) -> None:
        if self.engine is not None:
            await self.engine.dispose()


def stores(tmp: Path) -> list[Store]:
    return [
        Store("OpenAI Agents SQLiteSession", tmp / "oa_sqlite.db", "normal"),
        Store("OpenAI Agents SQLiteSession, as shipped (synchronous=FULL)", tmp / "oa_sqlite_full.db", "shipped"),
        Store(
            "OpenAI Agents SQLiteSession, brutus's pragmas (2 KiB pages, checkpoint at 16 MiB)",
            tmp / "oa_sqlite_brutus_settings.db",
            "brutus_settings",
        ),
        Store("OpenAI Agents SQLAlchemySession (aiosqlite)", tmp / "oa_sqlalchemy.db", "sqlalchemy"),
    ]


def synchronous_of(store: Store, session: Any) -> int:
    if store.kind == "sqlalchemy":
        return 1  # set by the connect listener above
    conn = session._get_connection()
    return conn.execute("PRAGMA synchronous").fetchone()[0]


async def append(args: Any) -> None:
    """Serve append rounds (see ``serve_async``) for every store, per item and per turn."""
    contenders, synchronous = {}, {}
    for store in stores(Path(args.tmp)):
        per_item, per_turn = store.session("per-item"), store.session("per-turn")

        async def item_by_item(i: int, session: Any = per_item) -> None:
            for item in turn_items(i):
                await session.add_items([item])

        async def whole_turn(i: int, session: Any = per_turn) -> None:
            await session.add_items(turn_items(i))

        contenders[f"{store.label}|item"] = item_by_item
        contenders[f"{store.label}|turn"] = whole_turn
        synchronous[store.label] = synchronous_of(store, per_turn)
    pages = {"OpenAI Agents SQLiteSession": await pages_per_turn(Path(args.tmp))}
    info = {"peer": "openai-agents", "versions": VERSIONS, "synchronous": synchronous, "wal_kib": pages}
    await serve_async(contenders, info)


async def grow(session: Any, start: int, items: int) -> None:
    for i in range(start // ITEMS_PER_TURN, items // ITEMS_PER_TURN):
        await session.add_items(turn_items(i))


async def load(store: Store, args: Any) -> dict[str, Any]:
    session = store.session("load")
    await grow(session, 0, args.items)
    got = await session.get_items()
    assert len(got) == args.items, (len(got), args.items)
    result = {"items": args.items, "load": await timed_async(session.get_items, repeats=args.repeats)}
    if hasattr(session, "close"):
        session.close()
    return result


async def scaling(store: Store, args: Any) -> dict[str, Any]:
    session = store.session("scaling")
    points, done = [], 0
    for size in sorted(int(s) for s in args.sizes.split(",")):
        await grow(session, done, size)
        done = size
        timing = await timed_async(session.get_items, repeats=args.repeats)
        points.append({"items": size, "load_ms": timing["median"], "db_bytes": sqlite_bytes(store.path)})
    if hasattr(session, "close"):
        session.close()
    return {"points": points}


async def main() -> None:
    args = peer_args()
    if args.task == "append":
        await append(args)
        return
    task = {"load": load, "scaling": scaling}[args.task]
    results = {}
    for store in stores(Path(args.tmp)):
        if store.kind in ("shipped", "brutus_settings"):
            continue  # loading depends on neither
        results[store.label] = await task(store, args)
        await store.close()
    emit("openai-agents", VERSIONS, results)


if __name__ == "__main__":
    asyncio.run(main())
