"""CSV exports that a spreadsheet opens as data, never as formulas (OWASP "CSV Injection").

A text cell starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is read by
spreadsheet programs as a formula. Such a cell is written with a leading apostrophe, which
they show as text. Cells already starting with an apostrophe get one more, so the rule is
reversible: :func:`restored_cell` drops exactly one leading apostrophe. Numbers, and text
that is a plain number such as ``-1`` or ``+0.5``, are written as they are.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable
from typing import Any, Protocol

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "'")
_PLAIN_NUMBER = re.compile(r"[+-]?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?")


class _Writable(Protocol):
    def write(self, s: str, /) -> Any: ...


def safe_cell(value: object) -> object:
    """``value`` as written to an exported CSV: formula-like text gets a leading apostrophe."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS) and not _PLAIN_NUMBER.fullmatch(value):
        return "'" + value
    return value


def restored_cell(text: str) -> str:
    """The original text of a cell read back from an exported CSV (inverse of :func:`safe_cell`)."""
    if text.startswith("'") and text[1:].startswith(FORMULA_STARTS):
        return text[1:]
    return text


class SafeWriter:
    """A ``csv.writer`` whose every cell goes through :func:`safe_cell`."""

    def __init__(self, out: _Writable, **fmtparams: Any):
        self._writer = csv.writer(out, **fmtparams)

    def writerow(self, row: Iterable[object]) -> None:
        """Write one row of neutralised cells."""
        self._writer.writerow([safe_cell(v) for v in row])

    def writerows(self, rows: Iterable[Iterable[object]]) -> None:
        """Write rows of neutralised cells."""
        self._writer.writerows([safe_cell(v) for v in row] for row in rows)
