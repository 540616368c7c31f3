"""Packed values: SQLite stores a large ``metadata`` (of a message or a tool state) and a large tool output
zlib-compressed, its size beside it.

What the importers keep beside each row (OpenCode's ``summary.diffs`` with whole files before and after, Claude
Code's ``toolUseResult`` with the file an edit changed) is most of an imported database: 11.1 of 24.9 MB for the
test corpus, more than twice the text its sessions hold; it is JSON that nothing searches or filters on, and it
compresses 3.5x. Tool outputs are most of the text itself, and compress 3x.

- ``messages.metadata_size``, ``tool_states.metadata_size`` and ``tool_outputs.output_size`` (INTEGER, NULL):
  on SQLite, brutus's writes store a value of 4,096 characters or more as zlib bytes when that is smaller
  (``brutus.codec.pack``) and put its UTF-8 size here; NULL means stored as it is. The convention of SQLite's
  archive format: the ``sqlite3`` shell reads either form with its built-in ``sqlar_uncompress(value, size)``,
  and brutus gives its own connections a function of that name.
- The search index reads an output's text through it: the views ``search_documents`` and ``search_pending``
  and the update and delete triggers of ``tool_outputs`` are made again with
  ``CAST(sqlar_uncompress(output, output_size) AS TEXT)`` in place of ``output``. A client that deletes or
  changes a tool output must have the function (brutus, the ``sqlite3`` shell); reading needs nothing but it.
- PostgreSQL compresses large values itself (TOAST): the columns stay NULL there, nothing else changes.
- Upgrade adds the columns and remakes the views and triggers: rows written before keep their plain form (brutus
  reads both), so the upgrade of a large file rewrites no row. Downgrade drops the views and triggers, writes
  every packed value back as text (the index holds the same text), restores 0005's and drops the columns.

One transaction: the caller's (``brutus.db.migrate``).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-27
"""
import importlib.util
import zlib
from pathlib import Path
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0009'
down_revision: Union[str, Sequence[str], None] = '0008'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def _revision(name: str):
    """An older revision's module, for its definitions (an old revision is read, never changed)."""
    spec = importlib.util.spec_from_file_location(f"brutus_revision_{name[:4]}", Path(__file__).with_name(name))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


R0005 = _revision("0005_search_off_the_write_path.py")
R0004 = R0005.REVISION_0004
LIMIT = R0004.LIMIT

# (table, column): the packed columns, each with ``<column>_size``
PACKED = (('messages', 'metadata'), ('tool_states', 'metadata'), ('tool_outputs', 'output'))
UNPACK_BATCH = 500
# constant statements per column (no SQL is built from values)
READ_PACKED = {
    (table, column): f"SELECT rowid, {column} FROM {table} "
    f"WHERE {column}_size IS NOT NULL AND rowid > :after ORDER BY rowid LIMIT :n"
    for table, column in PACKED
}
WRITE_PLAIN = {
    (table, column): f"UPDATE {table} SET {column} = :text, {column}_size = NULL WHERE rowid = :rid"
    for table, column in PACKED
}


def _packed_output(row: str) -> str:
    return f"substr(CAST(sqlar_uncompress({row}.output, {row}.output_size) AS TEXT), 1, {LIMIT})"


def _documents_view(output) -> str:
    return (
        "CREATE VIEW search_documents AS SELECT k.key AS key, CASE k.kind "
        f"WHEN 0 THEN {R0004._sqlite_text('p')} WHEN 1 THEN {R0004._sqlite_call('t')} ELSE {output('o')} END AS body "
        "FROM search_keys k LEFT JOIN parts p ON k.kind = 0 AND p.id = k.part_id "
        "LEFT JOIN tool_states t ON k.kind = 1 AND t.part_id = k.part_id "
        "LEFT JOIN tool_outputs o ON k.kind = 2 AND o.part_id = k.part_id"
    )


def _search_objects(output) -> list[str]:
    """The views and the ``tool_outputs`` triggers, with an output's text read by ``output``."""
    tables = [(t, i, k, output if t == 'tool_outputs' else b, c, w) for t, i, k, b, c, w in R0005.TABLES]
    pending = "CREATE VIEW search_pending AS " + " UNION ALL ".join(
        R0005._pending_select(t, i, k, b, w) for t, i, k, b, _, w in tables
    )
    triggers = [trigger for t, i, k, b, c, _ in tables if t == 'tool_outputs' for trigger in R0005._triggers(t, i, k, b, c)]
    return [_documents_view(output), pending, *triggers]


DROP_SEARCH_OBJECTS = [
    "DROP VIEW search_documents",
    "DROP VIEW search_pending",
    "DROP TRIGGER search_tool_outputs_update",
    "DROP TRIGGER search_tool_outputs_delete",
]


def upgrade() -> None:
    for table, column in PACKED:
        op.add_column(table, sa.Column(f'{column}_size', sa.Integer(), nullable=True))
    if op.get_bind().dialect.name == 'sqlite':
        for statement in [*DROP_SEARCH_OBJECTS, *_search_objects(_packed_output)]:
            op.execute(statement)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == 'sqlite':
        for statement in DROP_SEARCH_OBJECTS:  # no trigger while outputs are written back: their text is the same
            op.execute(statement)
        for key in PACKED:
            after = 0
            while True:
                rows = bind.execute(sa.text(READ_PACKED[key]), {'after': after, 'n': UNPACK_BATCH}).fetchall()
                if not rows:
                    break
                plain = [{'text': zlib.decompress(data).decode('utf-8'), 'rid': rid} for rid, data in rows]
                bind.execute(sa.text(WRITE_PLAIN[key]), plain)
                after = rows[-1][0]
        for statement in _search_objects(R0004._sqlite_output):
            op.execute(statement)
    for table, column in PACKED:
        op.drop_column(table, f'{column}_size')
