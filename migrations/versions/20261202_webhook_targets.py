"""Webhook deliveries on the job queue (issue 32): one standing ``webhook`` job per webhook (its
target), whose lease replaces the lease columns each delivery had.

Existing data: every webhook gets its target job; a delivery a sender held at the upgrade is sent
again by the first turn at its target (at-least-once). Downgrade drops the target jobs and gives
the deliveries their lease columns back, empty (no delivery held).

Revision ID: 0023_webhook_targets
Revises: 0022_anchor_panels
Create Date: 2026-12-02 12:40:00
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = "0023_webhook_targets"
down_revision = "0022_anchor_panels"
branch_labels = None
depends_on = None

TARGET_ATTEMPTS = 2**31 - 1


def upgrade() -> None:
    with op.batch_alter_table("webhook_deliveries", schema=None) as batch_op:
        batch_op.drop_column("lease_token")
        batch_op.drop_column("lease_until")
    jobs = sa.table(
        "jobs",
        sa.column("kind", sa.String),
        sa.column("key", sa.String),
        sa.column("payload", sa.JSON),
        sa.column("state", sa.String),
        sa.column("attempts", sa.Integer),
        sa.column("max_attempts", sa.Integer),
        sa.column("run_after", sa.DateTime(timezone=True)),
        sa.column("created_at", sa.DateTime(timezone=True)),
    )
    now = datetime.now(UTC)
    hooks = op.get_bind().execute(sa.text("SELECT id FROM webhooks")).scalars().all()
    if hooks:
        op.bulk_insert(
            jobs,
            [
                {
                    "kind": "webhook",
                    "key": wid,
                    "payload": {},
                    "state": "queued",
                    "attempts": 0,
                    "max_attempts": TARGET_ATTEMPTS,
                    "run_after": now,
                    "created_at": now,
                }
                for wid in hooks
            ],
        )


def downgrade() -> None:
    op.execute("DELETE FROM jobs WHERE kind = 'webhook'")
    with op.batch_alter_table("webhook_deliveries", schema=None) as batch_op:
        batch_op.add_column(sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("lease_token", sa.String(length=40), nullable=True))
