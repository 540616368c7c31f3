"""What brutus writes in the benchmarks: the agent step, sessions of a given shape, and fast builders for big ones.

- ``agent_step``: one turn as a live agent writes it (8 calls: user message + text part, assistant message,
  tool part pending → running → completed, text part, finish), the same content as the peers' four items.
- ``whole_turn``: the same turn stored whole when it ends, in one ``append_messages`` call.
- ``write_turns``: turns written with fewer calls (the tool part appended already completed), in
  ``store.batch()`` chunks: for histories that are only read afterwards.
- ``build_compacted``: a session of N messages whose last completed compaction boundary is ``tail`` messages
  back. The history before the boundary is a block of turns and a compaction written through the API, then
  copied row by row with bulk SQL (``copy_messages``), so a 100,000-message session takes seconds, not
  minutes; the last compaction and the tail are written through the API, so the store's own caches (the
  boundary pointer) are set by the store.
- ``recording_store`` / ``recorded``: the SQL brutus sends to its sqlite3 connection, captured at the
  driver, so the raw ``sqlite3`` baseline replays exactly the statements brutus issues, whatever they become.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from peers._common import OUTPUT, REPLY, TOOL, TOOL_INPUT, call_id, user_text
from sqlalchemy import event

from brutus import SessionStore
from brutus.db.engine import sqlite_pragmas
from brutus.ids import new_id

MODEL = "claude-sonnet-4-5"


def open_sqlite(path: Path) -> SessionStore:
    return SessionStore.open(f"sqlite:///{path}")


def agent_step(store: SessionStore, session_id: str, i: int, output: str = OUTPUT) -> list[str]:
    """One agent turn, call by call as a live agent makes them; returns the ids it created."""
    user = store.append_message(session_id, "user")
    asked = store.append_part(user.id, {"type": "text", "text": user_text(i)})
    reply = store.append_message(session_id, "assistant", parent_id=user.id, model_id=MODEL)
    tool = store.append_part(
        reply.id,
        {"type": "tool", "call_id": call_id(i), "tool": TOOL, "state": {"status": "pending", "input": TOOL_INPUT}},
    )
    store.update_tool(tool.id, status="running")
    store.update_tool(tool.id, status="completed", output=output, title="ls")
    said = store.append_part(reply.id, {"type": "text", "text": REPLY})
    store.finish_message(reply.id, finish="stop", tokens={"input": 100, "output": 20})
    return [user.id, asked.id, reply.id, tool.id, said.id]


def whole_turn(store: SessionStore, session_id: str, i: int, output: str = OUTPUT) -> list[str]:
    """The same turn as ``agent_step`` stored at its end in one ``append_messages`` call (as ``add_items``
    stores a finished turn); returns the ids it created."""
    user_id = new_id("message")
    turn = [
        {"info": {"role": "user", "id": user_id}, "parts": [{"type": "text", "text": user_text(i)}]},
        {
            "info": {
                "role": "assistant",
                "parent_id": user_id,
                "model_id": MODEL,
                "finish": "stop",
                "tokens": {"input": 100, "output": 20},
            },
            "parts": [
                {
                    "type": "tool",
                    "call_id": call_id(i),
                    "tool": TOOL,
                    "state": {"status": "completed", "input": TOOL_INPUT, "output": output, "title": "ls"},
                },
                {"type": "text", "text": REPLY},
            ],
        },
    ]
    user, reply = store.append_messages(session_id, turn)
    return [user.info.id, user.parts[0].id, reply.info.id, *(part.id for part in reply.parts)]


def write_turn(store: SessionStore, session_id: str, i: int, output: str = OUTPUT) -> None:
    """One turn with the same content as ``agent_step``, in five calls (the tool part arrives completed)."""
    user = store.append_message(session_id, "user")
    store.append_part(user.id, {"type": "text", "text": user_text(i)})
    reply = store.append_message(session_id, "assistant", parent_id=user.id, model_id=MODEL)
    state = {
        "status": "completed",
        "input": TOOL_INPUT,
        "output": output,
        "title": "ls",
        "time": {"start": 1, "end": 2},
    }
    store.append_part(reply.id, {"type": "tool", "call_id": call_id(i), "tool": TOOL, "state": state})
    store.append_part(reply.id, {"type": "text", "text": REPLY})
    store.finish_message(reply.id, finish="stop", tokens={"input": 100, "output": 20})


def write_turns(
    store: SessionStore, session_id: str, start: int, count: int, *, output: str = OUTPUT, chunk: int = 100
) -> None:
    """Turns ``start`` … ``start + count - 1``, ``chunk`` turns per transaction."""
    for first in range(start, start + count, chunk):
        with store.batch():
            for i in range(first, min(first + chunk, start + count)):
                write_turn(store, session_id, i, output)


def write_compaction(store: SessionStore, session_id: str) -> None:
    """A completed compaction: a user message holding a compaction part and its finished summary."""
    with store.batch():
        user = store.append_message(session_id, "user")
        store.append_part(user.id, {"type": "compaction", "auto": True})
        summary = store.append_message(
            session_id, "assistant", parent_id=user.id, summary=True, mode="compaction", agent="compaction"
        )
        store.append_part(
            summary.id, {"type": "text", "text": "Summary: the work so far, the files touched, the next steps."}
        )
        store.finish_message(summary.id, finish="stop", tokens={"input": 5000, "output": 400})


def build_compacted(
    store: SessionStore,
    path: Path,
    messages: int,
    *,
    tail: int = 200,
    output_bytes: int = len(OUTPUT),
    history_output_bytes: int | None = None,
    block_turns: int = 249,
) -> str:
    """A session of ``messages`` messages whose last completed boundary is ``tail`` messages back: the view
    (``filter_compacted``) is the compaction pair and ``tail - 2`` tail messages. Returns the session id.

    The history before it is a block of ``block_turns`` turns and a completed compaction, written through the
    API, then copied (``copy_messages``) until it is long enough: a long session compacted every
    ``2 * block_turns + 2`` messages. Then the last compaction and the tail go through the API."""
    if messages < tail or tail < 2 or tail % 2:
        raise ValueError(f"need an even tail of at least 2 and messages >= tail, got {messages=} {tail=}")
    session_id = store.create_session(title=f"{messages} messages").id
    history = messages - tail
    block = 2 * block_turns + 2
    history_output = "y" * (output_bytes if history_output_bytes is None else history_output_bytes)
    if history >= block:
        write_turns(store, session_id, 0, block_turns, output=history_output)
        write_compaction(store, session_id)
        copy_messages(path, session_id, first_seq=1, block_messages=block, count=(history - block) // 2 * 2)
    else:
        write_turns(store, session_id, 0, history // 2, output=history_output)
    if history % 2:
        store.append_message(session_id, "user")
    write_compaction(store, session_id)
    write_turns(store, session_id, history // 2 + 1, (tail - 2) // 2, output="z" * output_bytes)
    found = store.get_session(session_id).message_count
    view = len(store.filter_compacted(session_id))
    if found != messages or view != tail:
        raise AssertionError(f"built {found} messages with a view of {view}, wanted {messages} and {tail}")
    return session_id


def build_plain(
    store: SessionStore, path: Path, messages: int, *, output_bytes: int = len(OUTPUT), block_turns: int = 250
) -> str:
    """A session of ``messages`` messages (whole turns) and no compaction: a block of turns written through
    the API, copied until it is long enough. Returns the session id."""
    if messages % 2:
        raise ValueError(f"a session of whole turns has an even number of messages, got {messages}")
    session_id = store.create_session(title=f"{messages} messages, no boundary").id
    block = min(messages // 2, block_turns)
    write_turns(store, session_id, 0, block, output="y" * output_bytes)
    if messages > 2 * block:
        copy_messages(path, session_id, first_seq=1, block_messages=2 * block, count=messages - 2 * block)
    if store.get_session(session_id).message_count != messages:
        raise AssertionError(f"built {store.get_session(session_id).message_count} messages, wanted {messages}")
    return session_id


# -- bulk copies -----------------------------------------------------------------------------------------------

_ID_COLUMNS = {
    "messages": ("id", "parent_id"),
    "parts": ("id", "message_id"),
    "tool_states": ("part_id",),
    "tool_outputs": ("part_id",),
}


def copy_messages(
    path: Path, session_id: str, *, first_seq: int, block_messages: int, count: int, chunk: int = 5000
) -> None:
    """Append ``count`` messages to a session by copying, row for row, the block of messages from
    ``first_seq`` on (``block_messages`` long, whole turns) over and over, with new ids and seqs.

    Every column the store wrote is copied as stored (raw values, JSON text included), so the copies read
    back exactly like the block. New ids sort after the block's and before any id made later. The
    session's ``last_seq`` moves on by ``count``. One transaction per ``chunk`` messages.
    """
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        block = _read_block(conn, session_id, first_seq, block_messages)
        last_seq = conn.execute("SELECT last_seq FROM sessions WHERE id = ?", (session_id,)).fetchone()[0]
        stamp = new_id("message")[4:16]  # the time-ordered body of a fresh id; a counter follows it
        counter = iter(range(10**14))
        pending: dict[str, list[tuple]] = {table: [] for table in _ID_COLUMNS}
        ids: dict[str, str] = {}
        for n in range(count):
            if n % block_messages == 0:
                ids = {}
            message = block.messages[n % block_messages]
            ids[message[0]] = f"msg_{stamp}{next(counter):014d}"
            pending["messages"].append(block.copy("messages", message, ids, seq=last_seq + n + 1))
            for part in block.parts.get(message[0], ()):
                ids[part[0]] = f"prt_{stamp}{next(counter):014d}"
                pending["parts"].append(block.copy("parts", part, ids))
                for table in ("tool_states", "tool_outputs"):
                    row = block.rows[table].get(part[0])
                    if row is not None:
                        pending[table].append(block.copy(table, row, ids))
            if len(pending["messages"]) >= chunk or n == count - 1:
                conn.execute("BEGIN IMMEDIATE")
                _flush(conn, block, pending)
                conn.execute("UPDATE sessions SET last_seq = ? WHERE id = ?", (last_seq + n + 1, session_id))
                conn.execute("COMMIT")
    finally:
        conn.close()


@dataclass
class _Block:
    """The rows of the block being copied, as stored, and where the columns to rewrite sit in them."""

    columns: dict[str, list[str]]
    messages: list[tuple]
    parts: dict[str, list[tuple]] = field(default_factory=dict)
    rows: dict[str, dict[str, tuple]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.where = {table: [names.index(c) for c in _ID_COLUMNS[table]] for table, names in self.columns.items()}

    def copy(self, table: str, row: tuple, ids: dict[str, str], seq: int | None = None) -> list:
        new = list(row)
        for at in self.where[table]:
            new[at] = ids.get(new[at], new[at])
        if seq is not None:
            new[self.columns[table].index("seq")] = seq
        if table == "tool_states":
            at = self.columns[table].index("call_id")
            new[at] = f"{new[at]}_{new[self.where[table][0]][-8:]}"
        return new


def _read_block(conn: sqlite3.Connection, session_id: str, first_seq: int, size: int) -> _Block:
    def rows(sql: str, args: tuple) -> tuple[list[str], list[tuple]]:
        cursor = conn.execute(sql, args)
        return [d[0] for d in cursor.description], cursor.fetchall()

    columns: dict[str, list[str]] = {}
    args = (session_id, first_seq, first_seq + size)
    columns["messages"], messages = rows(
        "SELECT * FROM messages WHERE session_id = ? AND seq >= ? AND seq < ? ORDER BY seq", args
    )
    if (
        columns["messages"][0] != "id"
        or len(messages) != size
        or messages[0][columns["messages"].index("role")] != "user"
    ):
        raise ValueError(f"the block must be {size} messages of whole turns, starting with a user message")
    inside = "SELECT id FROM messages WHERE session_id = ? AND seq >= ? AND seq < ?"
    columns["parts"], parts = rows(
        f"SELECT * FROM parts WHERE message_id IN ({inside}) ORDER BY message_id, position", args
    )
    found = {}
    for table in ("tool_states", "tool_outputs"):
        columns[table], found[table] = rows(
            f"SELECT t.* FROM {table} t JOIN parts p ON p.id = t.part_id WHERE p.message_id IN ({inside})", args
        )
    block = _Block(columns, messages)
    by = columns["parts"].index("message_id")
    for part in parts:
        block.parts.setdefault(part[by], []).append(part)
    for table, table_rows in found.items():
        key = columns[table].index("part_id")
        block.rows[table] = {row[key]: row for row in table_rows}
    return block


def _flush(conn: sqlite3.Connection, block: _Block, pending: dict[str, list]) -> None:
    for table, rows in pending.items():  # parents before children: messages, parts, tool_states, tool_outputs
        if rows:
            names = block.columns[table]
            quoted = ", ".join(f'"{n}"' for n in names)
            conn.executemany(f"INSERT INTO {table} ({quoted}) VALUES ({', '.join('?' * len(names))})", rows)
            rows.clear()


# -- the raw sqlite3 baseline ------------------------------------------------------------------------------------


@dataclass
class Recording:
    """The calls brutus made on its sqlite3 connection: ``("sql", statement, parameters, executemany)`` and
    ``("commit",)``."""

    calls: list[tuple] = field(default_factory=list)

    @property
    def statements(self) -> int:
        return sum(1 for c in self.calls if c[0] == "sql" and c[1].split()[0].upper() not in ("BEGIN", "COMMIT"))

    @property
    def commits(self) -> int:
        return sum(1 for c in self.calls if c[0] == "commit" or c[1].strip().upper() == "COMMIT")


_recording: Recording | None = None


def _record(call: tuple) -> None:
    if _recording is not None and not (call[0] == "sql" and call[1].lstrip().upper().startswith("PRAGMA")):
        _recording.calls.append(call)


class _RecordingCursor(sqlite3.Cursor):
    def execute(self, sql: str, parameters: Any = (), /) -> Any:  # type: ignore[override]
        _record(("sql", sql, parameters, False))
        return super().execute(sql, parameters)

    def executemany(self, sql: str, seq_of_parameters: Any, /) -> Any:  # type: ignore[override]
        seq_of_parameters = list(seq_of_parameters)
        _record(("sql", sql, seq_of_parameters, True))
        return super().executemany(sql, seq_of_parameters)


class _RecordingConnection(sqlite3.Connection):
    def cursor(self, factory: Any = _RecordingCursor) -> Any:  # type: ignore[override]
        return super().cursor(factory)

    def execute(self, sql: str, parameters: Any = (), /) -> Any:  # type: ignore[override]
        return self.cursor().execute(sql, parameters)

    def executemany(self, sql: str, seq_of_parameters: Any, /) -> Any:  # type: ignore[override]
        return self.cursor().executemany(sql, seq_of_parameters)

    def commit(self) -> None:
        if self.in_transaction:
            _record(("commit",))
        super().commit()


def recording_store(path: Path) -> SessionStore:
    """A store on ``path`` whose sqlite3 connections record what they are sent (see ``recorded``). It is
    a store of its own: the recording costs time, so never time it."""
    store = open_sqlite(path)
    event.listen(
        store.engine, "do_connect", lambda _d, _r, _a, params: params.__setitem__("factory", _RecordingConnection)
    )
    store.close()  # the next call connects again, through the factory
    store.create_session()  # connect (and run the connect pragmas) outside any recording
    return store


@contextmanager
def recorded() -> Iterator[Recording]:
    """Record the statements a ``recording_store`` sends inside the block."""
    global _recording
    _recording = Recording()
    try:
        yield _recording
    finally:
        _recording = None


def raw_connection(path: Path) -> sqlite3.Connection:
    """A plain ``sqlite3`` connection with brutus's settings (WAL, synchronous=NORMAL, foreign keys, the
    checkpoint interval; the page size is the file's, which brutus created)."""
    conn = sqlite3.connect(path, isolation_level=None)
    sqlite_pragmas(conn)
    return conn


def replayer(conn: sqlite3.Connection, recording: Recording) -> Callable[[dict[str, str]], None]:
    """A function that sends ``recording``'s statements again on ``conn``, with the strings in ``ids`` (the
    recorded session, message and part ids) replaced by new ones, fetching every result as brutus does."""
    calls = recording.calls

    def swap(parameters: Any, ids: dict[str, str]) -> Any:
        if isinstance(parameters, dict):
            return {k: ids.get(v, v) if isinstance(v, str) else v for k, v in parameters.items()}
        return tuple(ids.get(p, p) if isinstance(p, str) else p for p in parameters)

    def replay(ids: dict[str, str]) -> None:
        for call in calls:
            if call[0] == "commit":
                conn.commit()
                continue
            _, statement, parameters, many = call
            if many:
                cursor = conn.executemany(statement, [swap(p, ids) for p in parameters])
            else:
                cursor = conn.execute(statement, swap(parameters, ids))
            if cursor.description is not None:
                cursor.fetchall()

    return replay
