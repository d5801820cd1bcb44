"""Initial schema: projects, corpus, raters, append-only label events, keys, plans and batches.

Revision ID: 0001
Revises: 
Create Date: 2026-11-29 13:16:16.230540
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('projects',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('labels', sa.JSON(), nullable=False),
    sa.Column('scale', sa.String(length=16), nullable=False),
    sa.Column('criteria', sa.JSON(), nullable=False),
    sa.Column('allow_abstain', sa.Boolean(), nullable=False),
    sa.Column('decision', sa.JSON(), nullable=False),
    sa.Column('target', sa.JSON(), nullable=False),
    sa.Column('label_seq', sa.BigInteger(), nullable=False),
    sa.Column('item_count', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_projects'))
    )
    op.create_table('items',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('project_id', sa.String(length=40), nullable=False),
    sa.Column('external_id', sa.String(length=200), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('features', sa.JSON(), nullable=False),
    sa.Column('text', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], name=op.f('fk_items_project_id_projects'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_items')),
    sa.UniqueConstraint('project_id', 'external_id', name=op.f('uq_items_project_id_external_id'))
    )
    op.create_table('plans',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('project_id', sa.String(length=40), nullable=False),
    sa.Column('purpose', sa.String(length=16), nullable=False),
    sa.Column('source', sa.String(length=16), nullable=False),
    sa.Column('design', sa.String(length=16), nullable=False),
    sa.Column('seed', sa.BigInteger(), nullable=False),
    sa.Column('m', sa.Integer(), nullable=True),
    sa.Column('params', sa.JSON(), nullable=False),
    sa.Column('recipe', sa.JSON(), nullable=False),
    sa.Column('label_seq', sa.BigInteger(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], name=op.f('fk_plans_project_id_projects'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_plans'))
    )
    with op.batch_alter_table('plans', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_plans_project_id'), ['project_id'], unique=False)

    op.create_table('raters',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('project_id', sa.String(length=40), nullable=False),
    sa.Column('external_id', sa.String(length=200), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], name=op.f('fk_raters_project_id_projects'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_raters')),
    sa.UniqueConstraint('project_id', 'external_id', name=op.f('uq_raters_project_id_external_id'))
    )
    with op.batch_alter_table('raters', schema=None) as batch_op:
        batch_op.create_index('uq_raters_one_primary', ['project_id'], unique=True, sqlite_where=sa.text("kind = 'primary'"), postgresql_where=sa.text("kind = 'primary'"))

    op.create_table('simulations',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('project_id', sa.String(length=40), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('params', sa.JSON(), nullable=False),
    sa.Column('done', sa.Integer(), nullable=False),
    sa.Column('total', sa.Integer(), nullable=False),
    sa.Column('result', sa.JSON(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], name=op.f('fk_simulations_project_id_projects'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_simulations'))
    )
    with op.batch_alter_table('simulations', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_simulations_project_id'), ['project_id'], unique=False)

    op.create_table('api_keys',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('key_hash', sa.String(length=64), nullable=False),
    sa.Column('role', sa.String(length=16), nullable=False),
    sa.Column('project_id', sa.String(length=40), nullable=True),
    sa.Column('rater_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('name', sa.String(length=200), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], name=op.f('fk_api_keys_project_id_projects'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['rater_id'], ['raters.id'], name=op.f('fk_api_keys_rater_id_raters'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_api_keys')),
    sa.UniqueConstraint('key_hash', name=op.f('uq_api_keys_key_hash'))
    )
    op.create_table('batches',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('project_id', sa.String(length=40), nullable=False),
    sa.Column('rater_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('plan_id', sa.String(length=40), nullable=False),
    sa.Column('design', sa.String(length=16), nullable=False),
    sa.Column('items', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('released_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['plan_id'], ['plans.id'], name=op.f('fk_batches_plan_id_plans'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], name=op.f('fk_batches_project_id_projects'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['rater_id'], ['raters.id'], name=op.f('fk_batches_rater_id_raters'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_batches'))
    )
    with op.batch_alter_table('batches', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_batches_project_id'), ['project_id'], unique=False)

    op.create_table('current_labels',
    sa.Column('item_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('rater_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('criterion', sa.String(length=100), nullable=False),
    sa.Column('project_id', sa.String(length=40), nullable=False),
    sa.Column('value', sa.String(length=200), nullable=False),
    sa.Column('seq', sa.BigInteger(), nullable=False),
    sa.ForeignKeyConstraint(['item_id'], ['items.id'], name=op.f('fk_current_labels_item_id_items'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], name=op.f('fk_current_labels_project_id_projects'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['rater_id'], ['raters.id'], name=op.f('fk_current_labels_rater_id_raters'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('item_id', 'rater_id', 'criterion', name=op.f('pk_current_labels'))
    )
    with op.batch_alter_table('current_labels', schema=None) as batch_op:
        batch_op.create_index('ix_current_labels_project_seq', ['project_id', 'seq'], unique=False)

    op.create_table('label_events',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('project_id', sa.String(length=40), nullable=False),
    sa.Column('seq', sa.BigInteger(), nullable=False),
    sa.Column('item_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('rater_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('criterion', sa.String(length=100), nullable=False),
    sa.Column('value', sa.String(length=200), nullable=False),
    sa.Column('batch_id', sa.String(length=40), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['item_id'], ['items.id'], name=op.f('fk_label_events_item_id_items'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], name=op.f('fk_label_events_project_id_projects'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['rater_id'], ['raters.id'], name=op.f('fk_label_events_rater_id_raters'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_label_events')),
    sa.UniqueConstraint('project_id', 'seq', name=op.f('uq_label_events_project_id_seq'))
    )
    with op.batch_alter_table('label_events', schema=None) as batch_op:
        batch_op.create_index('ix_label_events_cell', ['project_id', 'rater_id', 'item_id', 'criterion'], unique=False)

    op.create_table('assignments',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('project_id', sa.String(length=40), nullable=False),
    sa.Column('rater_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('item_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('plan_id', sa.String(length=40), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('batch_id', sa.String(length=40), nullable=True),
    sa.Column('lease_expires_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['batch_id'], ['batches.id'], name=op.f('fk_assignments_batch_id_batches'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['item_id'], ['items.id'], name=op.f('fk_assignments_item_id_items'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['plan_id'], ['plans.id'], name=op.f('fk_assignments_plan_id_plans'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], name=op.f('fk_assignments_project_id_projects'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['rater_id'], ['raters.id'], name=op.f('fk_assignments_rater_id_raters'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_assignments')),
    sa.UniqueConstraint('rater_id', 'item_id', name=op.f('uq_assignments_rater_id_item_id'))
    )
    with op.batch_alter_table('assignments', schema=None) as batch_op:
        batch_op.create_index('ix_assignments_rater_position', ['rater_id', 'position'], unique=False)

    op.create_table('idempotency_records',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('key_id', sa.String(length=40), nullable=False),
    sa.Column('idempotency_key', sa.String(length=200), nullable=False),
    sa.Column('request_hash', sa.String(length=64), nullable=False),
    sa.Column('status_code', sa.Integer(), nullable=False),
    sa.Column('response', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['key_id'], ['api_keys.id'], name=op.f('fk_idempotency_records_key_id_api_keys'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_idempotency_records')),
    sa.UniqueConstraint('key_id', 'idempotency_key', name=op.f('uq_idempotency_records_key_id_idempotency_key'))
    )


def downgrade() -> None:
    op.drop_table('idempotency_records')
    with op.batch_alter_table('assignments', schema=None) as batch_op:
        batch_op.drop_index('ix_assignments_rater_position')

    op.drop_table('assignments')
    with op.batch_alter_table('label_events', schema=None) as batch_op:
        batch_op.drop_index('ix_label_events_cell')

    op.drop_table('label_events')
    with op.batch_alter_table('current_labels', schema=None) as batch_op:
        batch_op.drop_index('ix_current_labels_project_seq')

    op.drop_table('current_labels')
    with op.batch_alter_table('batches', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_batches_project_id'))

    op.drop_table('batches')
    op.drop_table('api_keys')
    with op.batch_alter_table('simulations', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_simulations_project_id'))

    op.drop_table('simulations')
    with op.batch_alter_table('raters', schema=None) as batch_op:
        batch_op.drop_index('uq_raters_one_primary', sqlite_where=sa.text("kind = 'primary'"), postgresql_where=sa.text("kind = 'primary'"))

    op.drop_table('raters')
    with op.batch_alter_table('plans', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_plans_project_id'))

    op.drop_table('plans')
    op.drop_table('items')
    op.drop_table('projects')
