"""The delivery log keeps no words of a target's answer (issue 30): errors recorded before are
rewritten to the status code, or to a reason of ours.

Revision ID: 0013_outbound_errors
Revises: 0012_typed_columns
Create Date: 2026-12-01 21:30:00
"""

from __future__ import annotations

from alembic import op

revision = "0013_outbound_errors"
down_revision = "0012_typed_columns"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # a non-2xx answer was stored as "HTTP <code>: <300 characters of its body>"
    op.execute(
        "UPDATE webhook_deliveries SET last_error = 'HTTP ' || CAST(last_status_code AS VARCHAR(12)) "
        "WHERE last_error IS NOT NULL AND last_status_code IS NOT NULL"
    )
    # a failed request as "<exception>: <its message>"; refusals of the SSRF guard ("the host ...") were ours
    op.execute(
        "UPDATE webhook_deliveries SET last_error = 'the request failed' "
        "WHERE last_error IS NOT NULL AND last_status_code IS NULL AND last_error NOT LIKE 'the host %'"
    )


def downgrade() -> None:
    pass  # what was removed is not to be restored
