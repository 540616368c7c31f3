"""Packed metadata: SQLite stores a large ``metadata`` of a message or a tool state zlib-compressed, its size
beside it.

What the importers keep beside each row (OpenCode's ``summary.diffs`` with whole files before and after, Claude
Code's ``toolUseResult`` with the file an edit changed) is most of an imported database: 11.1 of 24.9 MB for the
test corpus, more than twice the text the sessions hold. It is JSON that nothing searches or filters on, read
only with its row, and it compresses 3.5x.

- ``messages.metadata_size`` and ``tool_states.metadata_size`` (INTEGER, NULL): on SQLite, brutus's writes store a
  metadata of 1,024 characters or more as zlib bytes when that is smaller (``brutus.codec.pack``) and put its
  UTF-8 size here; NULL means stored as it is. The convention of SQLite's archive format: the ``sqlite3``
  shell reads either form with its built-in ``sqlar_uncompress(metadata, metadata_size)``.
- PostgreSQL compresses large values itself (TOAST): the columns stay NULL there.
- Upgrade only adds the columns: rows written before keep their plain form (brutus reads both), so the upgrade
  of a large file rewrites nothing. Downgrade writes every packed value back as JSON text, then drops them.

One transaction: the caller's (``brutus.db.migrate``).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-27
"""
import zlib
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0009'
down_revision: Union[str, Sequence[str], None] = '0008'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

TABLES = ('messages', 'tool_states')
UNPACK_BATCH = 500
# constant statements per table (no SQL is built from values)
PACKED = {
    'messages': 'SELECT rowid, metadata FROM messages WHERE metadata_size IS NOT NULL AND rowid > :after ORDER BY rowid LIMIT :n',
    'tool_states': 'SELECT rowid, metadata FROM tool_states WHERE metadata_size IS NOT NULL AND rowid > :after ORDER BY rowid LIMIT :n',
}
UNPACKED = {
    'messages': 'UPDATE messages SET metadata = :text, metadata_size = NULL WHERE rowid = :rid',
    'tool_states': 'UPDATE tool_states SET metadata = :text, metadata_size = NULL WHERE rowid = :rid',
}


def upgrade() -> None:
    for table in TABLES:
        op.add_column(table, sa.Column('metadata_size', sa.Integer(), nullable=True))


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == 'sqlite':
        for table in TABLES:
            after = 0
            while True:
                rows = bind.execute(sa.text(PACKED[table]), {'after': after, 'n': UNPACK_BATCH}).fetchall()
                if not rows:
                    break
                bind.execute(
                    sa.text(UNPACKED[table]),
                    [{'text': zlib.decompress(data).decode('utf-8'), 'rid': rid} for rid, data in rows],
                )
                after = rows[-1][0]
    for table in TABLES:
        op.drop_column(table, 'metadata_size')
