"""Arrival ranks: the monitored decision does not follow the order rows sat in a file (issue 28).

``label_events.rank`` and ``current_labels.rank``: the arrival rank of docs/method.md §8.2, the
``label_seq`` of the write that brought the cell its first label (a correction keeps it).
``projects.order_seed`` seeds the item order that breaks ties of equal rank; ``projects.opening_seq``
is the ``label_seq`` of the first look (the labels in hand then are read as one rank).
``shown_decisions``: the first pass or reject shown per (project, criterion, judge), as of its
``label_seq``, so a later change of it is marked (docs/method.md §8.3).

Existing data: every rank is ``NULL`` and is read as the label's own ``seq`` (the order monitored
before); ``order_seed`` is ``NULL`` and is read as a hash of the project's id; ``opening_seq`` is
``NULL`` until the next reliability document is computed; no decision is on record until the next
document shows one. Downgrade drops the columns and the table.

Revision ID: 0017_arrival_rank
Revises: 0016_logins
Create Date: 2026-12-02 06:45:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017_arrival_rank"
down_revision = "0016_logins"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "shown_decisions",
        sa.Column("project_id", sa.String(length=40), nullable=False),
        sa.Column("criterion", sa.String(length=100), nullable=False),
        sa.Column("judge", sa.String(length=200), nullable=False),
        sa.Column("decision", sa.String(length=32), nullable=False),
        sa.Column("label_seq", sa.BigInteger(), nullable=False),
        sa.Column("decided_at", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"], ["projects.id"], name=op.f("fk_shown_decisions_project_id_projects"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("project_id", "criterion", "judge", name=op.f("pk_shown_decisions")),
    )
    with op.batch_alter_table("label_events", schema=None) as batch_op:
        batch_op.add_column(sa.Column("rank", sa.BigInteger(), nullable=True))
    with op.batch_alter_table("current_labels", schema=None) as batch_op:
        batch_op.add_column(sa.Column("rank", sa.BigInteger(), nullable=True))
    with op.batch_alter_table("projects", schema=None) as batch_op:
        batch_op.add_column(sa.Column("order_seed", sa.BigInteger(), nullable=True))
        batch_op.add_column(sa.Column("opening_seq", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("projects", schema=None) as batch_op:
        batch_op.drop_column("opening_seq")
        batch_op.drop_column("order_seed")
    with op.batch_alter_table("current_labels", schema=None) as batch_op:
        batch_op.drop_column("rank")
    with op.batch_alter_table("label_events", schema=None) as batch_op:
        batch_op.drop_column("rank")
    op.drop_table("shown_decisions")
