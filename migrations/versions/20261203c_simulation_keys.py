"""Simulation jobs remember the API key that asked for them (issue 30): a key may have at most
``ANNOPLAN_SIMULATIONS_PER_KEY`` jobs queued or running, in all its projects.

Existing data: jobs from before this revision have no key (``NULL``) and count against no key's
share, only their project's and the service's. A key deleted later leaves its jobs with ``NULL``.
Downgrade drops the column.

Revision ID: 0027_simulation_keys
Revises: 0026_pairwise_order
Create Date: 2026-12-03 07:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0027_simulation_keys"
down_revision = "0026_pairwise_order"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("simulations", schema=None) as batch_op:
        batch_op.add_column(sa.Column("key_id", sa.String(length=40), nullable=True))
        batch_op.create_foreign_key(
            batch_op.f("fk_simulations_key_id_api_keys"), "api_keys", ["key_id"], ["id"], ondelete="SET NULL"
        )


def downgrade() -> None:
    with op.batch_alter_table("simulations", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_simulations_key_id_api_keys"), type_="foreignkey")
        batch_op.drop_column("key_id")
