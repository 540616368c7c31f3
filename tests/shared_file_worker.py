"""The processes of tests/test_shared_file.py: two stores on one SQLite file in one process (issue 31).

    python shared_file_worker.py PATH first SECOND COUNT   process A: opens a store, writes COUNT messages,
                                                           then opens a second store on the same file (SECOND:
                                                           ``sync``, ``async`` or ``cli``, the in-process CLI
                                                           commands), prints ``ready``; on a line from stdin
                                                           writes COUNT more (each one acknowledged) and says
                                                           whether its ``-shm`` file is still there, then
                                                           ends without closing anything (os._exit), as a
                                                           killed agent would
    python shared_file_worker.py PATH other COUNT          process B: opens its own store, writes COUNT
                                                           messages and closes it cleanly

Every message written is a user message with one text part: A's and B's sessions are counted afterwards.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

from brutus import SessionStore


def say(value: Any) -> None:
    print(value if isinstance(value, str) else json.dumps(value), flush=True)


def write(store: SessionStore, session_id: str, count: int, label: str) -> None:
    for i in range(count):
        message = store.append_message(session_id, "user")
        store.append_part(message.id, {"type": "text", "text": f"{label} {i}"})


def second_store(path: str, kind: str, session_id: str) -> Any:
    """Open the second store beside the first (kept open, as an app keeps it) and use it once."""
    url = f"sqlite:///{path}"
    if kind == "sync":
        other = SessionStore.open(url)
        other.list_sessions()
        return other
    if kind == "async":
        from brutus import AsyncSessionStore

        loop = asyncio.new_event_loop()

        async def opened() -> Any:
            store = await AsyncSessionStore.open(url)
            await store.list_sessions()
            return store

        return loop, loop.run_until_complete(opened())
    if kind == "cli":
        from brutus.cli.app import main

        commands = (["sessions", "list"], ["show", session_id], ["stats", session_id], ["search", "before"], ["check"])
        for argv in ([*command, "--db", path] for command in commands):
            out, err = io.StringIO(), io.StringIO()
            with redirect_stdout(out), redirect_stderr(err):
                code = main(argv)
            if code != 0:
                raise SystemExit(f"brutus {' '.join(argv)} failed ({code}): {err.getvalue()}")
        return None
    raise SystemExit(f"unknown second store {kind!r}")


def first(path: str, kind: str, count: str) -> None:
    store = SessionStore.open(f"sqlite:///{path}")
    session = store.create_session(title="A")
    write(store, session.id, int(count), "A before")
    kept = second_store(path, kind, session.id)
    say({"session": session.id})
    say("ready")
    sys.stdin.readline()  # process B has written and closed its store
    shm_before = Path(f"{path}-shm").exists()
    write(store, session.id, int(count), "A after")
    say({"shm_before": shm_before, "shm_after": Path(f"{path}-shm").exists()})
    del kept
    os._exit(0)  # no close, no checkpoint: what was acknowledged must already be safe


def other(path: str, count: str) -> None:
    with SessionStore.open(f"sqlite:///{path}") as store:
        session = store.create_session(title="B")
        write(store, session.id, int(count), "B")
    say({"session": session.id})


if __name__ == "__main__":
    if sys.argv[2] == "first":
        first(sys.argv[1], sys.argv[3], sys.argv[4])
    else:
        other(sys.argv[1], sys.argv[3])
