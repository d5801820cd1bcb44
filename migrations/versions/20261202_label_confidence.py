"""A judge label's confidence, for selective evaluation (docs/method.md §3c).

``label_events.confidence`` and ``current_labels.confidence``: a number in [0, 1] a judge label
may carry (a log-probability-derived score or the vote share of several samples); null when not
given. Existing labels keep null. Downgrade drops the columns.

Revision ID: 0015_label_confidence
Revises: 0014_label_studio_links
Create Date: 2026-12-02 06:45:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015_label_confidence"
down_revision = "0014_label_studio_links"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("label_events", schema=None) as batch_op:
        batch_op.add_column(sa.Column("confidence", sa.Float(), nullable=True))
    with op.batch_alter_table("current_labels", schema=None) as batch_op:
        batch_op.add_column(sa.Column("confidence", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("current_labels", schema=None) as batch_op:
        batch_op.drop_column("confidence")
    with op.batch_alter_table("label_events", schema=None) as batch_op:
        batch_op.drop_column("confidence")
