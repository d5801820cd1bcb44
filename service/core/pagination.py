"""Cursor pagination: ``?limit=`` and an opaque ``?cursor=`` carrying the last key seen."""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from typing import Annotated, Generic, TypeVar

from fastapi import Depends, Query, Request
from pydantic import BaseModel, Field

from service.core.errors import Invalid
from service.core.settings import Settings

R = TypeVar("R")
T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    items: list[T] = Field(description="The rows of this page.")
    next_cursor: str | None = Field(description="Send as ?cursor= for the next page; null on the last page.")


def encode_cursor(last: int) -> str:
    """The opaque cursor after the row with key ``last``."""
    return base64.urlsafe_b64encode(f"k{last}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> int | None:
    """The key a cursor carries; 422 for a cursor this service did not issue."""
    if cursor is None:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        if raw.startswith("k") and 0 <= (value := int(raw[1:])) < 2**63:
            return value
    except (ValueError, UnicodeDecodeError):
        pass
    raise Invalid("cursor is not one this service issued", code="invalid_cursor")


class PageParams:
    """``limit`` (default 100, max from settings) and the decoded ``cursor``."""

    def __init__(
        self,
        limit: Annotated[int, Query(ge=1, description="Rows per page (default 100, max 1000).")] = 100,
        cursor: Annotated[str | None, Query(description="`next_cursor` of the previous page.")] = None,
    ):
        self.limit = limit
        self.after = decode_cursor(cursor)

    def checked(self, settings: Settings) -> PageParams:
        """Self, after the configured page-size limit is enforced (422 past it)."""
        if self.limit > settings.max_page_size:
            raise Invalid(f"limit must be at most {settings.max_page_size}", code="limit_too_large")
        return self


def _page(params: Annotated[PageParams, Depends()], request: Request) -> PageParams:
    return params.checked(request.app.state.settings)


PageDep = Annotated[PageParams, Depends(_page)]


def page_of(rows: Sequence[R], page: PageParams, *, key: Callable[[R], int], read: Callable[[R], T]) -> Page[T]:
    """The page of ``rows`` (fetched with ``limit + 1`` rows, so a last extra row means there is more).

    ``key`` gives the cursor a row leaves behind, ``read`` its public view.
    """
    kept = rows[: page.limit]
    more = len(rows) > page.limit
    return Page(items=[read(row) for row in kept], next_cursor=encode_cursor(key(kept[-1])) if more else None)
