"""current_labels keyed rater first, without its (project_id, seq) index: one index entry per label
written instead of two (the index cost ~0.3 s of PostgreSQL CPU per 100,000 labels at a million items);
a project's current labels are its raters' key ranges, and reads by seq go through label_events.

Revision ID: 0011_current_label_keys
Revises: 0010_label_project_keys
Create Date: 2026-12-01 05:45:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0011_current_label_keys'
down_revision = '0010_label_project_keys'
branch_labels = None
depends_on = None

COLUMNS = 'item_id, rater_id, criterion, project_id, value, seq'
RATER_FIRST = ['rater_id', 'item_id', 'criterion']
ITEM_FIRST = ['item_id', 'rater_id', 'criterion']


def _rebuild_sqlite(key: list[str]) -> None:
    """SQLite cannot change a primary key: copy the table (WITHOUT ROWID, as at 0009) in the new key's
    order into a new one and put it in its place."""
    op.create_table(
        '_new_current_labels',
        sa.Column('item_id', sa.Integer(), nullable=False),
        sa.Column('rater_id', sa.Integer(), nullable=False),
        sa.Column('criterion', sa.String(length=100), nullable=False),
        sa.Column('project_id', sa.String(length=40), nullable=False),
        sa.Column('value', sa.String(length=200), nullable=False),
        sa.Column('seq', sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint(*key, name='pk_current_labels'),
        sqlite_with_rowid=False,
    )
    op.execute(f'INSERT INTO _new_current_labels ({COLUMNS}) SELECT {COLUMNS} FROM current_labels '
               f'ORDER BY {", ".join(key)}')
    op.drop_table('current_labels')
    op.rename_table('_new_current_labels', 'current_labels')


def upgrade() -> None:
    if op.get_bind().dialect.name == 'sqlite':
        _rebuild_sqlite(RATER_FIRST)
        return
    op.drop_index('ix_current_labels_project_seq', 'current_labels')
    op.drop_constraint('pk_current_labels', 'current_labels', type_='primary')
    op.create_primary_key('pk_current_labels', 'current_labels', RATER_FIRST)


def downgrade() -> None:
    if op.get_bind().dialect.name == 'sqlite':
        _rebuild_sqlite(ITEM_FIRST)
    else:
        op.drop_constraint('pk_current_labels', 'current_labels', type_='primary')
        op.create_primary_key('pk_current_labels', 'current_labels', ITEM_FIRST)
    op.create_index('ix_current_labels_project_seq', 'current_labels', ['project_id', 'seq'])
