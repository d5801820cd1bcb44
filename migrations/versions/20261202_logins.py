"""Dashboard logins (issue 31): the login cookie holds a random token whose hash is kept here with
its key, expiry and revocation, instead of the API key itself.

Revision ID: 0016_logins
Revises: 0015_label_confidence
Create Date: 2026-12-02 06:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = "0016_logins"
down_revision = "0015_label_confidence"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "logins",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("key_id", sa.String(length=40), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["key_id"], ["api_keys.id"], name=op.f("fk_logins_key_id_api_keys"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_logins")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_logins_token_hash")),
    )
    with op.batch_alter_table("logins") as batch:
        batch.create_index(batch.f("ix_logins_key_id"), ["key_id"], unique=False)
        batch.create_index(batch.f("ix_logins_expires_at"), ["expires_at"], unique=False)


def downgrade() -> None:
    op.drop_table("logins")
