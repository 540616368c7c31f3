"""The SQLite driver binds and reads every column as SQLAlchemy does: each column type's own bind and result
processors, computed once per plan. A row of every table in ``brutus.db.tables`` written and read through the
driver equals the same row written and read through SQLAlchemy Core (on SQLite, the same engine; on PostgreSQL,
Core there: what SQLite reads is what PostgreSQL reads); columns a statement leaves out get their defaults as
through Core; and types the driver has never seen (a ``TypeDecorator``, ``DateTime``, ``Enum``, ``Uuid``) read
and bind the same way through both."""

from __future__ import annotations

import datetime
import enum
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    DateTime,
    Engine,
    Enum,
    Integer,
    MetaData,
    Table,
    Text,
    TypeDecorator,
    Uuid,
    bindparam,
    delete,
    insert,
    select,
    text,
)

from brutus import SessionStore
from brutus.codec import PACK_MIN, dumps_json, unpack
from brutus.db.engine import make_engine
from brutus.db.sqlite_driver import SQLiteDriver, prebuilt, sqlite_begin, sqlite_end
from brutus.db.tables import PACKED_TYPES, Base

TABLES = Base.metadata.sorted_tables  # parents first
JSON_VALUE = {"text": "é漢🤖 \\ \"quoted\"", "n": [1, 2.5, None, True, False], "nested": {"k": {}}}

# One row per table, every column set (no value its column's default), small enough that nothing is packed.
ROWS: dict[str, dict[str, Any]] = {
    "sessions": {
        "id": "s1", "parent_id": None, "title": "a title é漢", "directory": "/proj", "created_at": 2**40,
        "updated_at": 2**40 + 1, "archived_at": 7, "last_seq": 3, "boundary_message_id": "m1", "boundary_seq": 2,
        "forked_from": "s0", "forked_at": "m9",
    },
    "messages": {
        "id": "m1", "session_id": "s1", "seq": 1, "role": "assistant", "parent_id": "m0", "agent": "build",
        "mode": "plan", "provider_id": "anthropic", "model_id": "claude", "summary": True, "synthetic": True,
        "finish": "stop", "error": JSON_VALUE, "cost": 0.125, "tokens_input": 2**33, "tokens_output": 5,
        "tokens_reasoning": 6, "tokens_cache_read": 7, "tokens_cache_write": 8, "part_count": 1,
        "token_estimate": 9, "metadata": {"k": ["v", 1]}, "created_at": 10, "completed_at": 11, "metadata_size": None,
    },
    "parts": {
        "id": "p1", "session_id": "s1", "message_id": "m1", "position": 0, "type": "tool", "data": JSON_VALUE,
        "tokens": 12, "created_at": 13, "updated_at": 14,
    },
    "tool_states": {
        "part_id": "p1", "session_id": "s1", "call_id": "call_1", "tool": "bash", "status": "completed",
        "input": {"cmd": "ls"}, "output_tokens": 15, "title": "ran", "metadata": {"exit": 0}, "error": "none",
        "started_at": 16, "ended_at": 17, "compacted_at": 18, "metadata_size": None,
    },
    "tool_outputs": {"part_id": "p1", "output": "line one\nline two é", "output_size": None},
    "compactions": {
        "id": "c1", "session_id": "s1", "user_message_id": "m1", "summary_message_id": "m1", "trigger": "overflow",
        "auto": True, "overflow": True, "tail_start_id": "m1", "status": "completed", "pre_tokens": 19,
        "post_tokens": 20, "model": "haiku", "cost": 0.5, "error": "e", "instructions": "keep it short",
        "fallback_used": "extractive", "boundary": JSON_VALUE, "created_at": 21, "completed_at": 22,
    },
    "transcripts": {
        "session_id": "s1", "sdk": "claude", "project_key": "proj", "external_id": "ext", "subpath": "",
        "last_seq": 23, "mtime": 24, "summary": [JSON_VALUE], "state": {"offset": 25}, "created_at": 26,
    },
    "transcript_entries": {
        "session_id": "s1", "seq": 1, "uuid": "u1", "type": "user", "call_id": "call_1", "message_id": "m1",
        "part_id": "p1", "entry": JSON_VALUE,
    },
}

INSERTS = {table.name: prebuilt(insert(table)) for table in TABLES}
SELECTS = {table.name: prebuilt(select(table).order_by(*table.primary_key.columns)) for table in TABLES}
CLEAR = [delete(table) for table in reversed(TABLES)]


