"""Index messages by (session_id, summary, seq), replacing (session_id, summary).

Why: every write that can move a session's compaction boundary (the summary's finish in each compaction's
final transaction, a compaction part, a hand-written or imported summary) asks for the newest user message
answered by a completed summary after it (``statements.NEWEST_BOUNDARY``). Without statistics SQLite drives
that join from every user message of the session and, for each, scans the messages after it: quadratic in
the history (measured: 1.8 s at 8,000 messages, 11.6 s at 20,000, inside the write transaction). With
``seq`` in the summary index the inner side is a range scan over the session's few summaries after that
message (15 ms at 20,000 messages). The old index is a prefix of the new one, so it goes.

One transaction: the caller's (``brutus.db.migrate`` runs every upgrade inside one BEGIN IMMEDIATE on SQLite,
one transaction under an advisory lock on PostgreSQL), so a crash leaves either index set wholly in place.
That is also why it is a plain CREATE INDEX and not PostgreSQL's CONCURRENTLY, which cannot run inside a
transaction: building it blocks writes to messages for the (short) time it takes.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-24
"""
from typing import Sequence, Union

from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0002'
down_revision: Union[str, Sequence[str], None] = '0001'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table('messages', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_messages_session_id_summary_seq'), ['session_id', 'summary', 'seq'], unique=False)
        batch_op.drop_index(batch_op.f('ix_messages_session_id_summary'))


def downgrade() -> None:
    with op.batch_alter_table('messages', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_messages_session_id_summary'), ['session_id', 'summary'], unique=False)
        batch_op.drop_index(batch_op.f('ix_messages_session_id_summary_seq'))
