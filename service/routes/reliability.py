"""Placeholder router; filled in by its own change."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(tags=["reliability"])
