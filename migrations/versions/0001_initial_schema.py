"""Initial schema: sessions, messages, parts, tool_states, tool_outputs, compactions and the pruned_parts view.

Tool output text sits in its own table so that marking a part pruned (tool_states.compacted_at) never
rewrites, and loading a pruned part never reads, a multi-megabyte row.

Revision ID: 0001
Revises:
Create Date: 2026-11-23
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

# revision identifiers, used by Alembic.
revision: str = '0001'
down_revision: Union[str, Sequence[str], None] = None
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

# The view as this revision defines it (a copy, not an import: later code must not change an old revision).
PRUNED_PARTS_VIEW = """
CREATE VIEW pruned_parts AS
SELECT p.session_id AS session_id,
       p.message_id AS message_id,
       p.id AS part_id,
       t.tool AS tool,
       t.call_id AS call_id,
       t.output_tokens AS tokens,
       t.compacted_at AS compacted_at
FROM tool_states t
JOIN parts p ON p.id = t.part_id
WHERE t.compacted_at IS NOT NULL
"""


def upgrade() -> None:
    op.create_table('sessions',
    sa.Column('id', sa.String(length=64), nullable=False),
    sa.Column('parent_id', sa.String(length=64), nullable=True),
    sa.Column('title', sa.Text(), nullable=True),
    sa.Column('directory', sa.Text(), nullable=True),
    sa.Column('created_at', sa.BigInteger(), nullable=False),
    sa.Column('updated_at', sa.BigInteger(), nullable=False),
    sa.Column('archived_at', sa.BigInteger(), nullable=True),
    sa.Column('last_seq', sa.Integer(), nullable=False),
    sa.Column('boundary_message_id', sa.String(length=64), nullable=True),
    sa.Column('boundary_seq', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['parent_id'], ['sessions.id'], name=op.f('fk_sessions_parent_id_sessions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_sessions'))
    )
    with op.batch_alter_table('sessions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_sessions_parent_id'), ['parent_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_sessions_updated_at'), ['updated_at'], unique=False)

    op.create_table('messages',
    sa.Column('id', sa.String(length=64), nullable=False),
    sa.Column('session_id', sa.String(length=64), nullable=False),
    sa.Column('seq', sa.Integer(), nullable=False),
    sa.Column('role', sa.String(length=16), nullable=False),
    sa.Column('parent_id', sa.String(length=64), nullable=True),
    sa.Column('agent', sa.Text(), nullable=True),
    sa.Column('mode', sa.Text(), nullable=True),
    sa.Column('provider_id', sa.Text(), nullable=True),
    sa.Column('model_id', sa.Text(), nullable=True),
    sa.Column('summary', sa.Boolean(), nullable=False),
    sa.Column('synthetic', sa.Boolean(), nullable=False),
    sa.Column('finish', sa.Text(), nullable=True),
    sa.Column('error', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('cost', sa.Float(), nullable=False),
    sa.Column('tokens_input', sa.BigInteger(), nullable=False),
    sa.Column('tokens_output', sa.BigInteger(), nullable=False),
    sa.Column('tokens_reasoning', sa.BigInteger(), nullable=False),
    sa.Column('tokens_cache_read', sa.BigInteger(), nullable=False),
    sa.Column('tokens_cache_write', sa.BigInteger(), nullable=False),
    sa.Column('part_count', sa.Integer(), nullable=False),
    sa.Column('token_estimate', sa.BigInteger(), nullable=False),
    sa.Column('metadata', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('created_at', sa.BigInteger(), nullable=False),
    sa.Column('completed_at', sa.BigInteger(), nullable=True),
    sa.ForeignKeyConstraint(['session_id'], ['sessions.id'], name=op.f('fk_messages_session_id_sessions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_messages')),
    sa.UniqueConstraint('session_id', 'seq', name=op.f('uq_messages_session_id_seq'))
    )
    with op.batch_alter_table('messages', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_messages_session_id_summary'), ['session_id', 'summary'], unique=False)

    op.create_table('compactions',
    sa.Column('id', sa.String(length=64), nullable=False),
    sa.Column('session_id', sa.String(length=64), nullable=False),
    sa.Column('user_message_id', sa.String(length=64), nullable=True),
    sa.Column('summary_message_id', sa.String(length=64), nullable=True),
    sa.Column('trigger', sa.String(length=16), nullable=False),
    sa.Column('auto', sa.Boolean(), nullable=False),
    sa.Column('overflow', sa.Boolean(), nullable=False),
    sa.Column('tail_start_id', sa.String(length=64), nullable=True),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('pre_tokens', sa.BigInteger(), nullable=True),
    sa.Column('post_tokens', sa.BigInteger(), nullable=True),
    sa.Column('model', sa.Text(), nullable=True),
    sa.Column('cost', sa.Float(), nullable=False),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('instructions', sa.Text(), nullable=True),
    sa.Column('fallback_used', sa.String(length=32), nullable=True),
    sa.Column('boundary', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('created_at', sa.BigInteger(), nullable=False),
    sa.Column('completed_at', sa.BigInteger(), nullable=True),
    sa.ForeignKeyConstraint(['session_id'], ['sessions.id'], name=op.f('fk_compactions_session_id_sessions'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['summary_message_id'], ['messages.id'], name=op.f('fk_compactions_summary_message_id_messages'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['user_message_id'], ['messages.id'], name=op.f('fk_compactions_user_message_id_messages'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_compactions'))
    )
    with op.batch_alter_table('compactions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_compactions_session_id_status'), ['session_id', 'status'], unique=False)

    op.create_table('parts',
    sa.Column('id', sa.String(length=64), nullable=False),
    sa.Column('session_id', sa.String(length=64), nullable=False),
    sa.Column('message_id', sa.String(length=64), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('type', sa.String(length=32), nullable=False),
    sa.Column('data', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('tokens', sa.BigInteger(), nullable=False),
    sa.Column('created_at', sa.BigInteger(), nullable=False),
    sa.Column('updated_at', sa.BigInteger(), nullable=False),
    sa.ForeignKeyConstraint(['message_id'], ['messages.id'], name=op.f('fk_parts_message_id_messages'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['session_id'], ['sessions.id'], name=op.f('fk_parts_session_id_sessions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_parts')),
    sa.UniqueConstraint('message_id', 'position', name=op.f('uq_parts_message_id_position'))
    )
    with op.batch_alter_table('parts', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_parts_session_id_type_id'), ['session_id', 'type', 'id'], unique=False)

    op.create_table('tool_outputs',
    sa.Column('part_id', sa.String(length=64), nullable=False),
    sa.Column('output', sa.Text(), nullable=False),
    sa.ForeignKeyConstraint(['part_id'], ['parts.id'], name=op.f('fk_tool_outputs_part_id_parts'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('part_id', name=op.f('pk_tool_outputs'))
    )
    op.create_table('tool_states',
    sa.Column('part_id', sa.String(length=64), nullable=False),
    sa.Column('session_id', sa.String(length=64), nullable=False),
    sa.Column('call_id', sa.Text(), nullable=False),
    sa.Column('tool', sa.Text(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('input', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('output_tokens', sa.BigInteger(), nullable=False),
    sa.Column('title', sa.Text(), nullable=True),
    sa.Column('metadata', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('started_at', sa.BigInteger(), nullable=True),
    sa.Column('ended_at', sa.BigInteger(), nullable=True),
    sa.Column('compacted_at', sa.BigInteger(), nullable=True),
    sa.ForeignKeyConstraint(['part_id'], ['parts.id'], name=op.f('fk_tool_states_part_id_parts'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['session_id'], ['sessions.id'], name=op.f('fk_tool_states_session_id_sessions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('part_id', name=op.f('pk_tool_states'))
    )
    with op.batch_alter_table('tool_states', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_tool_states_session_id_compacted_at'), ['session_id', 'compacted_at'], unique=False)

    op.execute(PRUNED_PARTS_VIEW)


def downgrade() -> None:
    op.execute("DROP VIEW pruned_parts")
    with op.batch_alter_table('tool_states', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_tool_states_session_id_compacted_at'))

    op.drop_table('tool_states')
    op.drop_table('tool_outputs')
    with op.batch_alter_table('parts', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_parts_session_id_type_id'))

    op.drop_table('parts')
    with op.batch_alter_table('compactions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_compactions_session_id_status'))

    op.drop_table('compactions')
    with op.batch_alter_table('messages', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_messages_session_id_summary'))

    op.drop_table('messages')
    with op.batch_alter_table('sessions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_sessions_updated_at'))
        batch_op.drop_index(batch_op.f('ix_sessions_parent_id'))

    op.drop_table('sessions')
