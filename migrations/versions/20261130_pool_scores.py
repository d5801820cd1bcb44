"""The dashboard's human-pool score history, stored as documents are computed instead of replayed per view.

Existing projects get their history before the first stored point replayed from the events once,
on their first dashboard view.

Revision ID: 0008_pool_scores
Revises: 0007_primary_cursor
Create Date: 2026-11-30 17:50:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0008_pool_scores'
down_revision = '0007_primary_cursor'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('pool_scores',
    sa.Column('project_id', sa.String(length=40), nullable=False),
    sa.Column('criterion', sa.String(length=100), nullable=False),
    sa.Column('label_seq', sa.BigInteger(), nullable=False),
    sa.Column('score', sa.Float(), nullable=True),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'],
        name=op.f('fk_pool_scores_project_id_projects'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('project_id', 'criterion', 'label_seq', name=op.f('pk_pool_scores'))
    )


def downgrade() -> None:
    op.drop_table('pool_scores')
