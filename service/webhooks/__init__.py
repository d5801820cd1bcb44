"""Outbound webhooks: subscriptions and the delivery log, signed delivery with retries, and the
watcher emitting the changes nobody writes (decision flips, plan reached, leases expiring)."""
