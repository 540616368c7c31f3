"""PostgreSQL: the rows of a bulk insert in one statement, not one statement per row.

``append_messages`` hands each table's rows over as a list (an ``executemany``). psycopg pipelines those, but
each row is still a statement of its own for the server to parse, plan and run (or a server-side prepared
statement, which a transaction-pooling pooler cannot keep across transactions: issue 37), and SQLAlchemy
processes every row's parameters in Python: 100 messages of real history (some 700 rows) took 2.2-2.6x
SQLite's time. ``brutus.store.drive`` sends such a list instead as ``INSERT … SELECT … FROM
json_to_recordset(:b_rows)``, one statement per table (per chunk of a very large call): the rows travel as
one JSON parameter, serialized by the C encoder, and the server reads them in one statement. A JSON column
travels as its JSON text and is cast back to its type, so what is stored equals what the row-by-row insert
stores. It is a plain INSERT: constraints, triggers and row-level security apply to every row (COPY FROM, as
fast in a test of the same rows, refuses tables with row-level security).

An ``append_messages`` whose rows fit one chunk a table (a live step's response or user turn, any call of a few
messages) goes further: the UPDATE that takes the session's seqs and the inserts are one statement
(``appended_in_one``), which the store runs without BEGIN and COMMIT where it may (``brutus.flows.Tx``): one
round trip where there were six.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import Any

from sqlalchemy import JSON, Text, bindparam, cast, column, func, insert, select, true
from sqlalchemy.sql import Executable
from sqlalchemy.sql.dml import Insert

from ..codec import JSONText, dumps_json
from .sqlite_driver import prebuilt
from .statements import INSERT_MESSAGE, INSERT_PART, INSERT_TOOL_OUTPUT, INSERT_TOOL_STATE

__all__ = ["BULK_INSERTS", "appended_in_one", "fits_one_statement", "insert_rows"]

# The inserts whose rows go in as one statement on PostgreSQL; every row names the same columns.
BULK_INSERTS: frozenset[Executable] = frozenset({INSERT_MESSAGE, INSERT_PART, INSERT_TOOL_STATE, INSERT_TOOL_OUTPUT})
# One statement carries at most this many rows and about this many characters of text: a whole imported
# history stays many modest parameters, never one the server cannot allocate (PostgreSQL's limit is 1 GB).
CHUNK_ROWS = 2_000
CHUNK_CHARS = 32 * 1024 * 1024


def insert_rows(statement: Insert, rows: list[dict[str, Any]]) -> Iterator[tuple[Executable, dict[str, Any]]]:
    """The statements (and their parameters) inserting ``rows`` (dicts naming the same columns) into
    ``statement``'s table, a chunk of rows each."""
    table = statement.table
    keys = tuple(rows[0])
    json_keys = [key for key in keys if isinstance(table.c[key].type, JSON)]
    query = _from_recordset(table, keys)
    for chunk in _chunks(rows):
        if json_keys:
            chunk = [_json_as_text(row, json_keys) for row in chunk]
        yield query, {"b_rows": chunk}


def fits_one_statement(rows: list[dict[str, Any]]) -> bool:
    """Whether ``rows`` go in as one chunk (an empty list does: nothing to insert)."""
    return len(rows) <= CHUNK_ROWS and sum(len(v) for row in rows for v in row.values() if isinstance(v, str)) <= CHUNK_CHARS


def appended_in_one(take: Executable, inserts: list[tuple[Insert, list[dict[str, Any]]]]) -> tuple[Executable, dict[str, Any]]:
    """An ``append_messages`` in one statement: ``take`` (the UPDATE taking the session's seqs, RETURNING its
    last_seq) and each insert's rows, one chunk each, as data-modifying CTEs (foreign keys are checked at the
    statement's end, so a part may name a message inserted beside it). A message row's ``seq`` is its place
    (1…n) among the messages: the statement adds the seq before the first taken. When ``take`` updates no
    row (a missing session, an id taken) nothing is inserted and no row comes back. The statement and the
    rows' parameters (``b_rows_<table>``); the statement is built once for each shape (``prebuilt``)."""
    params: dict[str, Any] = {}
    shape = []
    for statement, rows in inserts:
        table = statement.table
        keys = tuple(rows[0])
        json_keys = [key for key in keys if isinstance(table.c[key].type, JSON)]
        params[f"b_rows_{table.name}"] = [_json_as_text(row, json_keys) for row in rows] if json_keys else rows
        shape.append((statement, keys))
    return _in_one(take, tuple(shape)), params


@cache
def _in_one(take: Executable, shape: tuple[tuple[Insert, tuple[str, ...]], ...]) -> Executable:
    taken = take.cte("taken")  # type: ignore[attr-defined]
    inserted = []
    for statement, keys in shape:
        table = statement.table
        columns = [table.c[key] for key in keys]
        record = _record(table, keys, f"b_rows_{table.name}", f"r_{table.name}")
        values = [cast(record.c[c.name], c.type) if isinstance(c.type, JSON) else record.c[c.name] for c in columns]
        if table.name == "messages":  # their seqs end at the one taken
            values[keys.index("seq")] = taken.c.last_seq - bindparam("b_count") + record.c.seq
            rows = select(*values).select_from(taken.join(record, true()))
        else:
            rows = select(*values).select_from(record).where(select(taken.c.last_seq).exists())
        insert_cte = insert(table).from_select(columns, rows, include_defaults=False).cte(f"into_{table.name}")
        inserted.append(insert_cte)
    return prebuilt(select(taken.c.last_seq).add_cte(*inserted))


def _record(table: Any, keys: tuple[str, ...], name: str, alias: str) -> Any:
    """``json_to_recordset(:name) AS alias(key type, …)`` of ``table``'s columns ``keys`` (JSON ones as text)."""
    columns = [table.c[key] for key in keys]
    return (
        func.json_to_recordset(bindparam(name, type_=JSON))
        .table_valued(*(column(c.name, Text if isinstance(c.type, JSON) else c.type) for c in columns))
        .render_derived(name=alias, with_types=True)
    )


def _chunks(rows: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    start, chars = 0, 0
    for end, row in enumerate(rows):
        size = sum(len(value) for value in row.values() if isinstance(value, str))
        if end > start and (end - start >= CHUNK_ROWS or chars + size > CHUNK_CHARS):
            yield rows[start:end]
            start, chars = end, 0
        chars += size
    yield rows[start:]


def _json_as_text(row: dict[str, Any], keys: list[str]) -> dict[str, Any]:
    """``row`` with its JSON values as JSON text (``encode_json`` gives text already, or a walked value)."""
    if all(type(row[key]) is JSONText or row[key] is None for key in keys):
        return row
    return {**row, **{key: None if row[key] is None else JSONText(dumps_json(row[key])) for key in keys}}


@cache
def _from_recordset(table: Any, keys: tuple[str, ...]) -> Executable:
    """``INSERT INTO table (keys) SELECT … FROM json_to_recordset(:b_rows) AS r(key type, …)``; JSON columns
    are read as text and cast back."""
    columns = [table.c[key] for key in keys]
    record = _record(table, keys, "b_rows", "r")
    values = [cast(record.c[c.name], c.type) if isinstance(c.type, JSON) else record.c[c.name] for c in columns]
    return prebuilt(insert(table).from_select(columns, select(*values), include_defaults=False))
