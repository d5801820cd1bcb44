"""Label tables without the project's foreign key: a write already holds the project's row lock and
projects are never deleted, while PostgreSQL checked the parent row once per label written, in a
trigger (about 1 s per 100,000 labels for each of the two tables at a million items).

Revision ID: 0010_label_project_keys
Revises: 0009_label_storage
Create Date: 2026-11-30 23:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0010_label_project_keys'
down_revision = '0009_label_storage'
branch_labels = None
depends_on = None

TABLES = ('label_events', 'current_labels')
EVENT_COLUMNS = 'project_id, seq, item_id, rater_id, criterion, value, batch_id, created_at, kind'
CURRENT_COLUMNS = 'item_id, rater_id, criterion, project_id, value, seq'


def _project_key(table: str, *, checked: bool) -> list[sa.ForeignKeyConstraint]:
    if not checked:
        return []
    return [sa.ForeignKeyConstraint(['project_id'], ['projects.id'], name=f'fk_{table}_project_id_projects',
                                    ondelete='CASCADE')]


def _rebuild_sqlite(*, checked: bool) -> None:
    """SQLite cannot drop or add a foreign key: copy both tables into new ones (WITHOUT ROWID, as at
    0009) in key order and put them in their place (foreign keys are off while migrating, see env.py)."""
    op.create_table(
        '_new_label_events',
        sa.Column('project_id', sa.String(length=40), nullable=False),
        sa.Column('seq', sa.BigInteger(), nullable=False),
        sa.Column('item_id', sa.Integer(), nullable=False),
        sa.Column('rater_id', sa.Integer(), nullable=False),
        sa.Column('criterion', sa.String(length=100), nullable=False),
        sa.Column('value', sa.String(length=200), nullable=True),
        sa.Column('batch_id', sa.String(length=40), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('kind', sa.String(length=16), server_default='label', nullable=False),
        sa.PrimaryKeyConstraint('project_id', 'seq', name='pk_label_events'),
        *_project_key('label_events', checked=checked),
        sqlite_with_rowid=False,
    )
    op.create_table(
        '_new_current_labels',
        sa.Column('item_id', sa.Integer(), nullable=False),
        sa.Column('rater_id', sa.Integer(), nullable=False),
        sa.Column('criterion', sa.String(length=100), nullable=False),
        sa.Column('project_id', sa.String(length=40), nullable=False),
        sa.Column('value', sa.String(length=200), nullable=False),
        sa.Column('seq', sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint('item_id', 'rater_id', 'criterion', name='pk_current_labels'),
        *_project_key('current_labels', checked=checked),
        sqlite_with_rowid=False,
    )
    for table, columns, order in (('label_events', EVENT_COLUMNS, 'project_id, seq'),
                                  ('current_labels', CURRENT_COLUMNS, 'item_id, rater_id, criterion')):
        op.execute(f'INSERT INTO _new_{table} ({columns}) SELECT {columns} FROM {table} ORDER BY {order}')
        op.drop_table(table)
        op.rename_table(f'_new_{table}', table)
    op.create_index('ix_current_labels_project_seq', 'current_labels', ['project_id', 'seq'])


def upgrade() -> None:
    if op.get_bind().dialect.name == 'sqlite':
        _rebuild_sqlite(checked=False)
        return
    for table in TABLES:
        op.drop_constraint(f'fk_{table}_project_id_projects', table, type_='foreignkey')


def downgrade() -> None:
    if op.get_bind().dialect.name == 'sqlite':
        _rebuild_sqlite(checked=True)
        return
    for table in TABLES:
        op.create_foreign_key(f'fk_{table}_project_id_projects', table, 'projects', ['project_id'], ['id'],
                              ondelete='CASCADE')
