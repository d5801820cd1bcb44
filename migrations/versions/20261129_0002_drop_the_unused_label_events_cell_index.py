"""Drop the label_events cell index: no query uses it (current_labels serves cells) and it slowed bulk writes.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29 14:47:08.659142
"""

from __future__ import annotations

from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('label_events', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_label_events_cell'))


def downgrade() -> None:
    with op.batch_alter_table('label_events', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_label_events_cell'), ['project_id', 'rater_id', 'item_id', 'criterion'], unique=False)
