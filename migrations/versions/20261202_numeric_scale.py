"""Numeric projects: ``scale`` may be ``numeric``, and ``value_range`` holds such a project's range.

A numeric project's labels are numbers in ``value_range`` ({min, max, step}), stored as the
canonical text of the number in the same ``value`` columns as categorical labels.

Existing data: every project keeps its scale and gets ``value_range`` NULL (a label scale).
Downgrade turns a numeric project into an ``interval`` one whose labels are the distinct numbers it was
given, in numeric order (every stored label stays readable as a category).

Revision ID: 0019_numeric_scale
Revises: 0018_judge_versions
Create Date: 2026-12-02 06:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019_numeric_scale"
down_revision = "0018_judge_versions"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("projects", schema=None) as batch_op:
        batch_op.add_column(sa.Column("value_range", sa.JSON(), nullable=True))
        batch_op.drop_constraint(op.f("ck_projects_scale"), type_="check")
        batch_op.create_check_constraint(
            op.f("ck_projects_scale"), "scale IN ('nominal', 'ordinal', 'interval', 'numeric')"
        )


def downgrade() -> None:
    conn = op.get_bind()
    projects = sa.table("projects", sa.column("id"), sa.column("scale"), sa.column("labels", sa.JSON()))
    numeric = conn.execute(sa.text("SELECT id FROM projects WHERE scale = 'numeric'")).scalars().all()
    for pid in numeric:
        values = conn.execute(
            sa.text(
                "SELECT DISTINCT value FROM label_events WHERE project_id = :p AND value IS NOT NULL "
                "AND value NOT IN ('CANNOT_ASSESS', 'INVALID')"
            ),
            {"p": pid},
        ).scalars()
        conn.execute(
            projects.update().where(projects.c.id == pid).values(scale="interval", labels=sorted(values, key=float))
        )
    with op.batch_alter_table("projects", schema=None) as batch_op:
        batch_op.drop_constraint(op.f("ck_projects_scale"), type_="check")
        batch_op.create_check_constraint(op.f("ck_projects_scale"), "scale IN ('nominal', 'ordinal', 'interval')")
        batch_op.drop_column("value_range")
