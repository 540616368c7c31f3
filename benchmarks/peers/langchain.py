"""LangChain's ``SQLChatMessageHistory`` (package ``langchain-community``) on a SQLAlchemy SQLite engine.

Runs in /tmp/peers-langchain (see setup.sh). A turn is four messages: ``HumanMessage``, ``AIMessage`` with
the tool call, ``ToolMessage`` with the output, ``AIMessage`` with the closing text; "per item" stores each
with ``add_message`` (a commit each), "per turn" the four with one ``add_messages``. WAL and
``synchronous=NORMAL`` are set on each connection, as brutus does.
"""

from __future__ import annotations

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
    serve,
    sqlite_bytes,
    timed,
    user_text,
    wal_normal,
)
from langchain_community.chat_message_histories import SQLChatMessageHistory
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from sqlalchemy import create_engine, event

LABEL = "LangChain SQLChatMessageHistory"


def turn_messages(i: int) -> list[BaseMessage]:
    return [
        HumanMessage(content=user_text(i)),
        AIMessage(content="", tool_calls=[{"name": TOOL, "args": TOOL_INPUT, "id": call_id(i), "type": "tool_call"}]),
        ToolMessage(content=OUTPUT, tool_call_id=call_id(i), name=TOOL),
        AIMessage(content=REPLY),
    ]


def engine(path: Path) -> Any:
    result = create_engine(f"sqlite:///{path}")
    event.listen(result, "connect", wal_normal)
    return result


def append(path: Path) -> None:
    """Serve append rounds (see ``serve``), per item and per turn."""
    db = engine(path)
    per_item = SQLChatMessageHistory("per-item", connection=db)
    per_turn = SQLChatMessageHistory("per-turn", connection=db)

    def item_by_item(i: int) -> None:
        for message in turn_messages(i):
            per_item.add_message(message)

    contenders = {f"{LABEL}|item": item_by_item, f"{LABEL}|turn": lambda i: per_turn.add_messages(turn_messages(i))}
    serve(contenders, {"peer": "langchain", "versions": versions(), "synchronous": {LABEL: 1}})


def grow(history: SQLChatMessageHistory, start: int, items: int) -> None:
    for i in range(start // ITEMS_PER_TURN, items // ITEMS_PER_TURN):
        history.add_messages(turn_messages(i))


def load(path: Path, args: Any) -> dict[str, Any]:
    history = SQLChatMessageHistory("load", connection=engine(path))
    grow(history, 0, args.items)
    assert len(history.get_messages()) == args.items
    return {"items": args.items, "load": timed(history.get_messages, repeats=args.repeats)}


def scaling(path: Path, args: Any) -> dict[str, Any]:
    history = SQLChatMessageHistory("scaling", connection=engine(path))
    points, done = [], 0
    for size in sorted(int(s) for s in args.sizes.split(",")):
        grow(history, done, size)
        done = size
        timing = timed(history.get_messages, repeats=args.repeats)
        points.append({"items": size, "load_ms": timing["median"], "db_bytes": sqlite_bytes(path)})
    return {"points": points}


def versions() -> dict[str, str]:
    return {name: version(name) for name in ("langchain-community", "langchain-core", "sqlalchemy")}


def main() -> None:
    args = peer_args()
    path = Path(args.tmp) / "langchain.db"
    if args.task == "append":
        append(path)
        return
    task = {"load": load, "scaling": scaling}[args.task]
    emit("langchain", versions(), {LABEL: task(path, args)})


if __name__ == "__main__":
    main()
