"""The primary's list becomes a cursor over the corpus (raters.issued_through, walking items by
(project_id, id)) instead of one assignment row per item, and rater_progress counts each rater's
labeled items for batch requests.

Existing data: a primary's cursor starts after the largest item of its materialised list (those
rows stay, as issued items; labeled ones are dropped by its next batch request); the counts are
taken from current_labels. Downgrading drops both: the old code extends the primary's list again.

Revision ID: 0007_primary_cursor
Revises: 0006_id_keys
Create Date: 2026-11-30 17:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0007_primary_cursor'
down_revision = '0006_id_keys'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('raters', schema=None) as batch_op:
        batch_op.add_column(sa.Column('issued_through', sa.BigInteger(), nullable=True))
    op.create_index('ix_items_project_id_id', 'items', ['project_id', 'id'])
    op.create_table(
        'rater_progress',
        sa.Column('rater_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
        sa.Column('labeled_items', sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(['rater_id'], ['raters.id'], name=op.f('fk_rater_progress_rater_id_raters'),
                                ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('rater_id', name=op.f('pk_rater_progress')),
    )
    op.execute(
        "UPDATE raters SET issued_through = (SELECT max(item_id) FROM assignments WHERE rater_id = raters.id) "
        "WHERE kind = 'primary'"
    )
    op.execute(
        "INSERT INTO rater_progress (rater_id, labeled_items) "
        "SELECT rater_id, COUNT(DISTINCT item_id) FROM current_labels GROUP BY rater_id"
    )


def downgrade() -> None:
    op.drop_table('rater_progress')
    op.drop_index('ix_items_project_id_id', table_name='items')
    with op.batch_alter_table('raters', schema=None) as batch_op:
        batch_op.drop_column('issued_through')
