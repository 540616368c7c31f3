"""Search: the index is walked newest first, so a query stops after its ``limit`` hits.

Why: a search joined every match to its message and sorted them all by time before taking the first 50: a
common word over a year of history (1.3M messages) took 11.1 s on SQLite and 1.8 s on PostgreSQL, the time
following the matches, not the limit.

- SQLite: FTS5 hands its matches out in rowid order, descending for free (``ORDER BY rowid DESC LIMIT n`` is
  consumed by its xBestIndex). The rowid is ``search_keys.key``, given out so far in the order documents were
  indexed. Now a key is ``bucket * 2**21 + n``: ``bucket`` the creation time of the document's message (epoch
  ms, clamped to [0, 2**42)), ``n`` a counter within that millisecond (``brutus.db.search_ops.index_pending``
  gives the next free one). Key order is time order up to ties within a millisecond, which the query settles
  by reading the rest of the last hit's millisecond. Every indexed document is given such a key here and
  FTS5 is filled again under the new keys (a contentless table cannot change a rowid in place); the pending
  documents stay pending, without a key.
- PostgreSQL: GIN gives no order. ``search_vectors.created_at`` (the message's creation time, copied when the
  vector is written; a message's time never changes) with a btree index lets the planner walk the vectors
  newest first, testing ``@@`` on each, for a common word, and keep the GIN bitmap for a rare one (it weighs
  the two with the statistics taken here and by ``settle``). The vectors' statistics keep 10,000 frequent
  words (``SET STATISTICS 1000``, ten times the default): with 1,000, a word outside the list was estimated at
  half the rarest listed one's frequency, 15 times too many matches for a rare word at 250,000 messages, and
  the planner walked 200,000 vectors for its 50 hits (849 ms against the GIN plan's 38). ANALYZE samples
  300,000 rows for it (5.6 s at 690,000 vectors).

Downgrade: PostgreSQL drops the column and its index; SQLite numbers the keys 1, 2, 3, … again (0007's code
gives a new key the highest plus one, which a key near 2**63 would leave no room for) and fills FTS5 again.

One transaction: the caller's (``brutus.db.migrate``). Rebuilding reads every document once, as 0004's
backfill did.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-27
"""
from typing import Sequence, Union

from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0008'
down_revision: Union[str, Sequence[str], None] = '0007'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

SLOT = 2**21  # keys per millisecond
NEWEST_BUCKET = 2**42 - 1  # year 2109: 2**42 * 2**21 = 2**63, SQLite's integer range
BUCKET = f"min(max(m.created_at, 0), {NEWEST_BUCKET}) * {SLOT}"


def _rekey(keys: str) -> list[str]:
    """Give every indexed document the key ``keys`` selects (key, part_id, kind) and fill FTS5 again."""
    return [
        "CREATE TEMP TABLE search_rekey (key INTEGER PRIMARY KEY, part_id VARCHAR(64) NOT NULL, kind INTEGER NOT NULL)",
        f"INSERT INTO temp.search_rekey (key, part_id, kind) {keys}",
        "INSERT INTO search_index(search_index) VALUES ('delete-all')",
        "DELETE FROM search_keys",
        "INSERT INTO search_keys (key, part_id, kind) SELECT key, part_id, kind FROM temp.search_rekey ORDER BY key",
        "DROP TABLE temp.search_rekey",
        # ascending: FTS5 buffers a transaction's documents while their rowids ascend
        "INSERT INTO search_index(rowid, body) SELECT key, body FROM search_documents ORDER BY key",
    ]


# within a millisecond: message id, position, then the call before its output (the search's order, reversed)
SQLITE_UPGRADE = _rekey(
    "SELECT base + row_number() OVER (PARTITION BY base ORDER BY message_id, position, kind DESC) - 1, part_id, kind "
    f"FROM (SELECT k.part_id, k.kind, p.message_id, p.position, {BUCKET} AS base FROM search_keys k "
    "JOIN parts p ON p.id = k.part_id JOIN messages m ON m.id = p.message_id)"
)
# 0007's keys: 1, 2, 3, ... (here in time order)
SQLITE_DOWNGRADE = _rekey("SELECT row_number() OVER (ORDER BY key), part_id, kind FROM search_keys")

PG_UPGRADE = [
    "ALTER TABLE search_vectors ADD COLUMN created_at BIGINT",
    "UPDATE search_vectors v SET created_at = m.created_at FROM parts p JOIN messages m ON m.id = p.message_id "
    "WHERE p.id = v.part_id",
    "ALTER TABLE search_vectors ALTER COLUMN created_at SET NOT NULL",
    "CREATE INDEX ix_search_vectors_created_at ON search_vectors (created_at)",
    "ALTER TABLE search_vectors ALTER COLUMN vector SET STATISTICS 1000",
    "ANALYZE search_vectors",
]


def upgrade() -> None:
    statements = PG_UPGRADE if op.get_bind().dialect.name == "postgresql" else SQLITE_UPGRADE
    for statement in statements:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE search_vectors ALTER COLUMN vector SET STATISTICS -1")
        op.execute("DROP INDEX ix_search_vectors_created_at")
        op.execute("ALTER TABLE search_vectors DROP COLUMN created_at")
        return
    for statement in SQLITE_DOWNGRADE:
        op.execute(statement)
