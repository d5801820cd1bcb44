"""Label Studio users mapped to raters (issue 36): a pm says LS user 7 is the rater ``ann-1`` (the one its
batches were issued to), so its annotations are labels of ``ann-1`` instead of a second rater ``ls-user-7``.

Existing data: no mapping, so every Label Studio user stays the rater ``ls-user-<id>`` as before; a mapping
made later moves that rater's current labels and links onto the mapped rater. Downgrade drops the table
(the labels already moved stay where they are).

Revision ID: 0025_ls_user_raters
Revises: 0024_link_values
Create Date: 2026-12-03 07:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0025_ls_user_raters"
down_revision = "0024_link_values"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "label_studio_users",
        sa.Column("project_id", sa.String(length=40), nullable=False),
        sa.Column("ls_user", sa.BigInteger(), nullable=False),
        sa.Column("rater_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("email", sa.String(length=254), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"], ["projects.id"], name=op.f("fk_label_studio_users_project_id_projects"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["rater_id"], ["raters.id"], name=op.f("fk_label_studio_users_rater_id_raters"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("project_id", "ls_user", name=op.f("pk_label_studio_users")),
        sa.UniqueConstraint("project_id", "rater_id", name=op.f("uq_label_studio_users_project_id_rater_id")),
    )


def downgrade() -> None:
    op.drop_table("label_studio_users")
