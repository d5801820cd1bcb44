"""Label-matrix snapshots as rows (issue 32): on PostgreSQL the job worker saves them in the database
by default, so a starting api worker on any host reads a snapshot plus the events since instead of every
label (docs/operations.md, "Label-matrix snapshots").

Existing data: none; the first worker turn after the upgrade saves the snapshots of large projects.
A snapshot is a cache: downgrade drops the table, and workers then read every label at their first look.

Revision ID: 0028_matrix_snapshots
Revises: 0027_simulation_keys
Create Date: 2026-12-04 00:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0028_matrix_snapshots"
down_revision = "0027_simulation_keys"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "matrix_snapshots",
        sa.Column("project_id", sa.String(length=40), nullable=False),
        sa.Column("criterion", sa.String(length=100), nullable=False),
        sa.Column("label_seq", sa.BigInteger(), nullable=False),
        sa.Column("body", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"], ["projects.id"], name=op.f("fk_matrix_snapshots_project_id_projects"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("project_id", "criterion", "label_seq", name=op.f("pk_matrix_snapshots")),
    )


def downgrade() -> None:
    op.drop_table("matrix_snapshots")
