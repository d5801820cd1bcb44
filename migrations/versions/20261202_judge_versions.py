"""Judge versions: a version of a judge is a judge rater of its own, linked to the judge; drift watches.

Labels carry the version through their rater (no change to the label tables); a version has a
name unique per judge, and optionally its model and the digest of its prompt. A drift watch holds
a judge's drift detector settings and the label_seq of the alarm ``judge.drifted`` announced.

Existing data: no rater is a version, no judge is watched. Downgrade drops both tables (the
version raters stay, as plain judges).

Revision ID: 0018_judge_versions
Revises: 0017_arrival_rank
Create Date: 2026-12-02 06:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018_judge_versions"
down_revision = "0017_arrival_rank"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "judge_versions",
        sa.Column("rater_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("judge_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("project_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=True),
        sa.Column("prompt_digest", sa.String(length=128), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["rater_id"], ["raters.id"], name=op.f("fk_judge_versions_rater_id_raters"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["judge_id"], ["raters.id"], name=op.f("fk_judge_versions_judge_id_raters"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["project_id"], ["projects.id"], name=op.f("fk_judge_versions_project_id_projects"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("rater_id", name=op.f("pk_judge_versions")),
        sa.UniqueConstraint("judge_id", "name", name=op.f("uq_judge_versions_judge_id_name")),
    )
    op.create_index(op.f("ix_judge_versions_judge_id"), "judge_versions", ["judge_id"], unique=False)
    op.create_table(
        "drift_watches",
        sa.Column("rater_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("project_id", sa.String(length=40), nullable=False),
        sa.Column("criterion", sa.String(length=100), nullable=False),
        sa.Column("baseline", sa.Float(), nullable=False),
        sa.Column("drop", sa.Float(), nullable=False),
        sa.Column("horizon", sa.BigInteger(), nullable=False),
        sa.Column("alpha", sa.Float(), nullable=False),
        sa.Column("alarm_label_seq", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["rater_id"], ["raters.id"], name=op.f("fk_drift_watches_rater_id_raters"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["project_id"], ["projects.id"], name=op.f("fk_drift_watches_project_id_projects"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("rater_id", name=op.f("pk_drift_watches")),
    )
    op.create_index(op.f("ix_drift_watches_project_id"), "drift_watches", ["project_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_drift_watches_project_id"), table_name="drift_watches")
    op.drop_table("drift_watches")
    op.drop_index(op.f("ix_judge_versions_judge_id"), table_name="judge_versions")
    op.drop_table("judge_versions")
