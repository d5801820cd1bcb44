"""Label storage: label_events keyed by (project_id, seq) without its unused id; on SQLite both label
tables are WITHOUT ROWID (the rows live in their key's b-tree instead of a rowid table plus an index);
the label tables' item and rater foreign keys go (their ids are checked by the write, under the project
lock, and neither items nor raters are ever deleted; the project key, and its cascade, stays).

Revision ID: 0009_label_storage
Revises: 0008_pool_scores
Create Date: 2026-11-30 20:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0009_label_storage'
down_revision = '0008_pool_scores'
branch_labels = None
depends_on = None

EVENT_COLUMNS = 'project_id, seq, item_id, rater_id, criterion, value, batch_id, created_at, kind'
CURRENT_COLUMNS = 'item_id, rater_id, criterion, project_id, value, seq'


def _event_columns() -> list[sa.Column]:  # type: ignore[type-arg]
    return [
        sa.Column('project_id', sa.String(length=40), nullable=False),
        sa.Column('seq', sa.BigInteger(), nullable=False),
        sa.Column('item_id', sa.Integer(), nullable=False),
        sa.Column('rater_id', sa.Integer(), nullable=False),
        sa.Column('criterion', sa.String(length=100), nullable=False),
        sa.Column('value', sa.String(length=200), nullable=True),
        sa.Column('batch_id', sa.String(length=40), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('kind', sa.String(length=16), server_default='label', nullable=False),
    ]


TABLES = ('label_events', 'current_labels')
DROPPED = (('item_id', 'items'), ('rater_id', 'raters'))


def _label_foreign_keys(table: str, *, with_dropped: bool) -> list[sa.ForeignKeyConstraint]:
    kept = [('project_id', 'projects')]
    return [sa.ForeignKeyConstraint([column], [f'{parent}.id'], name=f'fk_{table}_{column}_{parent}', ondelete='CASCADE')
            for column, parent in (kept + list(DROPPED) if with_dropped else kept)]


def _current_table(name: str, *, with_rowid: bool) -> None:
    op.create_table(
        name,
        sa.Column('item_id', sa.Integer(), nullable=False),
        sa.Column('rater_id', sa.Integer(), nullable=False),
        sa.Column('criterion', sa.String(length=100), nullable=False),
        sa.Column('project_id', sa.String(length=40), nullable=False),
        sa.Column('value', sa.String(length=200), nullable=False),
        sa.Column('seq', sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint('item_id', 'rater_id', 'criterion', name='pk_current_labels'),
        *_label_foreign_keys('current_labels', with_dropped=with_rowid),
        sqlite_with_rowid=with_rowid,
    )


def _replace(table: str, columns: str, order: str) -> None:
    """SQLite: copy ``table`` into ``_new_<table>`` in key order and put the copy in its place
    (foreign keys are off while migrating, see env.py, so the drop cascades nowhere)."""
    op.execute(f'INSERT INTO _new_{table} ({columns}) SELECT {columns} FROM {table} ORDER BY {order}')
    op.drop_table(table)
    op.rename_table(f'_new_{table}', table)


def upgrade() -> None:
    if op.get_bind().dialect.name != 'sqlite':
        for table in TABLES:
            for column, parent in DROPPED:
                op.drop_constraint(f'fk_{table}_{column}_{parent}', table, type_='foreignkey')
        op.drop_constraint('pk_label_events', 'label_events', type_='primary')
        op.drop_column('label_events', 'id')
        op.drop_constraint('uq_label_events_project_id_seq', 'label_events', type_='unique')
        op.create_primary_key('pk_label_events', 'label_events', ['project_id', 'seq'])
        return
    op.create_table(
        '_new_label_events',
        *_event_columns(),
        sa.PrimaryKeyConstraint('project_id', 'seq', name='pk_label_events'),
        *_label_foreign_keys('label_events', with_dropped=False),
        sqlite_with_rowid=False,
    )
    _replace('label_events', EVENT_COLUMNS, 'project_id, seq')
    _current_table('_new_current_labels', with_rowid=False)
    _replace('current_labels', CURRENT_COLUMNS, 'item_id, rater_id, criterion')
    op.create_index('ix_current_labels_project_seq', 'current_labels', ['project_id', 'seq'])


def downgrade() -> None:
    if op.get_bind().dialect.name != 'sqlite':
        op.drop_constraint('pk_label_events', 'label_events', type_='primary')
        op.create_unique_constraint('uq_label_events_project_id_seq', 'label_events', ['project_id', 'seq'])
        op.execute('ALTER TABLE label_events ADD COLUMN id BIGSERIAL')  # numbered in the table's order
        op.create_primary_key('pk_label_events', 'label_events', ['id'])
        for table in TABLES:
            for column, parent in DROPPED:
                op.create_foreign_key(f'fk_{table}_{column}_{parent}', table, parent, [column], ['id'],
                                      ondelete='CASCADE')
        return
    op.create_table(
        '_new_label_events',
        sa.Column('id', sa.Integer(), nullable=False),  # the rowid: numbered as the rows are copied
        *_event_columns(),
        sa.PrimaryKeyConstraint('id', name='pk_label_events'),
        *_label_foreign_keys('label_events', with_dropped=True),
        sa.UniqueConstraint('project_id', 'seq', name='uq_label_events_project_id_seq'),
    )
    _replace('label_events', EVENT_COLUMNS, 'project_id, seq')
    _current_table('_new_current_labels', with_rowid=True)
    _replace('current_labels', CURRENT_COLUMNS, 'item_id, rater_id, criterion')
    op.create_index('ix_current_labels_project_seq', 'current_labels', ['project_id', 'seq'])
