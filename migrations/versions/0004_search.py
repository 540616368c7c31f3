"""Search: a full-text index over the searchable text of every part, built from the rows already there.

Why: ``brutus search`` finds "the session where we fixed X" across every session's full history (turns before
a compaction, summaries, pruned outputs). Three texts of a part are searchable, each a document of its own so
that every write keeps its document exact from the one row it touches: a text or reasoning part's text
(``parts.data``), a tool call (``tool_states``: tool name, title, error and the string values of its input),
and a tool output (``tool_outputs``). Each document reads at most the first 200,000 characters of its text
(PostgreSQL refuses a tsvector over 1 MB; the same limit on SQLite keeps the two backends' answers alike and a
multi-megabyte output from costing its writer the tokenizing of all of it).

- SQLite: a contentless FTS5 table ``search_index`` (the text stays in its own tables, never copied). FTS5
  needs an integer rowid that never changes; the tables' implicit rowids may change on VACUUM (which gc runs),
  so ``search_keys`` hands out one per (part, kind) as an INTEGER PRIMARY KEY (VACUUM keeps those).
  Triggers on the three tables keep the keys current in the writer's own transaction, so every write path
  (appends, tool updates, rewind, session delete through its foreign-key cascades, gc dropping outputs) is
  covered with no code of its own. The text goes into FTS5 in batches: ``search_state.indexed`` is the
  highest key indexed, and the keys above it are pending (a delete of the highest keys lowers it, so a
  number given out again counts as pending). FTS5 writes a segment at every commit that touches it (about
  45 µs, more than the write it indexes); a batch pays that once. brutus's SQLite writers index what is
  pending inside every 32nd write transaction and any bulk one (``brutus.db.search_index``), and a search
  reads the pending documents itself, so it always sees every committed write. A delete (or a changed text) of an
  indexed document gives FTS5 the old text, computed from the row being deleted by the same expression that
  indexed it. The view ``search_documents`` (key, body) is that expression for every key: the batches, the
  backfill and a search of the pending documents read it. (Not external content over the view: FTS5 cannot
  read a view whose column calls json_tree, "SQL logic error" on SQLite 3.40.)
- PostgreSQL: a GIN index on a ``brutus_search_vector(…)`` expression of each table (``to_tsvector('simple',
  …)`` of the text, punctuation made spaces), which the server keeps current itself;
  ``brutus_json_strings(jsonb)`` gives the string values of a tool's input. Both are immutable functions.

Both tokenize words without stemming ('simple', FTS5's unicode61 keeping diacritics as PostgreSQL does):
code, logs and any language alike.

One transaction: the caller's (``brutus.db.migrate``), so a crash leaves the index wholly built or absent.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-26
"""
from typing import Sequence, Union

from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0004'
down_revision: Union[str, Sequence[str], None] = '0003'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

# The documents as this revision defines them (copies, not imports: later code must not change an old
# revision). Kinds: 0 a part's text, 1 a tool call, 2 a tool output.
LIMIT = 200_000


def _sqlite_text(row: str) -> str:
    return f"substr(json_extract({row}.data, '$.text'), 1, {LIMIT})"


def _sqlite_call(row: str) -> str:
    strings = f"(SELECT group_concat(j.value, ' ') FROM json_tree({row}.input) AS j WHERE j.type = 'text')"
    return (
        f"substr({row}.tool || ' ' || coalesce({row}.title, '') || ' ' || coalesce({row}.error, '') || ' ' || "
        f"coalesce({strings}, ''), 1, {LIMIT})"
    )


def _sqlite_output(row: str) -> str:
    return f"substr({row}.output, 1, {LIMIT})"


TEXT_TYPES = "('text', 'reasoning')"
NEWEST = "coalesce((SELECT max(key) FROM search_keys), 0)"

SQLITE_UPGRADE = [
    """CREATE TABLE search_keys (
        key INTEGER PRIMARY KEY,
        part_id VARCHAR(64) NOT NULL,
        kind INTEGER NOT NULL,
        CONSTRAINT uq_search_keys_part_id_kind UNIQUE (part_id, kind)
    )""",
    f"""CREATE VIEW search_documents AS
    SELECT k.key AS key,
           CASE k.kind WHEN 0 THEN {_sqlite_text('p')} WHEN 1 THEN {_sqlite_call('t')} ELSE {_sqlite_output('o')} END AS body
    FROM search_keys k
    LEFT JOIN parts p ON k.kind = 0 AND p.id = k.part_id
    LEFT JOIN tool_states t ON k.kind = 1 AND t.part_id = k.part_id
    LEFT JOIN tool_outputs o ON k.kind = 2 AND o.part_id = k.part_id""",
    "CREATE VIRTUAL TABLE search_index USING fts5(body, content='', tokenize='unicode61 remove_diacritics 0')",
    "CREATE TABLE search_state (indexed INTEGER NOT NULL)",  # one row: the highest key in search_index
    "INSERT INTO search_state (indexed) VALUES (0)",
]


