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
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import Any

from sqlalchemy import JSON, Text, bindparam, cast, column, func, insert, select
from sqlalchemy.sql import Executable
from sqlalchemy.sql.dml import Insert

from ..codec import JSONText, dumps_json
from .statements import INSERT_MESSAGE, INSERT_PART, INSERT_TOOL_OUTPUT, INSERT_TOOL_STATE

__all__ = ["BULK_INSERTS", "insert_rows"]

# The inserts whose rows go in as one statement on PostgreSQL; every row names the same columns.
BULK_INSERTS: frozenset[Executable] = frozenset({INSERT_MESSAGE, INSERT_PART, INSERT_TOOL_STATE, INSERT_TOOL_OUTPUT})
# One statement carries at most this many rows and about this many characters of text: a whole imported
# history stays many modest parameters, never one the server cannot allocate (PostgreSQL's limit is 1 GB).
CHUNK_ROWS = 2_000
CHUNK_CHARS = 32 * 1024 * 1024


def insert_rows(connection: Any, statement: Insert, rows: list[dict[str, Any]]) -> None:
    """Insert ``rows`` (dicts naming the same columns) with ``statement``'s table on the SQLAlchemy
    ``connection``, a chunk of rows per statement."""
    table = statement.table
    keys = tuple(rows[0])
    json_keys = [key for key in keys if isinstance(table.c[key].type, JSON)]
    query = _from_recordset(table, keys)
    for chunk in _chunks(rows):
        if json_keys:
            chunk = [_json_as_text(row, json_keys) for row in chunk]
        connection.execute(query, {"b_rows": chunk})


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
    record = (
        func.json_to_recordset(bindparam("b_rows", type_=JSON))
        .table_valued(*(column(c.name, Text if isinstance(c.type, JSON) else c.type) for c in columns))
        .render_derived(name="r", with_types=True)
    )
    values = [cast(record.c[c.name], c.type) if isinstance(c.type, JSON) else record.c[c.name] for c in columns]
    return insert(table).from_select(columns, select(*values), include_defaults=False)
