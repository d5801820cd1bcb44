"""Assignments keep the probability that their item entered the rater's overlap, so estimates
from unequal-probability panels (Neyman) can weight by its inverse.

Revision ID: 0004_inclusion
Revises: 0003_label_studio
Create Date: 2026-11-30 14:45:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0004_inclusion'
down_revision = '0003_label_studio'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('assignments', schema=None) as batch_op:
        batch_op.add_column(sa.Column('inclusion_probability', sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('assignments', schema=None) as batch_op:
        batch_op.drop_column('inclusion_probability')
