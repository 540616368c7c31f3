"""Packed metadata (migration 0009): on SQLite a large ``metadata`` is stored zlib-compressed with its size
beside it, read back exactly by brutus and by the ``sqlite3`` shell's ``sqlar_uncompress``; on PostgreSQL
nothing is packed (TOAST compresses). Every hostile text round-trips through the packed form too."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from sqlalchemy import text

from brutus import SessionStore
from brutus.codec import PACK_MIN
from brutus.db import migrate
from brutus.db.engine import make_engine

from test_bad_input import NASTY

FILLER = "the same line of a file, again and again\n" * 40  # 1,640 characters: packed


def _tool(state: dict) -> dict:
    return {"type": "tool", "call_id": "call", "tool": "bash", "state": state}


def _stored(url: str, table: str) -> list[tuple]:
    """(metadata as stored, metadata_size) of every row of ``table``, in rowid order (SQLite) or any order."""
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            order = "rowid" if url.startswith("sqlite") else "metadata_size"
            query = f"SELECT metadata, metadata_size FROM {table} WHERE metadata IS NOT NULL ORDER BY {order}"
            if url.startswith("sqlite"):
                return [tuple(r) for r in conn.exec_driver_sql(query)]
            return [tuple(r) for r in conn.execute(text(query))]
    finally:
        engine.dispose()


@pytest.mark.parametrize("value", NASTY, ids=range(len(NASTY)))
def test_large_metadata_round_trips_exactly(store: SessionStore, store_url: str, value: str) -> None:
    big = {value: [value, FILLER + value], "n": 1}
    ses = store.create_session()
    msg = store.append_message(ses.id, "assistant", metadata=big)
    tool = store.append_part(msg.id, _tool({"status": "pending", "input": {}}))
    store.update_tool(tool.id, status="running", metadata=big)
    store.update_tool(tool.id, status="completed", output=value)  # carries the metadata over: packed again
    [loaded] = store.messages(ses.id)
    assert loaded.info.metadata == big
    assert loaded.parts[0].state.metadata == big
    assert store.finish_message(msg.id, finish="stop").metadata == big  # a row read back by RETURNING

    stored = _stored(store_url, "messages") + _stored(store_url, "tool_states")
    if store_url.startswith("sqlite"):
        for data, size in stored:
            assert type(data) is bytes and size > len(data) >= 1
    else:
        assert [size for _, size in stored] == [None, None]


def test_small_metadata_is_stored_as_it_is(store: SessionStore, store_url: str) -> None:
    small = {"k": "v" * (PACK_MIN - 20)}  # its JSON text is shorter than PACK_MIN
    ses = store.create_session()
    store.append_message(ses.id, "user", metadata=small)
    [(data, size)] = _stored(store_url, "messages")
    assert size is None
    assert (json.loads(data) if isinstance(data, str) else data) == small


def test_multi_megabyte_metadata_round_trips(store: SessionStore, store_url: str) -> None:
    huge = {"file": "\x00".join(f"line {i}: {FILLER[:60]}" for i in range(60_000)), "tail": "\ud800\ue000"}  # 4.6 MB
    ses = store.create_session()
    store.append_messages(
        ses.id,
        [{"info": {"role": "assistant", "metadata": huge}, "parts": [_tool({"status": "completed", "input": {},
                                                                            "output": "ok", "metadata": huge})]}],
    )
    [loaded] = store.messages(ses.id)
    assert loaded.info.metadata == huge and loaded.parts[0].state.metadata == huge
    if store_url.startswith("sqlite"):
        [(data, size)] = _stored(store_url, "messages")
        assert size > 4_000_000 and len(data) < size / 10


@pytest.mark.parametrize("backend", ["sqlite"])
def test_the_sqlite3_shell_reads_packed_and_plain_metadata(store: SessionStore, store_url: str) -> None:
    shell = shutil.which("sqlite3")
    assert shell is not None, "the sqlite3 shell (Debian's sqlite3) is part of the test environment"
    ses = store.create_session()
    values = [{"big": FILLER + "é 漢字 \ue000"}, {"small": "x"}, None]
    for value in values:
        store.append_message(ses.id, "user", metadata=value)
    path = store_url.removeprefix("sqlite:///")
    out = subprocess.run(
        [shell, "-json", path, "SELECT CAST(sqlar_uncompress(metadata, metadata_size) AS TEXT) AS m FROM messages ORDER BY seq"],
        capture_output=True, text=True, check=True,
    ).stdout
    read = [None if row["m"] is None else json.loads(row["m"]) for row in json.loads(out)]
    # brutus's own escape for U+E000 is part of the stored text; brutus's reader decodes it
    assert read == [{"big": FILLER + "é 漢字 \ue000\ue000"}, {"small": "x"}, None]


@pytest.mark.parametrize("backend", ["sqlite"])
def test_downgrade_unpacks_and_upgrade_reads_the_same(store_url: str) -> None:
    big = {"diff": FILLER, "when": 1}
    with SessionStore.open(store_url) as s:
        ses = s.create_session()
        s.append_messages(ses.id, [{"info": {"role": "user", "metadata": big}, "parts": [
            _tool({"status": "completed", "input": {}, "output": "x", "metadata": big})]} for _ in range(3)])
        before = s.messages(ses.id)
    assert all(type(data) is bytes for data, _ in _stored(store_url, "messages"))

    engine = make_engine(store_url)
    try:
        migrate.downgrade(engine, "0008")
    finally:
        engine.dispose()
    path = Path(store_url.removeprefix("sqlite:///"))
    conn = sqlite3.connect(path)
    try:
        for table in ("messages", "tool_states"):
            rows = conn.execute(f"SELECT metadata FROM {table} WHERE metadata IS NOT NULL").fetchall()
            assert [json.loads(m) for (m,) in rows] == [big] * 3  # plain JSON text again
            assert "metadata_size" not in [c[1] for c in conn.execute(f"PRAGMA table_info({table})")]
    finally:
        conn.close()
    with SessionStore.open(store_url) as s:  # upgrades again
        assert s.messages(ses.id) == before
