"""Search: SQLite's full-text index is filled off the write path (PostgreSQL is unchanged).

Why: under 0004 every insert of a part, tool state or tool output ran a trigger that gave its document a key
(a row in ``search_keys`` and its unique index), and every 32nd write transaction put the pending text into
FTS5. That cost an agent's live step 16-18% on SQLite (``benchmarks/bench_search.py``), and search must not
slow the write path measurably. Now an insert runs nothing: the documents not indexed yet are found by the
tables' own rowids.

- ``search_state`` holds, per table, the highest rowid whose document is indexed (``parts_seen``,
  ``tool_states_seen``, ``tool_outputs_seen``); rows above it are pending. SQLite gives a new row the highest
  rowid plus one, so a new row is always above the mark, unless the highest rows were deleted: the delete
  trigger lowers the mark to the highest rowid left, so a number given out again counts as pending.
- An update that changes an indexed document (a row at or below the mark) takes its old text out of FTS5 (a
  contentless table forgets a document only when told its old text), drops its key and lists it in
  ``search_stale``: pending again. An update of a pending row runs nothing. A delete of an indexed row takes
  its text out, its key and its stale entry.
- The view ``search_pending`` (part_id, kind, body) is every pending document. ``brutus.db.search_index``
  indexes it in one write transaction (keys, FTS5, the marks), run by a search before it queries and by
  ``gc``; a search that cannot write (a read-only store) matches the pending documents itself.
- ``gc`` VACUUMs, which may renumber the rowids of tables without an INTEGER PRIMARY KEY: after it, gc
  indexes every document that has no key (not just those above the marks) and sets the marks again.

The FTS5 table, ``search_keys`` (key → part and kind, an INTEGER PRIMARY KEY that VACUUM keeps) and the view
``search_documents`` (key → text) stay as 0004 made them.

One transaction: the caller's (``brutus.db.migrate``).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24
"""
from pathlib import Path
from typing import Sequence, Union
import importlib.util

from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0005'
down_revision: Union[str, Sequence[str], None] = '0004'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

# The documents as 0004 defines them (copies, not imports: later code must not change an old revision).
# Kinds: 0 a part's text, 1 a tool call, 2 a tool output.
LIMIT = 200_000
TEXT_TYPES = "('text', 'reasoning')"


def _text(row: str) -> str:
    return f"substr(json_extract({row}.data, '$.text'), 1, {LIMIT})"


def _call(row: str) -> str:
    strings = f"(SELECT group_concat(j.value, ' ') FROM json_tree({row}.input) AS j WHERE j.type = 'text')"
    return (
        f"substr({row}.tool || ' ' || coalesce({row}.title, '') || ' ' || coalesce({row}.error, '') || ' ' || "
        f"coalesce({strings}, ''), 1, {LIMIT})"
    )


def _output(row: str) -> str:
    return f"substr({row}.output, 1, {LIMIT})"


# table, its part id column, kind, document, the columns the document is made of, which rows have one
TABLES = (
    ("parts", "id", 0, _text, ("type", "data"), "{row}.type IN " + TEXT_TYPES),
    ("tool_states", "part_id", 1, _call, ("tool", "title", "error", "input"), None),
    ("tool_outputs", "part_id", 2, _output, ("output",), None),
)


def _pending_select(table: str, id_column: str, kind: int, body, when: str | None) -> str:
    scope = f" AND {when.format(row=table)}" if when else ""
    return (
        f"SELECT {table}.{id_column} AS part_id, {kind} AS kind, {body(table)} AS body FROM {table} "
        f"WHERE ({table}.rowid > (SELECT {table}_seen FROM search_state) OR {table}.{id_column} IN "
        f"(SELECT part_id FROM search_stale WHERE kind = {kind})){scope}"
    )