def _sqlite_triggers(table: str, id_column: str, kind: int, body, columns: tuple[str, ...], when: str | None) -> list[str]:
    """Insert, delete and update triggers keeping the documents of ``kind`` current with ``table``: ``columns``
    are those the document is made of, ``when`` (a condition on ``{row}``) says which rows have one. The update
    trigger fires only when an update sets one of ``columns`` to another value (a tool's status or a part's
    token count change no document)."""
    def scope(row: str) -> str:
        return when.format(row=row) if when else "1"

    keys = f"FROM search_keys WHERE part_id = {{row}}.{id_column} AND kind = {kind}"
    drop = (  # FTS5 forgets an indexed document only when told its old text; a pending one is not in it yet
        f"INSERT INTO search_index(search_index, rowid, body) SELECT 'delete', key, {body('old')} "
        f"{keys.format(row='old')} AND key <= (SELECT indexed FROM search_state);\n"
        f"  DELETE {keys.format(row='old')};\n"
        # the highest key gone: the next one takes its number, which must count as pending again
        f"  UPDATE search_state SET indexed = {NEWEST} WHERE indexed > {NEWEST};"
    )
    insert = f"INSERT INTO search_keys(part_id, kind) VALUES (new.{id_column}, {kind});"  # pending
    # the new row may have no document (a part that is no longer text): the condition says
    reinsert = f"INSERT INTO search_keys(part_id, kind) SELECT new.{id_column}, {kind} WHERE {scope('new')};"
    changed = " OR ".join(f"old.{c} IS NOT new.{c}" for c in (id_column, *columns))
    of = ", ".join((id_column, *columns))
    when_new, when_old = (f" WHEN {scope('new')}", f" WHEN {scope('old')}") if when else ("", "")
    return [
        f"CREATE TRIGGER search_{table}_insert AFTER INSERT ON {table}{when_new} BEGIN\n  {insert}\nEND",
        f"CREATE TRIGGER search_{table}_delete AFTER DELETE ON {table}{when_old} BEGIN\n  {drop}\nEND",
        f"CREATE TRIGGER search_{table}_update AFTER UPDATE OF {of} ON {table} WHEN {changed} BEGIN\n  {drop}\n  {reinsert}\nEND",
    ]


SQLITE_TRIGGERS = [
    *_sqlite_triggers("parts", "id", 0, _sqlite_text, ("type", "data"), "{row}.type IN " + TEXT_TYPES),
    *_sqlite_triggers("tool_states", "part_id", 1, _sqlite_call, ("tool", "title", "error", "input"), None),
    *_sqlite_triggers("tool_outputs", "part_id", 2, _sqlite_output, ("output",), None),
]

SQLITE_BACKFILL = [
    f"INSERT INTO search_keys(part_id, kind) SELECT id, 0 FROM parts WHERE type IN {TEXT_TYPES} ORDER BY rowid",
    "INSERT INTO search_keys(part_id, kind) SELECT part_id, 1 FROM tool_states ORDER BY rowid",
    "INSERT INTO search_keys(part_id, kind) SELECT part_id, 2 FROM tool_outputs ORDER BY rowid",
    "INSERT INTO search_index(rowid, body) SELECT key, body FROM search_documents",
    "UPDATE search_state SET indexed = coalesce((SELECT max(key) FROM search_keys), 0)",
]

PG_JSON_STRINGS = """
CREATE FUNCTION brutus_json_strings(value jsonb) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT string_agg(v #>> '{}', ' ') FROM jsonb_path_query(value, 'strict $.**') AS v WHERE jsonb_typeof(v) = 'string' $$
"""
PG_INDEXES = {
    "ix_parts_search": ("parts", "data ->> 'text'"),
    "ix_tool_states_search": (
        "tool_states",
        "tool || ' ' || coalesce(title, '') || ' ' || coalesce(error, '') || ' ' || coalesce(brutus_json_strings(input), '')",
    ),
    "ix_tool_outputs_search": ("tool_outputs", "output"),
}


PG_SEARCH_VECTOR = f"""
CREATE FUNCTION brutus_search_vector(value text) RETURNS tsvector
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE COST 10000
AS $$ BEGIN RETURN to_tsvector('simple'::regconfig, regexp_replace(left(value, {LIMIT}), '[[:punct:]]+', ' ', 'g')); END $$
"""


def _pg_document(text: str) -> str:
    # brutus_search_vector: punctuation becomes a space first, so words split as FTS5's unicode61 splits them
    # (PostgreSQL's parser would keep "parser.py", "/usr/bin" or "a_b" whole and a search for "parser" would
    # miss them). PL/pgSQL and COST 10000 so the planner neither inlines it nor takes it for cheap: with the
    # builtins' costs it scanned tool_outputs (its text in TOAST, its table small) computing every vector.
    return f"brutus_search_vector({text})"


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(PG_JSON_STRINGS)
        op.execute(PG_SEARCH_VECTOR)
        for name, (table, expression) in PG_INDEXES.items():
            op.execute(f"CREATE INDEX {name} ON {table} USING gin (({_pg_document(expression)}))")
        return
    for statement in SQLITE_UPGRADE + SQLITE_TRIGGERS + SQLITE_BACKFILL:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for name in PG_INDEXES:
            op.execute(f"DROP INDEX {name}")
        op.execute("DROP FUNCTION brutus_search_vector(text)")
        op.execute("DROP FUNCTION brutus_json_strings(jsonb)")
        return
    for table in ("parts", "tool_states", "tool_outputs"):
        for event in ("insert", "delete", "update"):
            op.execute(f"DROP TRIGGER search_{table}_{event}")
    op.execute("DROP TABLE search_index")
    op.execute("DROP VIEW search_documents")
    op.execute("DROP TABLE search_state")
    op.execute("DROP TABLE search_keys")
