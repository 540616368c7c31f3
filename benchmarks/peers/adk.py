"""Google ADK's ``DatabaseSessionService`` (package ``google-adk``) on SQLite through aiosqlite.

Runs in /tmp/peers-adk (see setup.sh). A turn is four ADK ``Event``s built from google.genai types: the
user's text, the model's ``FunctionCall``, its ``FunctionResponse`` and the model's closing text; each is
stored with ``append_event(session, event)``, a commit each (ADK has no call that stores several events).
``get_session`` returns the session with its events as typed pydantic ``Event`` objects. The service takes a
``db_url``; WAL and ``synchronous=NORMAL`` (brutus's setting) are set by a connect listener on its public
``db_engine`` before its first connection, next to ADK's own ``foreign_keys=ON``.
"""

from __future__ import annotations

import asyncio
from importlib.metadata import version
from pathlib import Path
from typing import Any

from _common import (
    ITEMS_PER_TURN,
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
    wal_normal,
)
from google.adk.events import Event
from google.adk.sessions import DatabaseSessionService, Session
from google.genai import types
from sqlalchemy import event

VERSIONS = {name: version(name) for name in ("google-adk", "google-genai", "sqlalchemy", "aiosqlite")}
LABEL = "ADK DatabaseSessionService (aiosqlite), returns typed pydantic Events"
APP, USER, AGENT = "bench", "user", "agent"


def turn_events(i: int) -> list[Event]:
    """The benchmark's turn as ADK stores it: one ``Event`` per item (a function response is the user's)."""
    invocation = f"inv_{i}"
    return [
        Event(
            invocation_id=invocation,
            author="user",
            content=types.Content(role="user", parts=[types.Part(text=user_text(i))]),
        ),
        Event(
            invocation_id=invocation,
            author=AGENT,
            content=types.Content(
                role="model",
                parts=[types.Part(function_call=types.FunctionCall(id=call_id(i), name=TOOL, args=TOOL_INPUT))],
            ),
        ),
        Event(
            invocation_id=invocation,
            author=AGENT,
            content=types.Content(
                role="user",
                parts=[
                    types.Part(
                        function_response=types.FunctionResponse(id=call_id(i), name=TOOL, response={"output": OUTPUT})
                    )
                ],
            ),
        ),
        Event(
            invocation_id=invocation,
            author=AGENT,
            content=types.Content(role="model", parts=[types.Part(text=REPLY)]),
        ),
    ]


def service(path: Path) -> DatabaseSessionService:
    """A ``DatabaseSessionService`` on the SQLite file at ``path``, in WAL mode with ``synchronous=NORMAL``."""
    sessions = DatabaseSessionService(db_url=f"sqlite+aiosqlite:///{path}")
    event.listen(sessions.db_engine.sync_engine, "connect", wal_normal)
    return sessions


async def append_turn(sessions: DatabaseSessionService, session: Session, i: int) -> None:
    for item in turn_events(i):
        await sessions.append_event(session, item)


async def append(args: Any) -> None:
    """Serve append rounds (see ``serve_async``): per item only, as ADK stores no more than one event a call."""
    sessions = service(Path(args.tmp) / "adk.db")
    session = await sessions.create_session(app_name=APP, user_id=USER, session_id="per-item")

    async def item_by_item(i: int) -> None:
        await append_turn(sessions, session, i)

    info = {"peer": "adk", "versions": VERSIONS, "synchronous": {LABEL: 1}}
    await serve_async({f"{LABEL}|item": item_by_item}, info)
    await sessions.close()


async def load_all(sessions: DatabaseSessionService, session_id: str, items: int) -> Session:
    loaded = await sessions.get_session(app_name=APP, user_id=USER, session_id=session_id)
    assert loaded is not None and len(loaded.events) == items, (loaded and len(loaded.events), items)
    assert isinstance(loaded.events[-1], Event)
    return loaded


async def grow(sessions: DatabaseSessionService, session: Session, start: int, items: int) -> None:
    for i in range(start // ITEMS_PER_TURN, items // ITEMS_PER_TURN):
        await append_turn(sessions, session, i)


async def load(path: Path, args: Any) -> dict[str, Any]:
    sessions = service(path)
    session = await sessions.create_session(app_name=APP, user_id=USER, session_id="load")
    await grow(sessions, session, 0, args.items)
    timing = await timed_async(lambda: load_all(sessions, "load", args.items), repeats=args.repeats)
    await sessions.close()
    return {"items": args.items, "typed": True, "load": timing}


async def scaling(path: Path, args: Any) -> dict[str, Any]:
    sessions = service(path)
    session = await sessions.create_session(app_name=APP, user_id=USER, session_id="scaling")
    points, done = [], 0
    for size in sorted(int(s) for s in args.sizes.split(",")):
        await grow(sessions, session, done, size)
        done = size
        stored = len(session.events)  # whole turns: 248 of 250 items

        async def load_stored(stored: int = stored) -> Session:
            return await load_all(sessions, "scaling", stored)

        timing = await timed_async(load_stored, repeats=args.repeats)
        points.append({"items": size, "load_ms": timing["median"], "db_bytes": sqlite_bytes(path)})
    await sessions.close()
    return {"typed": True, "points": points}


async def main() -> None:
    args = peer_args()
    if args.task == "append":
        await append(args)
        return
    task = {"load": load, "scaling": scaling}[args.task]
    emit("adk", VERSIONS, {LABEL: await task(Path(args.tmp) / f"adk_{args.task}.db", args)})


if __name__ == "__main__":
    asyncio.run(main())
