"""The job queue (issue 32): one ``jobs`` row per unit of background work, claimed with a lease.

Existing data: a simulation queued or running before this revision lived in one server
process's memory (no job row holds it), so it is failed as a stale job was; the client may
submit it again. Downgrade drops the table; simulations keep their rows.

Revision ID: 0021_jobs
Revises: 0020_key_expiry
Create Date: 2026-12-02 06:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0021_jobs'
down_revision = '0020_key_expiry'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('jobs',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('kind', sa.String(length=40), nullable=False),
    sa.Column('key', sa.String(length=100), nullable=False),
    sa.Column('payload', sa.JSON(), nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('max_attempts', sa.Integer(), nullable=False),
    sa.Column('run_after', sa.DateTime(timezone=True), nullable=False),
    sa.Column('lease_owner', sa.String(length=200), nullable=True),
    sa.Column('lease_token', sa.String(length=40), nullable=True),
    sa.Column('lease_until', sa.DateTime(timezone=True), nullable=True),
    sa.Column('result', sa.JSON(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_jobs')),
    sa.UniqueConstraint('kind', 'key', name=op.f('uq_jobs_kind_key'))
    )
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.create_index('ix_jobs_due', ['state', 'run_after'], unique=False)
    op.execute(
        "UPDATE simulations SET status = 'failed', "
        "error = 'the server running this job stopped before it finished; submit it again', "
        "finished_at = CURRENT_TIMESTAMP WHERE status IN ('queued', 'running')"
    )


def downgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_index('ix_jobs_due')
    op.drop_table('jobs')
