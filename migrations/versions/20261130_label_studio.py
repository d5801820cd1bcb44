"""Label Studio for real: retraction events, annotation links, the webhook inbox, label maps.

Label events get a ``kind`` (``label`` or ``retraction``; a retraction has no value), the
project a ``label_map`` and the Label Studio control it reads, and two tables: the cell each
Label Studio annotation or prediction labels, and the deliveries that could not be recorded.

Revision ID: 0003_label_studio
Revises: 0002
Create Date: 2026-11-30 14:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0003_label_studio'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('projects', schema=None) as batch_op:
        batch_op.add_column(sa.Column('label_map', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('label_studio', sa.JSON(), nullable=True))
    with op.batch_alter_table('label_events', schema=None) as batch_op:
        batch_op.add_column(sa.Column('kind', sa.String(length=16), server_default='label', nullable=False))
        batch_op.alter_column('value', existing_type=sa.String(length=200), nullable=True)
    op.create_table('label_studio_links',
    sa.Column('project_id', sa.String(length=40), nullable=False),
    sa.Column('source', sa.String(length=16), nullable=False),
    sa.Column('ls_id', sa.BigInteger(), nullable=False),
    sa.Column('item_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('rater_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('criterion', sa.String(length=100), nullable=False),
    sa.ForeignKeyConstraint(['item_id'], ['items.id'], name=op.f('fk_label_studio_links_item_id_items'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], name=op.f('fk_label_studio_links_project_id_projects'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['rater_id'], ['raters.id'], name=op.f('fk_label_studio_links_rater_id_raters'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('project_id', 'source', 'ls_id', name=op.f('pk_label_studio_links'))
    )
    op.create_table('label_studio_issues',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('project_id', sa.String(length=40), nullable=False),
    sa.Column('action', sa.String(length=40), nullable=False),
    sa.Column('task', sa.String(length=40), nullable=True),
    sa.Column('annotation', sa.String(length=40), nullable=True),
    sa.Column('reason', sa.Text(), nullable=False),
    sa.Column('payload', sa.JSON(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('resolved_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], name=op.f('fk_label_studio_issues_project_id_projects'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_label_studio_issues'))
    )
    with op.batch_alter_table('label_studio_issues', schema=None) as batch_op:
        batch_op.create_index('ix_label_studio_issues_project_status', ['project_id', 'status'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('label_studio_issues', schema=None) as batch_op:
        batch_op.drop_index('ix_label_studio_issues_project_status')
    op.drop_table('label_studio_issues')
    op.drop_table('label_studio_links')
    # A retraction has no label to keep in the old schema: its events are dropped with the column.
    op.execute("DELETE FROM label_events WHERE kind = 'retraction'")
    with op.batch_alter_table('label_events', schema=None) as batch_op:
        batch_op.alter_column('value', existing_type=sa.String(length=200), nullable=False)
        batch_op.drop_column('kind')
    with op.batch_alter_table('projects', schema=None) as batch_op:
        batch_op.drop_column('label_studio')
        batch_op.drop_column('label_map')
