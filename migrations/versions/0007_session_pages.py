"""Pages of the session list: ``list_sessions(limit=..., after=...)`` reads (updated_at, id) from a session's
position, so the index that served the list order by ``updated_at`` alone holds the tie-break too.

- ``ix_sessions_updated_at_id`` (updated_at, id) replaces ``ix_sessions_updated_at`` (updated_at). The page
  query's ``(updated_at, id) < (:u, :id) ORDER BY updated_at DESC, id DESC LIMIT n`` is a range scan of it
  on both backends (SQLite's row values, PostgreSQL's row comparison), so a page 10,000 deep reads one page of
  rows, not the 10,000 before it, and sorts nothing. A write that touches a session moves one entry, as before.
- The list's filters (``parent_id``, ``include_archived=False``) need nothing new: a parent's children are
  found by ``ix_sessions_parent_id`` and sorted (few), archived sessions are skipped along the range.

One transaction: the caller's (``brutus.db.migrate``). Building the index reads ``sessions`` once.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-27
"""
from typing import Sequence, Union

from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0007'
down_revision: Union[str, Sequence[str], None] = '0006'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_index('ix_sessions_updated_at_id', 'sessions', ['updated_at', 'id'], unique=False)
    op.drop_index('ix_sessions_updated_at', table_name='sessions')


def downgrade() -> None:
    op.create_index('ix_sessions_updated_at', 'sessions', ['updated_at'], unique=False)
    op.drop_index('ix_sessions_updated_at_id', table_name='sessions')
