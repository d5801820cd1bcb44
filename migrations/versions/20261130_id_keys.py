"""Items and raters get external_key, the NFKC form of their id, unique per project (look-alike ids).

Revision ID: 0006_id_keys
Revises: 0005_webhooks
Create Date: 2026-11-30 14:30:00
"""

from __future__ import annotations

import unicodedata

import sqlalchemy as sa
from alembic import op

revision = '0006_id_keys'
down_revision = '0005_webhooks'
branch_labels = None
depends_on = None

TABLES = ('items', 'raters')


def _backfill(table: str) -> None:
    """Store each row's key; of legacy rows that already collide, only the first keeps it."""
    bind = op.get_bind()
    rows = sa.table(table, sa.column('id'), sa.column('external_key'))
    seen: set[tuple[str, str]] = set()
    updates = []
    for row_id, project_id, external_id in bind.execute(
        sa.text(f"SELECT id, project_id, external_id FROM {table} ORDER BY id")
    ):
        key = unicodedata.normalize('NFKC', external_id)
        if (project_id, key) not in seen:
            seen.add((project_id, key))
            updates.append({'row_id': row_id, 'key': key})
    if updates:
        bind.execute(
            rows.update().where(rows.c.id == sa.bindparam('row_id')).values(external_key=sa.bindparam('key')),
            updates,
        )


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column('external_key', sa.Text(), nullable=True))
        _backfill(table)
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.create_unique_constraint(batch_op.f(f'uq_{table}_project_id_external_key'),
                                              ['project_id', 'external_key'])


def downgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_constraint(batch_op.f(f'uq_{table}_project_id_external_key'), type_='unique')
            batch_op.drop_column('external_key')
