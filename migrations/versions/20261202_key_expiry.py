"""API keys may expire (issue 30): ``expires_at``, null for a key that never does (every existing key).

Revision ID: 0020_key_expiry
Revises: 0019_numeric_scale
Create Date: 2026-12-02 06:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020_key_expiry"
down_revision = "0019_numeric_scale"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.add_column(sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.drop_column("expires_at")
