"""Certificates of the validation decision, and outbound webhooks: subscriptions, the event outbox,
deliveries with their retry schedule and lease, and the last decision the sender saw per project.

Revision ID: 0005_webhooks
Revises: 0004_inclusion
Create Date: 2026-11-30 14:06:22.826727
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0005_webhooks'
down_revision = '0004_inclusion'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('certificates',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('project_id', sa.String(length=40), nullable=False),
    sa.Column('label_seq', sa.BigInteger(), nullable=False),
    sa.Column('settings_sha256', sa.String(length=64), nullable=False),
    sa.Column('criterion', sa.String(length=100), nullable=False),
    sa.Column('decision', sa.String(length=32), nullable=False),
    sa.Column('statement', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'],
        name=op.f('fk_certificates_project_id_projects'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_certificates')),
    sa.UniqueConstraint('project_id', 'label_seq', 'settings_sha256',
        name=op.f('uq_certificates_project_id_label_seq_settings_sha256'))
    )
    with op.batch_alter_table('certificates', schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f('ix_certificates_project_id'), ['project_id'], unique=False)

    op.create_table('decision_watches',
    sa.Column('project_id', sa.String(length=40), nullable=False),
    sa.Column('label_seq', sa.BigInteger(), nullable=False),
    sa.Column('decision', sa.String(length=32), nullable=True),
    sa.Column('omega', sa.Double(), nullable=True),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'],
        name=op.f('fk_decision_watches_project_id_projects'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('project_id', name=op.f('pk_decision_watches'))
    )
    op.create_table('webhook_events',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('project_id', sa.String(length=40), nullable=False),
    sa.Column('type', sa.String(length=40), nullable=False),
    sa.Column('dedupe_key', sa.String(length=200), nullable=True),
    sa.Column('payload', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'],
        name=op.f('fk_webhook_events_project_id_projects'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_webhook_events')),
    sa.UniqueConstraint('project_id', 'dedupe_key',
        name=op.f('uq_webhook_events_project_id_dedupe_key'))
    )
    with op.batch_alter_table('webhook_events', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_webhook_events_project_id'), ['project_id'], unique=False)

    op.create_table('webhooks',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('project_id', sa.String(length=40), nullable=False),
    sa.Column('url', sa.Text(), nullable=False),
    sa.Column('events', sa.JSON(), nullable=False),
    sa.Column('secret', sa.String(length=100), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'],
        name=op.f('fk_webhooks_project_id_projects'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_webhooks'))
    )
    with op.batch_alter_table('webhooks', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_webhooks_project_id'), ['project_id'], unique=False)

    op.create_table('webhook_deliveries',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('webhook_id', sa.String(length=40), nullable=False),
    sa.Column('event_id', sa.String(length=40), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('next_attempt_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('retry_until', sa.DateTime(timezone=True), nullable=False),
    sa.Column('lease_until', sa.DateTime(timezone=True), nullable=True),
    sa.Column('lease_token', sa.String(length=40), nullable=True),
    sa.Column('last_attempt_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('last_status_code', sa.Integer(), nullable=True),
    sa.Column('last_error', sa.Text(), nullable=True),
    sa.Column('delivered_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['event_id'], ['webhook_events.id'],
        name=op.f('fk_webhook_deliveries_event_id_webhook_events'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['webhook_id'], ['webhooks.id'],
        name=op.f('fk_webhook_deliveries_webhook_id_webhooks'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_webhook_deliveries'))
    )
    with op.batch_alter_table('webhook_deliveries', schema=None) as batch_op:
        batch_op.create_index('ix_webhook_deliveries_due', ['status', 'next_attempt_at'], unique=False)
        batch_op.create_index(
            batch_op.f('ix_webhook_deliveries_webhook_id'), ['webhook_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('webhook_deliveries', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_webhook_deliveries_webhook_id'))
        batch_op.drop_index('ix_webhook_deliveries_due')

    op.drop_table('webhook_deliveries')
    with op.batch_alter_table('webhooks', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_webhooks_project_id'))

    op.drop_table('webhooks')
    with op.batch_alter_table('webhook_events', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_webhook_events_project_id'))

    op.drop_table('webhook_events')
    op.drop_table('decision_watches')
    with op.batch_alter_table('certificates', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_certificates_project_id'))

    op.drop_table('certificates')
