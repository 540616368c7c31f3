"""Search: the full-text index is filled off the write path, on SQLite and PostgreSQL.

Why: under 0004 every insert of a part, tool state or tool output on SQLite ran a trigger that gave its
document a key (a row in ``search_keys`` and its unique index), and every 32nd write transaction put the
pending text into FTS5: an agent's live step cost 16-18% more (``benchmarks/bench_search.py``). On PostgreSQL
each insert computed its tsvector for the GIN expression indexes, about 0.7 ms for a 2 KB tool output. Search
must not slow the write path measurably. Now an insert computes nothing: the documents not indexed yet are
found by what each row already carries, and a search (or ``gc``) indexes them first, in one transaction of
its own (``brutus.db.search_ops.index_pending``); a search that cannot write (a read-only store) matches the
pending documents itself. The view ``search_pending`` (part_id, kind, body) is every pending document, on
both backends.

SQLite:

- ``search_state`` holds, per table, the highest rowid whose document is indexed (``parts_seen``,
  ``tool_states_seen``, ``tool_outputs_seen``); rows above it are pending. SQLite gives a new row the highest
  rowid plus one, so a new row is always above the mark, unless the highest rows were deleted: the delete
  trigger lowers the mark to the highest rowid left, so a number given out again counts as pending.
- An update that changes an indexed document (a row at or below the mark) takes its old text out of FTS5 (a
  contentless table forgets a document only when told its old text), drops its key and lists it in
  ``search_stale``: pending again. An update of a pending row runs nothing. A delete of an indexed row takes
  its text out, its key and its stale entry.
- Indexing gives each pending document a key, puts the new keys' text into FTS5, clears ``search_stale`` and
  raises the marks.
- ``gc`` VACUUMs, which may renumber the rowids of tables without an INTEGER PRIMARY KEY: after it, gc
  indexes every document that has no key (not just those above the marks) and sets the marks again.

- The FTS5 table, ``search_keys`` (key → part and kind, an INTEGER PRIMARY KEY that VACUUM keeps) and the
  view ``search_documents`` (key → text) stay as 0004 made them.

PostgreSQL:

- The vectors live in ``search_vectors`` (part_id, kind, vector) with a GIN index, in place of 0004's GIN
  expression indexes; a part's vectors go with it (a foreign key, ON DELETE CASCADE), a tool state's or output's
  when it is deleted alone (a statement trigger).
- Each of the three tables gets ``search_xid`` (xid8, default ``pg_current_xact_id()``: the transaction that
  wrote the row; NULL for the rows indexed here), and an update that changes a row's document sets it again
  (a BEFORE UPDATE trigger, its WHEN clause so that other updates run nothing).
- ``search_state.indexed`` is the snapshot (``pg_snapshot``) an index run took before it read: a row is pending
  when its transaction is not visible in it. Concurrent writers commit in any order, which a high-water mark
  (a sequence) would get wrong; a snapshot says exactly which transactions an index run saw.
  ``search_xid >= pg_snapshot_xmin(indexed)`` (a btree index) narrows the rows to the recent ones first.
- Indexing (in one transaction, holding the state row so that two runs take turns): take a snapshot, upsert the
  vectors of the rows pending against the old one, store the new snapshot (a part that is no longer text
  keeps its old vector, which a search leaves out by the part's type). What a run saw beyond its snapshot is indexed again by the next: upserts, so harmless.
- ``brutus_search_vector`` and ``brutus_json_strings`` stay as 0004 made them.

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


def _revision_0004():
    """0004's module: its documents and, for the downgrade, its triggers and indexes (an old revision is read,
    never changed)."""
    path = Path(__file__).with_name("0004_search.py")
    spec = importlib.util.spec_from_file_location("brutus_revision_0004", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


REVISION_0004 = _revision_0004()
# The documents as 0004 defines them. Kinds: 0 a part's text, 1 a tool call, 2 a tool output.
TEXT_TYPES = REVISION_0004.TEXT_TYPES
_text, _call, _output = REVISION_0004._sqlite_text, REVISION_0004._sqlite_call, REVISION_0004._sqlite_output

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


def _triggers(table: str, id_column: str, kind: int, body, columns: tuple[str, ...]) -> list[str]:
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
    return [
        f"CREATE TRIGGER search_{table}_update AFTER UPDATE OF {of} ON {table} "
        f"WHEN {indexed} AND ({changed}) BEGIN\n  {forget}\n  {stale}\nEND",
        # every row at or below the mark, a document or not (a tool part): its number may be the highest
        f"CREATE TRIGGER search_{table}_delete AFTER DELETE ON {table} WHEN {indexed} BEGIN\n  {forget}\n"
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
    *(trigger for t, i, k, b, c, _ in TABLES for trigger in _triggers(t, i, k, b, c)),
]


PG_TEXT_TYPES = TEXT_TYPES
# table, part id column, kind, its document (text, before brutus_search_vector), which rows have one,
# the columns an update must change to change the document
PG_TABLES = (
    ("parts", "id", 0, "data ->> 'text'", f"type IN {PG_TEXT_TYPES}", "OLD.type IS DISTINCT FROM NEW.type OR "
     "(OLD.data ->> 'text') IS DISTINCT FROM (NEW.data ->> 'text')", "type, data"),
    ("tool_states", "part_id", 1,
     "tool || ' ' || coalesce(title, '') || ' ' || coalesce(error, '') || ' ' || coalesce(brutus_json_strings(input), '')",
     None, "OLD.tool IS DISTINCT FROM NEW.tool OR OLD.title IS DISTINCT FROM NEW.title OR "
     "OLD.error IS DISTINCT FROM NEW.error OR OLD.input IS DISTINCT FROM NEW.input", "tool, title, error, input"),
    ("tool_outputs", "part_id", 2, "output", None, "OLD.output IS DISTINCT FROM NEW.output", "output"),
)
PG_OLD_INDEXES = ("ix_parts_search", "ix_tool_states_search", "ix_tool_outputs_search")  # 0004's
PG_PENDING_ROW = (
    "search_xid >= (SELECT pg_snapshot_xmin(indexed) FROM search_state) "
    "AND NOT pg_visible_in_snapshot(search_xid, (SELECT indexed FROM search_state))"
)


def _pg_vector(document: str) -> str:
    return f"coalesce(brutus_search_vector({document}), ''::tsvector)"


def _pg_upgrade() -> list[str]:
    statements = [
        *(f"DROP INDEX {name}" for name in PG_OLD_INDEXES),
        "CREATE TABLE search_vectors (part_id VARCHAR(64) NOT NULL REFERENCES parts (id) ON DELETE CASCADE, "
        "kind SMALLINT NOT NULL, vector tsvector NOT NULL, PRIMARY KEY (part_id, kind))",
        "CREATE TABLE search_state (indexed pg_snapshot NOT NULL)",
        "INSERT INTO search_state (indexed) VALUES (pg_current_snapshot())",
        "CREATE FUNCTION brutus_search_touch() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN NEW.search_xid := pg_current_xact_id(); RETURN NEW; END $$",
        "CREATE FUNCTION brutus_search_forget() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "DELETE FROM search_vectors v USING gone WHERE v.part_id = gone.part_id AND v.kind = TG_ARGV[0]::smallint; "
        "RETURN NULL; END $$",
    ]
    pending = []
    for table, id_column, kind, document, scope, changed, columns in PG_TABLES:
        where = f" WHERE {scope}" if scope else ""
        statements += [
            f"ALTER TABLE {table} ADD COLUMN search_xid xid8",  # NULL: indexed below
            f"ALTER TABLE {table} ALTER COLUMN search_xid SET DEFAULT pg_current_xact_id()",
            f"CREATE INDEX ix_{table}_search_xid ON {table} (search_xid)",
            f"CREATE TRIGGER search_{table}_touch BEFORE UPDATE OF {columns} ON {table} FOR EACH ROW "
            f"WHEN ({changed}) EXECUTE FUNCTION brutus_search_touch()",
            f"INSERT INTO search_vectors (part_id, kind, vector) SELECT {id_column}, {kind}, {_pg_vector(document)} "
            f"FROM {table}{where}",
        ]
        if kind:
            statements.append(
                f"CREATE TRIGGER search_{table}_forget AFTER DELETE ON {table} REFERENCING OLD TABLE AS gone "
                f"FOR EACH STATEMENT EXECUTE FUNCTION brutus_search_forget('{kind}')"
            )
        pending.append(
            f"SELECT {id_column} AS part_id, {kind} AS kind, {document} AS body FROM {table} "
            f"WHERE {PG_PENDING_ROW}" + (f" AND {scope}" if scope else "")
        )
    statements += [
        "CREATE INDEX ix_search_vectors ON search_vectors USING gin (vector)",
        "CREATE VIEW search_pending AS " + " UNION ALL ".join(pending),
    ]
    return statements


def _pg_downgrade() -> list[str]:
    statements = ["DROP VIEW search_pending", "DROP TABLE search_vectors", "DROP TABLE search_state"]
    for table, _, kind, document, *_ in PG_TABLES:
        statements += [f"DROP TRIGGER search_{table}_touch ON {table}", f"ALTER TABLE {table} DROP COLUMN search_xid"]
        if kind:
            statements.append(f"DROP TRIGGER search_{table}_forget ON {table}")
    statements += ["DROP FUNCTION brutus_search_touch()", "DROP FUNCTION brutus_search_forget()"]
    for name, (table, expression) in REVISION_0004.PG_INDEXES.items():
        statements.append(f"CREATE INDEX {name} ON {table} USING gin (({REVISION_0004._pg_document(expression)}))")
    return statements


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in _pg_upgrade():
            op.execute(statement)
        return
    for statement in SQLITE_UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in _pg_downgrade():
            op.execute(statement)
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
    for statement in REVISION_0004.SQLITE_TRIGGERS:
        op.execute(statement)
