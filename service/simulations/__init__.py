"""Simulation requests: their defaults and sizing, and the job queue running them."""
