"""The dashboard: its pages, what its charts plot, the charts as SVG, and its sentences."""
