"""Label Studio links keyed by criterion, with their task and Label Studio project.

A rubric labels one annotation under several criteria (one webhook per criterion); keyed by
annotation alone, each criterion's link overwrote the last, so a deletion retracted one
criterion only. ``ls_task`` lets a ``TASKS_DELETED`` webhook (which names only task ids) find
the labels of the deleted tasks; ``ls_project`` scopes a sync to the links of the Label Studio
project it reads, so two Label Studio projects feeding one annoplan project leave each other's
labels alone.

Existing data: every link keeps its row (its criterion was already stored); ``ls_task`` and
``ls_project`` are ``NULL`` (unknown) until the next import, sync or webhook of the annotation
fills them. Downgrade keeps one link per annotation (the lowest criterion) and drops the columns.

Revision ID: 0014_label_studio_links
Revises: 0013_outbound_errors
Create Date: 2026-12-01 21:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0014_label_studio_links'
down_revision = '0013_outbound_errors'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('label_studio_links', schema=None, recreate='always') as batch_op:
        batch_op.add_column(sa.Column('ls_task', sa.BigInteger(), nullable=True))
        batch_op.add_column(sa.Column('ls_project', sa.BigInteger(), nullable=True))
        batch_op.drop_constraint(op.f('pk_label_studio_links'), type_='primary')
        batch_op.create_primary_key(op.f('pk_label_studio_links'), ['project_id', 'source', 'ls_id', 'criterion'])
        batch_op.create_index('ix_label_studio_links_project_task', ['project_id', 'ls_task'], unique=False)


def downgrade() -> None:
    op.execute(
        "DELETE FROM label_studio_links WHERE EXISTS (SELECT 1 FROM label_studio_links AS other "
        "WHERE other.project_id = label_studio_links.project_id AND other.source = label_studio_links.source "
        "AND other.ls_id = label_studio_links.ls_id AND other.criterion < label_studio_links.criterion)"
    )
    with op.batch_alter_table('label_studio_links', schema=None, recreate='always') as batch_op:
        batch_op.drop_index('ix_label_studio_links_project_task')
        batch_op.drop_constraint(op.f('pk_label_studio_links'), type_='primary')
        batch_op.create_primary_key(op.f('pk_label_studio_links'), ['project_id', 'source', 'ls_id'])
        batch_op.drop_column('ls_project')
        batch_op.drop_column('ls_task')
