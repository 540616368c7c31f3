"""Two indexes that cost every turn pages they do not need: the summary index holds only the summaries, and
the session index of parts appends where the session's parts end.

Why: on SQLite a commit costs about 2.7 µs per page it writes to the WAL (two writes per frame), and a
finished turn (two messages, three parts) wrote about 25 pages of 2 KiB (``benchmarks/bench_append.py``).

- ``ix_messages_session_id_summary_seq`` (session_id, summary, seq) held every message for the boundary query,
  which only ever asks for a session's summaries. ``ix_messages_summaries`` (session_id, seq) is partial:
  ``WHERE summary IS 1`` (SQLite) / ``summary IS true`` (PostgreSQL), the very term
  ``statements.NEWEST_BOUNDARY`` carries, so both planners use it. A turn no longer touches it.
- ``ix_parts_session_id_type_id`` (session_id, type, id) put a turn's text parts and its tool part in two
  places in the middle of the index, and an index leaf that fills in the middle is rebalanced with its
  siblings (SQLite splits only a table's rightmost leaf cheaply): 4.2 pages a turn. No query asks for a
  session's parts by type. ``ix_parts_session_id_message_id_position`` (session_id, message_id, position)
  grows at its end as ids are time-ordered, serves the same session lookups (a session's parts, stats,
  search in one session, the session's cascade delete), and gives ``statements.SESSION_PARTS`` its order, so
  loading a session sorts nothing.

One transaction: the caller's (``brutus.db.migrate``), so a crash leaves either set of indexes wholly in place.
Building the two indexes reads ``messages`` and ``parts`` once each and blocks writes while it runs.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25
"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0006'
down_revision: Union[str, Sequence[str], None] = '0005'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_index(
        'ix_messages_summaries',
        'messages',
        ['session_id', 'seq'],
        unique=False,
        sqlite_where=sa.text('summary IS 1'),
        postgresql_where=sa.text('summary IS true'),
    )
    op.drop_index('ix_messages_session_id_summary_seq', table_name='messages')
    op.create_index('ix_parts_session_id_message_id_position', 'parts', ['session_id', 'message_id', 'position'], unique=False)
    op.drop_index('ix_parts_session_id_type_id', table_name='parts')


def downgrade() -> None:
    op.create_index('ix_parts_session_id_type_id', 'parts', ['session_id', 'type', 'id'], unique=False)
    op.drop_index('ix_parts_session_id_message_id_position', table_name='parts')
    op.create_index('ix_messages_session_id_summary_seq', 'messages', ['session_id', 'summary', 'seq'], unique=False)
    op.drop_index('ix_messages_summaries', table_name='messages')