def _minimal(table: Table) -> dict[str, Any]:
    """``ROWS[table]`` without the columns that have a default: what an INSERT that leaves them out writes."""
    return {key: value for key, value in ROWS[table.name].items() if table.c[key].default is None}


class _Driver:
    """The SQLite driver on one pooled sqlite3 connection of ``engine``, each call its own transaction."""

    def __init__(self, engine: Engine) -> None:
        self.driver = SQLiteDriver(engine.dialect)
        self.pooled = engine.raw_connection()
        self.dbapi = self.pooled.driver_connection

    def write(self, rows: dict[str, dict[str, Any]]) -> None:
        sqlite_begin(self.dbapi, True)
        for table in TABLES:
            self.driver.execute(self.dbapi, INSERTS[table.name], rows[table.name], "none")
        sqlite_end(self.dbapi, True)

    def read(self) -> dict[str, list[tuple[Any, ...]]]:
        return {table.name: self.rows(SELECTS[table.name]) for table in TABLES}

    def rows(self, statement: Any, params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self.driver.execute(self.dbapi, statement, params, "all")]

    def close(self) -> None:
        self.pooled.close()


def _core_write(engine: Engine, rows: dict[str, dict[str, Any]]) -> None:
    with engine.begin() as conn:
        for table in TABLES:
            conn.execute(INSERTS[table.name], [rows[table.name]])


def _core_read(engine: Engine) -> dict[str, list[tuple[Any, ...]]]:
    with engine.connect() as conn:
        return {table.name: [tuple(r) for r in conn.execute(SELECTS[table.name])] for table in TABLES}


def _clear(engine: Engine) -> None:
    with engine.begin() as conn:
        for statement in CLEAR:
            conn.execute(statement)


@pytest.fixture
def sqlite_engine(tmp_path) -> Iterator[Engine]:
    url = f"sqlite:///{tmp_path / 'driver.db'}"
    SessionStore.open(url).close()  # migrated: the size columns of 0009 too
    engine = make_engine(url)
    yield engine
    engine.dispose()


@pytest.fixture
def core_engine(store_url: str) -> Iterator[Engine]:
    """An engine on a migrated database with empty tables of the backend under test."""
    engine = make_engine(store_url)
    yield engine
    engine.dispose()


def test_the_rows_cover_every_column_of_every_table() -> None:
    assert set(ROWS) == {table.name for table in TABLES}
    for table in TABLES:
        assert list(ROWS[table.name]) == table.c.keys(), table.name
        assert all(ROWS[table.name][c.key] != c.default.arg for c in table.c if c.default is not None), table.name


@pytest.mark.parametrize("rows", [ROWS, {t.name: _minimal(t) for t in TABLES}], ids=["every column", "defaults"])
def test_every_table_reads_through_the_driver_as_through_core(
    sqlite_engine: Engine, core_engine: Engine, backend: str, rows: dict[str, dict[str, Any]]
) -> None:
    _core_write(core_engine, rows)
    expected = _core_read(core_engine)
    assert all(expected[table.name] for table in TABLES)
    driver = _Driver(sqlite_engine)
    try:
        driver.write(rows)
        assert driver.read() == expected
        assert _core_read(sqlite_engine) == expected  # the driver stored what Core stores
        if backend == "sqlite":  # and on the same engine, Core's row reads the same through the driver
            _clear(sqlite_engine)
            _core_write(sqlite_engine, rows)
            assert driver.read() == expected
    finally:
        driver.close()


