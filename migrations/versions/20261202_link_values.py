"""Label Studio links remember the label their annotation gave (issue 36).

Deleting the newer of one annotator's two annotations of a task left the newer label current
until a sync: the link of the older annotation did not know what it gave. ``value`` is that
label (``NULL``: none, the annotation was skipped or emptied); ``value_known`` says it was kept.

Existing data: every link keeps its row with ``value_known`` false (not known), so a deletion
leaves such a cell as before (a sync repairs it) until the next import, sync or webhook of the
annotation fills the value. Downgrade drops both columns.

Revision ID: 0024_link_values
Revises: 0023_webhook_targets
Create Date: 2026-12-02 18:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024_link_values"
down_revision = "0023_webhook_targets"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("label_studio_links", schema=None) as batch_op:
        batch_op.add_column(sa.Column("value", sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column("value_known", sa.Boolean(), server_default=sa.false(), nullable=False))


def downgrade() -> None:
    with op.batch_alter_table("label_studio_links", schema=None) as batch_op:
        batch_op.drop_column("value_known")
        batch_op.drop_column("value")
