"""Transcripts: the agent SDKs' own records, kept exactly beside the sessions they are parsed into.

Why: ``brutus.integrations`` is the session store of the Claude Agent SDK (``SessionStore``: transcript
entries by ``(project_key, session_id, subpath)``) and of OpenAI Agents (``Session``: Responses-API items).
Both SDKs read back exactly what they wrote, in order (``load`` deep-equal, ``get_items`` the same items),
so each record is one row of ``transcript_entries`` in its JSON column, read back by one index range scan
instead of being rebuilt from messages and parts (which keep what brutus knows of it: the typed columns,
prune marks and compactions). ``transcripts`` holds the SDK's key, its write time (``mtime``) and its opaque
summary state, with the brutus session as its key; both tables cascade from ``sessions``, so deleting the
session deletes the records. ``(session_id, uuid)`` is unique: the uuid is the SDK's idempotency key, and
entries without one (NULL) are appended as they come. ``call_id`` is indexed so a tool output finds its call.

One transaction: the caller's (``brutus.db.migrate``), so a crash leaves neither table or both.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-25
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

# revision identifiers, used by Alembic.
revision: str = '0003'
down_revision: Union[str, Sequence[str], None] = '0002'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def _json() -> sa.types.TypeEngine:
    return sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql')


def upgrade() -> None:
    op.create_table('transcripts',
    sa.Column('session_id', sa.String(length=64), nullable=False),
    sa.Column('sdk', sa.String(length=32), nullable=False),
    sa.Column('project_key', sa.Text(), nullable=False),
    sa.Column('external_id', sa.Text(), nullable=False),
    sa.Column('subpath', sa.Text(), nullable=False),
    sa.Column('last_seq', sa.Integer(), nullable=False),
    sa.Column('mtime', sa.BigInteger(), nullable=False),
    sa.Column('summary', _json(), nullable=True),
    sa.Column('state', _json(), nullable=True),
    sa.Column('created_at', sa.BigInteger(), nullable=False),
    sa.ForeignKeyConstraint(['session_id'], ['sessions.id'], name=op.f('fk_transcripts_session_id_sessions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('session_id', name=op.f('pk_transcripts')),
    sa.UniqueConstraint('sdk', 'project_key', 'external_id', 'subpath', name=op.f('uq_transcripts_sdk_project_key_external_id_subpath'))
    )
    op.create_table('transcript_entries',
    sa.Column('session_id', sa.String(length=64), nullable=False),
    sa.Column('seq', sa.Integer(), nullable=False),
    sa.Column('uuid', sa.Text(), nullable=True),
    sa.Column('type', sa.Text(), nullable=True),
    sa.Column('call_id', sa.Text(), nullable=True),
    sa.Column('message_id', sa.String(length=64), nullable=True),
    sa.Column('part_id', sa.String(length=64), nullable=True),
    sa.Column('entry', _json(), nullable=False),
    sa.ForeignKeyConstraint(['session_id'], ['transcripts.session_id'], name=op.f('fk_transcript_entries_session_id_transcripts'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('session_id', 'seq', name=op.f('pk_transcript_entries')),
    sa.UniqueConstraint('session_id', 'uuid', name=op.f('uq_transcript_entries_session_id_uuid'))
    )
    with op.batch_alter_table('transcript_entries', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_transcript_entries_session_id_call_id'), ['session_id', 'call_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('transcript_entries', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_transcript_entries_session_id_call_id'))

    op.drop_table('transcript_entries')
    op.drop_table('transcripts')
