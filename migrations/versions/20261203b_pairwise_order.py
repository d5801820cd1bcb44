"""Pairwise projects: a project's ``kind`` and the order a pairwise judge was shown an item's answers.

``projects.kind`` is ``pointwise`` (a label per item, as before) or ``pairwise`` (an item is a prompt
with answers A and B, labels ``A``, ``B`` and, where ties are allowed, ``tie``; docs/method.md §13).
``label_events.shown_order`` and ``current_labels.shown_order`` hold ``AB`` or ``BA`` for a pairwise
judge's label and ``''`` for every other label; it is part of ``current_labels``' key, so one judge
holds a label of an item in each order.

Existing data: every project becomes ``pointwise`` and every label gets ``''`` (its cell is as before).
Downgrade: pairwise projects become pointwise; of a judge's two current labels of an item the ``AB`` one
stays current (the ``BA`` one stays in the events, its order dropped with the column).

Revision ID: 0026_pairwise_order
Revises: 0025_ls_user_raters
Create Date: 2026-12-03 07:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0026_pairwise_order"
down_revision = "0025_ls_user_raters"
branch_labels = None
depends_on = None

COLUMNS = "item_id, rater_id, criterion, project_id, value, seq, confidence, rank"
OLD_KEY = ["rater_id", "item_id", "criterion"]
NEW_KEY = [*OLD_KEY, "shown_order"]


def _rebuild_sqlite(key: list[str]) -> None:
    """SQLite cannot change a primary key: copy current_labels (WITHOUT ROWID) into a table with ``key``."""
    ordered = "shown_order" in key
    op.create_table(
        "_new_current_labels",
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("rater_id", sa.Integer(), nullable=False),
        sa.Column("criterion", sa.String(length=100), nullable=False),
        sa.Column("project_id", sa.String(length=40), nullable=False),
        sa.Column("value", sa.String(length=200), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("confidence", sa.Float(), nullable=True),
        sa.Column("rank", sa.BigInteger(), nullable=True),
        *([sa.Column("shown_order", sa.String(length=2), server_default="", nullable=False)] if ordered else []),
        sa.PrimaryKeyConstraint(*key, name="pk_current_labels"),
        sqlite_with_rowid=False,
    )
    op.execute(
        f"INSERT INTO _new_current_labels ({COLUMNS}) SELECT {COLUMNS} FROM current_labels "
        f"ORDER BY {', '.join(OLD_KEY)}"
    )
    op.drop_table("current_labels")
    op.rename_table("_new_current_labels", "current_labels")


def upgrade() -> None:
    with op.batch_alter_table("projects", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "kind",
                sa.Enum("pointwise", "pairwise", name="kind", native_enum=False, length=16, create_constraint=True),
                server_default="pointwise",
                nullable=False,
            )
        )
    with op.batch_alter_table("label_events", schema=None) as batch_op:
        batch_op.add_column(sa.Column("shown_order", sa.String(length=2), server_default="", nullable=False))
    if op.get_bind().dialect.name == "sqlite":
        _rebuild_sqlite(NEW_KEY)
        return
    op.add_column("current_labels", sa.Column("shown_order", sa.String(length=2), server_default="", nullable=False))
    op.drop_constraint("pk_current_labels", "current_labels", type_="primary")
    op.create_primary_key("pk_current_labels", "current_labels", NEW_KEY)


def downgrade() -> None:
    op.execute(
        "DELETE FROM current_labels WHERE shown_order = 'BA' AND EXISTS (SELECT 1 FROM current_labels AS ab "
        "WHERE ab.rater_id = current_labels.rater_id AND ab.item_id = current_labels.item_id "
        "AND ab.criterion = current_labels.criterion AND ab.shown_order <> 'BA')"
    )
    if op.get_bind().dialect.name == "sqlite":
        _rebuild_sqlite(OLD_KEY)
    else:
        op.drop_constraint("pk_current_labels", "current_labels", type_="primary")
        op.create_primary_key("pk_current_labels", "current_labels", OLD_KEY)
        op.drop_column("current_labels", "shown_order")
    with op.batch_alter_table("label_events", schema=None) as batch_op:
        batch_op.drop_column("shown_order")
    with op.batch_alter_table("projects", schema=None) as batch_op:
        batch_op.drop_constraint(op.f("ck_projects_kind"), type_="check")
        batch_op.drop_column("kind")
