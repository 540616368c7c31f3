"""``llm``'s log store (package ``llm``): ``LogStore`` over ``sqlite_utils``, conversations as threads.

Runs in /tmp/peers-llm (see setup.sh). ``llm`` stores a conversation as a parent-linked chain of
content-addressed messages with parts, close to brutus's shape: a turn is four messages (user text,
assistant tool call, tool result, assistant text). "Per item" appends each with ``LogStore.append(thread,
[message])`` (``append`` commits each new message), "per turn" the four with one call inside
``db.atomic()``, one commit. Loading is ``thread_messages``. WAL and
``synchronous=NORMAL`` are set, as brutus does.
"""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path
from typing import Any

import sqlite_utils
from _common import (
    ITEMS_PER_TURN,
    OUTPUT,
    REPLY,
    TOOL,
    TOOL_INPUT,
    call_id,
    emit,
    peer_args,
    serve,
    sqlite_bytes,
    timed,
    user_text,
)
from llm.logs import LogStore
from llm.parts import Message, TextPart, ToolCallPart, ToolResultPart

LABEL = "llm LogStore (threads)"


def turn_messages(i: int) -> list[Message]:
    return [
        Message(role="user", parts=[TextPart(text=user_text(i))]),
        Message(role="assistant", parts=[ToolCallPart(name=TOOL, arguments=TOOL_INPUT, tool_call_id=call_id(i))]),
        Message(role="tool", parts=[ToolResultPart(name=TOOL, output=OUTPUT, tool_call_id=call_id(i))]),
        Message(role="assistant", parts=[TextPart(text=REPLY)]),
    ]


def open_store(path: Path) -> LogStore:
    db = sqlite_utils.Database(path)
    db.enable_wal()
    db.execute("PRAGMA synchronous = NORMAL")
    return LogStore(db)


def append(path: Path) -> None:
    """Serve append rounds (see ``serve``), per item and per turn."""
    store = open_store(path)
    per_item = store.create_thread(name="per-item")
    per_turn = store.create_thread(name="per-turn")

    def item_by_item(i: int) -> None:
        for message in turn_messages(i):
            store.append(per_item, [message])

    def whole_turn(i: int) -> None:
        with store.db.atomic():
            store.append(per_turn, turn_messages(i))

    synchronous = store.db.execute("PRAGMA synchronous").fetchone()[0]
    serve(
        {f"{LABEL}|item": item_by_item, f"{LABEL}|turn": whole_turn},
        {"peer": "llm", "versions": versions(), "synchronous": {LABEL: synchronous}},
    )


def grow(store: LogStore, thread: str, start: int, items: int) -> None:
    for i in range(start // ITEMS_PER_TURN, items // ITEMS_PER_TURN):
        store.append(thread, turn_messages(i))


def load(path: Path, args: Any) -> dict[str, Any]:
    store = open_store(path)
    thread = store.create_thread(name="load")
    grow(store, thread, 0, args.items)
    assert len(store.thread_messages(thread)) == args.items
    return {"items": args.items, "load": timed(lambda: store.thread_messages(thread), repeats=args.repeats)}


def scaling(path: Path, args: Any) -> dict[str, Any]:
    store = open_store(path)
    thread = store.create_thread(name="scaling")
    points, done = [], 0
    for size in sorted(int(s) for s in args.sizes.split(",")):
        grow(store, thread, done, size)
        done = size
        timing = timed(lambda: store.thread_messages(thread), repeats=args.repeats)
        points.append({"items": size, "load_ms": timing["median"], "db_bytes": sqlite_bytes(path)})
    return {"points": points}


def versions() -> dict[str, str]:
    return {name: version(name) for name in ("llm", "sqlite-utils")}


def main() -> None:
    args = peer_args()
    path = Path(args.tmp) / "llm.db"
    if args.task == "append":
        append(path)
        return
    task = {"load": load, "scaling": scaling}[args.task]
    emit("llm", versions(), {LABEL: task(path, args)})


if __name__ == "__main__":
    main()