def test_packed_columns_read_back_unpacked_with_their_sizes(sqlite_engine: Engine) -> None:
    big_json = {"lines": ["the same line é\n"] * (PACK_MIN // 8)}
    big_text = "an output line é漢\n" * (PACK_MIN // 8)
    # the size columns left out, as brutus's statements leave them: the driver adds them where it packs
    rows = {name: {k: v for k, v in row.items() if not k.endswith("_size")} for name, row in ROWS.items()}
    rows["messages"]["metadata"] = rows["tool_states"]["metadata"] = big_json
    rows["tool_outputs"]["output"] = big_text
    _core_write(sqlite_engine, rows)
    expected = _core_read(sqlite_engine)
    _clear(sqlite_engine)
    driver = _Driver(sqlite_engine)
    try:
        driver.write(rows)
        read = driver.read()
    finally:
        driver.close()
    for table in TABLES:
        for at, column in enumerate(table.c):
            got, want = read[table.name][0][at], expected[table.name][0][at]
            if isinstance(column.type, PACKED_TYPES):
                assert type(got) is (bytes if isinstance(column.type, Text) else dict)
                assert (unpack(got) if type(got) is bytes else got) == want
            elif column.key.endswith("_size"):  # the driver writes the size of what it packed; Core writes none
                assert (got, want) == (_utf8(rows[table.name][column.key.removesuffix("_size")]), None)
            else:
                assert got == want, (table.name, column.key)


def _utf8(value: Any) -> int:
    """The UTF-8 size of the text a packed column stores for ``value`` (its size column's value)."""
    return len((value if type(value) is str else dumps_json(value)).encode())


# -- types the driver has never seen -----------------------------------------------------------------------------


class Tenths(TypeDecorator[float]):
    """A number stored as an integer count of tenths."""

    impl = Integer
    cache_ok = True

    def process_bind_param(self, value: float | None, dialect: Any) -> int | None:
        return None if value is None else round(value * 10)

    def process_result_value(self, value: int | None, dialect: Any) -> float | None:
        return None if value is None else value / 10


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


OTHER = MetaData()
ODD = Table(
    "odd_types",
    OTHER,
    Column("id", Integer, primary_key=True),
    Column("tenths", Tenths),
    Column("at", DateTime),
    Column("color", Enum(Color)),
    Column("key", Uuid),
    Column("flag", Boolean),
    Column("doc", JSON(none_as_null=True)),
)
ODD_INSERT = prebuilt(insert(ODD))
ODD_SELECT = prebuilt(select(ODD).order_by(ODD.c.id))
ODD_BY_TIME = prebuilt(select(ODD).where(ODD.c.at == bindparam("at")).order_by(ODD.c.id))
ODD_ROWS = [
    {"id": 1, "tenths": 2.5, "at": datetime.datetime(2026, 11, 27, 5, 48, 51, 123456), "color": Color.GREEN,
     "key": uuid.UUID(int=2**100), "flag": False, "doc": JSON_VALUE},
    {"id": 2, "tenths": None, "at": datetime.datetime(2026, 1, 1), "color": None, "key": None, "flag": None,
     "doc": None},
]


@pytest.mark.parametrize("writer", ["driver", "core"])
def test_types_the_driver_has_never_seen_bind_and_read_as_through_core(sqlite_engine: Engine, writer: str) -> None:
    OTHER.create_all(sqlite_engine)
    driver = _Driver(sqlite_engine)
    try:
        if writer == "driver":
            sqlite_begin(driver.dbapi, True)
            driver.driver.execute(driver.dbapi, ODD_INSERT, ODD_ROWS, "none")
            sqlite_end(driver.dbapi, True)
        else:
            with sqlite_engine.begin() as conn:
                conn.execute(ODD_INSERT, ODD_ROWS)
        with sqlite_engine.connect() as conn:
            stored = conn.execute(text("SELECT tenths, at, color, key, flag FROM odd_types ORDER BY id")).all()
            core = [tuple(r) for r in conn.execute(ODD_SELECT)]
            core_by_time = [tuple(r) for r in conn.execute(ODD_BY_TIME, {"at": ODD_ROWS[0]["at"]})]
        assert [tuple(r) for r in stored] == [
            (25, "2026-11-27 05:48:51.123456", "GREEN", uuid.UUID(int=2**100).hex, 0),
            (None, "2026-01-01 00:00:00.000000", None, None, None),
        ]
        assert core == [tuple(row.values()) for row in ODD_ROWS]
        assert driver.rows(ODD_SELECT) == core
        assert driver.rows(ODD_BY_TIME, {"at": ODD_ROWS[0]["at"]}) == core_by_time == core[:1]
    finally:
        driver.close()


def test_a_default_the_driver_cannot_compute_is_refused(sqlite_engine: Engine) -> None:
    """A column whose default is a Python function (run per execution by SQLAlchemy) is refused, not written NULL."""
    metadata = MetaData()
    table = Table("called", metadata, Column("id", Integer, primary_key=True), Column("n", Integer, default=lambda: 5))
    metadata.create_all(sqlite_engine)
    driver = _Driver(sqlite_engine)
    try:
        with pytest.raises(ValueError, match="does not run 'n''s default function"):
            driver.driver.execute(driver.dbapi, insert(table), {"id": 1}, "none")
        assert driver.rows(select(table)) == []
    finally:
        driver.close()