def _triggers(table: str, id_column: str, kind: int, body, columns: tuple[str, ...], when: str | None) -> list[str]:
    indexed = f"old.rowid <= (SELECT {table}_seen FROM search_state)"
    keys = f"FROM search_keys WHERE part_id = old.{id_column} AND kind = {kind}"
    forget = (  # FTS5 forgets an indexed document only when told its old text
        f"INSERT INTO search_index(search_index, rowid, body) SELECT 'delete', key, {body('old')} {keys};\n"
        f"  DELETE {keys};"
    )
    newest = f"(SELECT coalesce(max(rowid), 0) FROM {table})"
    stale = f"INSERT OR IGNORE INTO search_stale(part_id, kind) VALUES (new.{id_column}, {kind});"
    changed = " OR ".join(f"old.{c} IS NOT new.{c}" for c in (id_column, *columns))
    of = ", ".join((id_column, *columns))
    scope = f" AND {when.format(row='old')}" if when else ""
    return [
        f"CREATE TRIGGER search_{table}_update AFTER UPDATE OF {of} ON {table} "
        f"WHEN {indexed} AND ({changed}) BEGIN\n  {forget}\n  {stale}\nEND",
        f"CREATE TRIGGER search_{table}_delete AFTER DELETE ON {table} WHEN {indexed}{scope} BEGIN\n  {forget}\n"
        f"  DELETE FROM search_stale WHERE part_id = old.{id_column} AND kind = {kind};\n"
        # the highest rows gone: the next row takes their numbers, which must count as pending
        f"  UPDATE search_state SET {table}_seen = {newest} WHERE {table}_seen > {newest};\nEND",
    ]


OLD_TRIGGERS = [f"search_{table}_{event}" for table, *_ in TABLES for event in ("insert", "delete", "update")]
MARKS = ", ".join(f"{table}_seen" for table, *_ in TABLES)
NEWEST_ROWIDS = ", ".join(f"(SELECT coalesce(max(rowid), 0) FROM {table})" for table, *_ in TABLES)

SQLITE_UPGRADE = [
    # what 0004 left pending goes in first, so every document with a key is in FTS5
    "INSERT INTO search_index(rowid, body) SELECT key, body FROM search_documents "
    "WHERE key > (SELECT indexed FROM search_state)",
    *(f"DROP TRIGGER {name}" for name in OLD_TRIGGERS),
    "DROP TABLE search_state",
    # 0004 gave every document a key: every row is indexed
    f"CREATE TABLE search_state ({', '.join(f'{table}_seen INTEGER NOT NULL' for table, *_ in TABLES)})",
    f"INSERT INTO search_state ({MARKS}) SELECT {NEWEST_ROWIDS}",
    "CREATE TABLE search_stale (part_id VARCHAR(64) NOT NULL, kind INTEGER NOT NULL, PRIMARY KEY (part_id, kind))",
    "CREATE VIEW search_pending AS " + " UNION ALL ".join(_pending_select(t, i, k, b, w) for t, i, k, b, _, w in TABLES),
    *(trigger for spec in TABLES for trigger in _triggers(*spec)),
]


def _revision_0004():
    """0004's module, for its trigger definitions (loaded, not copied: a downgrade restores exactly them)."""
    path = Path(__file__).with_name("0004_search.py")
    spec = importlib.util.spec_from_file_location("brutus_revision_0004", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        return
    for statement in SQLITE_UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        return
    # 0004's state: every document has a key, and every key up to ``indexed`` is in FTS5 (all of them here)
    bind = op.get_bind()
    start = bind.exec_driver_sql("SELECT coalesce(max(key), 0) FROM search_keys").scalar()
    op.execute("INSERT OR IGNORE INTO search_keys(part_id, kind) SELECT part_id, kind FROM search_pending")
    op.execute(f"INSERT INTO search_index(rowid, body) SELECT key, body FROM search_documents WHERE key > {int(start)}")
    for table, *_ in TABLES:
        for event in ("update", "delete"):
            op.execute(f"DROP TRIGGER search_{table}_{event}")
    op.execute("DROP VIEW search_pending")
    op.execute("DROP TABLE search_stale")
    op.execute("DROP TABLE search_state")
    op.execute("CREATE TABLE search_state (indexed INTEGER NOT NULL)")
    op.execute("INSERT INTO search_state (indexed) SELECT coalesce(max(key), 0) FROM search_keys")
    for statement in _revision_0004().SQLITE_TRIGGERS:
        op.execute(statement)
