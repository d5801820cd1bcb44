"""External ids of items and raters: one normal form, no invisible characters, no look-alikes.

An id is stored in Unicode NFC, so ``café`` typed precomposed or decomposed is one id. Ids
with surrounding whitespace or with invisible characters (zero-width spaces and joiners,
byte-order marks, direction marks: Unicode categories Cf and Cc) are refused. Two ids of a
project may not share a compatibility form (NFKC, e.g. ``norm-a`` and the full-width
``norm-ａ``): :func:`collision_key` is that form, stored beside the id under a unique index.
"""

from __future__ import annotations

import unicodedata
from typing import Annotated

from pydantic import AfterValidator, StringConstraints


def normalized_id(value: str) -> str:
    """``value`` in NFC; ValueError for surrounding whitespace or invisible characters."""
    if value != value.strip():
        raise ValueError("ids may not start or end with whitespace")
    if value.isascii() and value.isprintable():
        return value  # ASCII's only invisible characters are its controls (Cc), which are not printable
    if not value.isascii():
        value = unicodedata.normalize("NFC", value)
    invisible = next((ch for ch in value if unicodedata.category(ch) in ("Cf", "Cc")), None)
    if invisible is not None:
        raise ValueError(f"ids may not hold invisible or control characters (found U+{ord(invisible):04X})")
    return value


def collision_key(external_id: str) -> str:
    """The compatibility form (NFKC) under which two ids of a project count as the same."""
    return external_id if external_id.isascii() else unicodedata.normalize("NFKC", external_id)


ExternalId = Annotated[str, StringConstraints(min_length=1, max_length=200), AfterValidator(normalized_id)]
"""An item or rater id in a request: 1-200 characters, normalised and checked by :func:`normalized_id`."""
