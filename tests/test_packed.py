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

from raw_sqlite import raw_sqlite
from test_bad_input import NASTY
from conftest import plain_url

FILLER = "the same line of a file, again and again\n" * 120  # 4,920 characters: packed


def _tool(state: dict) -> dict:
    return {"type": "tool", "call_id": "call", "tool": "bash", "state": state}


def _stored(url: str, table: str, column: str = "metadata") -> list[tuple]:
    """(``column`` as stored, its size column) of every row of ``table`` that has a value, in rowid order on
    SQLite (any order on PostgreSQL)."""
    order = "rowid" if url.startswith("sqlite") else f"{column}_size"
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            query = f"SELECT {column}, {column}_size FROM {table} WHERE {column} IS NOT NULL ORDER BY {order}"
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


def _readme_sql() -> list[str]:
    """The statements of README's "Inspecting pruned parts with SQL" block."""
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    block = readme.split("## Inspecting pruned parts with SQL", 1)[1].split("```sql\n", 1)[1].split("```", 1)[0]
    statements = " ".join(line for line in block.splitlines() if not line.startswith("--")).split(";")
    return [s.strip() for s in statements if s.strip()]


def _shell(store_url: str, sql: str) -> list[dict]:
    """``sql`` run by the ordinary shell of the backend (``sqlite3``, ``psql``), its rows as dicts."""
    if store_url.startswith("sqlite"):
        command = [shutil.which("sqlite3") or "sqlite3", "-json", store_url.removeprefix("sqlite:///"), sql]
        out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
        return json.loads(out) if out.strip() else []
    url = plain_url(store_url).replace("postgresql+psycopg://", "postgresql://")
    wrapped = f"SELECT coalesce(json_agg(row_to_json(q)), '[]') FROM ({sql}) q"
    out = subprocess.run(["psql", "-X", "-At", url, "-c", wrapped], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def test_readme_operator_sql_runs_in_the_shells(store: SessionStore, store_url: str) -> None:
    """Every statement README shows an operator runs in ``sqlite3`` or ``psql`` as written (the metadata one in
    its psql form on PostgreSQL), on a session with pruned parts and a packed metadata."""
    from builders import Msg, Tool, write_history

    more = [Msg("assistant", tools=[Tool("read", output_bytes=10_000)]) for _ in range(30)]
    session_id = write_history(store, [Msg("user", text="start"), *more, Msg("user", text="turn 1"), Msg("user", text="turn 0")])
    result = store.prune(session_id)
    assert result.pruned == 35_000
    part_id = result.parts[0].id
    kept = {"diff": FILLER}
    message = store.append_message(session_id, "user", metadata=kept)
    sqlite = store_url.startswith("sqlite")
    statements = _readme_sql()
    assert len(statements) == 5
    ids = {"'ses_…'": f"'{session_id}'", "'prt_…'": f"'{part_id}'", "'msg_…'": f"'{message.id}'"}
    results = []
    for sql in statements:
        for placeholder, value in ids.items():
            sql = sql.replace(placeholder, value)
        if not sqlite:  # the psql form README gives
            sql = sql.replace("CAST(sqlar_uncompress(o.output, o.output_size) AS TEXT)", "o.output")
            sql = sql.replace("CAST(sqlar_uncompress(metadata, metadata_size) AS TEXT)", "metadata")
        results.append(_shell(store_url, sql))
    pruned, per_session, outputs, metadata, usage = results
    assert sorted(r["part_id"] for r in pruned) == sorted(p.id for p in result.parts)
    assert per_session == [{"session_id": session_id, "parts": 14, "tokens": 35_000}]
    [row] = outputs
    assert len(row["output"]) == 10_000  # the pruned output is kept, read back whole
    [row] = metadata
    value = next(iter(row.values()))
    assert (json.loads(value) if isinstance(value, str) else value) == kept
    assert [r["session_id"] for r in usage] == [session_id]


@pytest.mark.parametrize("value", NASTY, ids=range(len(NASTY)))
def test_large_output_is_packed_searchable_and_forgotten(store: SessionStore, store_url: str, value: str) -> None:
    output = FILLER + " zebrafinch " + value
    ses = store.create_session()
    msg = store.append_message(ses.id, "assistant")
    tool = store.append_part(msg.id, _tool({"status": "running", "input": {}}))
    store.update_tool(tool.id, status="completed", output=output)
    store.append_messages(ses.id, [{"info": {"role": "assistant"}, "parts": [
        _tool({"status": "completed", "input": {}, "output": output})]}])  # the bulk path
    loaded = store.messages(ses.id)
    assert [m.parts[0].state.output for m in loaded] == [output, output]
    hits = store.search("zebrafinch", limit=10)
    assert [(h.message_id, h.field) for h in hits] == [(loaded[1].info.id, "output"), (msg.id, "output")]
    stored = _stored(store_url, "tool_outputs", "output")
    assert len(stored) == 2
    if store_url.startswith("sqlite"):
        assert all(type(data) is bytes and size > len(data) for data, size in stored)
    else:
        assert [size for _, size in stored] == [None, None]
    store.delete_session(ses.id)  # the triggers unpack each output to take it out of the index
    assert store.search("zebrafinch", limit=10) == []
    assert store.check().problems == []


def test_gc_reports_the_text_bytes_of_packed_outputs(store: SessionStore, store_url: str) -> None:
    from builders import Msg, Tool, write_history

    more = [Msg("assistant", tools=[Tool("read", output_bytes=10_000)]) for _ in range(30)]
    session_id = write_history(store, [Msg("user", text="start"), *more, Msg("user", text="turn 1"), Msg("user", text="turn 0")])
    pruned = store.prune(session_id)
    assert len(pruned.parts) == 14
    if store_url.startswith("sqlite"):
        assert [size for _, size in _stored(store_url, "tool_outputs", "output")].count(10_000) == 30  # every output packed
    result = store.gc(before=2**62)
    assert (result.parts, result.output_bytes) == (14, 140_000)
    assert store.check().problems == []
    assert [p.state.output for m in store.messages(session_id) for p in m.parts if p.type == "tool"].count(None) == 14



@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_damaged_packed_value_is_a_database_error(store: SessionStore, store_url: str) -> None:
    from brutus import DatabaseError

    ses = store.create_session()
    store.append_messages(ses.id, [{"info": {"role": "assistant"}, "parts": [
        _tool({"status": "completed", "input": {}, "output": FILLER})]}])
    conn = raw_sqlite(store_url.removeprefix("sqlite:///"))  # the tool_outputs triggers need sqlar_uncompress
    with conn:  # a byte flipped in the middle of the zlib stream, as a bad disk would
        [(data,)] = conn.execute("SELECT output FROM tool_outputs").fetchall()
        broken = data[:20] + bytes([data[20] ^ 0xFF]) + data[21:]
        conn.execute("UPDATE tool_outputs SET output = ? WHERE output = ?", (broken, data))
    conn.close()
    with pytest.raises(DatabaseError, match="neither packed nor UTF-8"):
        store.messages(ses.id)
