"""A project's scale and a key's role may hold only their declared values: CHECK constraints beside
the columns the models now type as ``Scale`` and ``Role``.

Existing data: both were validated on the way in, so every stored value satisfies its constraint.

Revision ID: 0012_typed_columns
Revises: 0011_current_label_keys
Create Date: 2026-12-01 21:00:00
"""

from __future__ import annotations

from alembic import op

revision = '0012_typed_columns'
down_revision = '0011_current_label_keys'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('projects', schema=None) as batch_op:
        batch_op.create_check_constraint(op.f('ck_projects_scale'), "scale IN ('nominal', 'ordinal', 'interval')")
    with op.batch_alter_table('api_keys', schema=None) as batch_op:
        batch_op.create_check_constraint(op.f('ck_api_keys_role'), "role IN ('admin', 'pm', 'annotator', 'viewer')")


def downgrade() -> None:
    with op.batch_alter_table('api_keys', schema=None) as batch_op:
        batch_op.drop_constraint(op.f('ck_api_keys_role'), type_='check')
    with op.batch_alter_table('projects', schema=None) as batch_op:
        batch_op.drop_constraint(op.f('ck_projects_scale'), type_='check')
