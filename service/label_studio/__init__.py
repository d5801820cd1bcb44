"""The Label Studio integration: its payloads and labeling config, exports and webhooks reconciled into
items, raters and labels, the inbox of deliveries kept for replay, and pull sync."""
