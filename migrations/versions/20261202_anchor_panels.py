"""Anchor panels (issue 34): the frozen items a judge's new version re-labels to be compared with the old.

One panel per judge: its size (Connor's paired-proportions formula for the drop to detect, at the
stated power and level, docs/method.md §12), the items drawn by Strat over the primary's labels, and
the settings it was sized with.

Existing data: no judge has a panel. Downgrade drops the table.

Revision ID: 0022_anchor_panels
Revises: 0021_jobs
Create Date: 2026-12-02 12:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022_anchor_panels"
down_revision = "0021_jobs"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "anchor_panels",
        sa.Column("rater_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("project_id", sa.String(length=40), nullable=False),
        sa.Column("criterion", sa.String(length=100), nullable=False),
        sa.Column("drop", sa.Float(), nullable=False),
        sa.Column("discordance", sa.Float(), nullable=False),
        sa.Column("baseline", sa.Float(), nullable=True),
        sa.Column("alpha", sa.Float(), nullable=False),
        sa.Column("power", sa.Float(), nullable=False),
        sa.Column("seed", sa.BigInteger(), nullable=False),
        sa.Column("items", sa.JSON(), nullable=False),
        sa.Column("label_seq", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["rater_id"], ["raters.id"], name=op.f("fk_anchor_panels_rater_id_raters"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["project_id"], ["projects.id"], name=op.f("fk_anchor_panels_project_id_projects"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("rater_id", name=op.f("pk_anchor_panels")),
    )
    op.create_index(op.f("ix_anchor_panels_project_id"), "anchor_panels", ["project_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_anchor_panels_project_id"), table_name="anchor_panels")
    op.drop_table("anchor_panels")
