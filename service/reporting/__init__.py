"""The protocol-aware report and its CSV and HTML renderings."""
