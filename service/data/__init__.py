"""The stored records: ORM tables, the read queries, and the writes of projects, keys, raters, items,
label events, idempotent replays and the webhook outbox."""
