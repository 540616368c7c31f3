"""Forks: a session copied from another up to a message (``store.fork``) says where it came from.

- ``sessions.forked_from``: the session it was copied from (no foreign key: deleting the original leaves
  the fork whole, and the fork still names where it came from); ``sessions.forked_at``: the original's
  message it was copied up to, included. Both NULL for a session that is no fork.
- ``ix_sessions_forked_from``: a session's forks (``list_sessions(forked_from=...)``) are an index lookup.

One transaction: the caller's (``brutus.db.migrate``). No row is rewritten; the index over a column of NULLs
is built from one read of ``sessions``.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-27
"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0010'
down_revision: Union[str, Sequence[str], None] = '0009'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.add_column('sessions', sa.Column('forked_from', sa.String(length=64), nullable=True))
    op.add_column('sessions', sa.Column('forked_at', sa.String(length=64), nullable=True))
    op.create_index('ix_sessions_forked_from', 'sessions', ['forked_from'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_sessions_forked_from', table_name='sessions')
    op.drop_column('sessions', 'forked_at')
    op.drop_column('sessions', 'forked_from')
