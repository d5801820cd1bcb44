"""External ids of items and raters: one normal form, no invisible characters, no look-alikes.

An id is stored in Unicode NFC, so ``café`` typed precomposed or decomposed is one id. Ids
with surrounding whitespace or with invisible characters (zero-width spaces and joiners,
byte-order marks, direction marks: Unicode categories Cf and Cc) are refused. Two ids of a
project may not share a skeleton (:func:`collision_key`: the compatibility form NFKC, e.g.
``norm-a`` and the full-width ``norm-ａ``, with dashes and minus signs folded to ``-`` and the
Cyrillic and Greek letters that look Latin folded to it, after UTS #39's confusables), stored
beside the id under a unique index. An id whose letters mix scripts (``аnn-2`` with a
Cyrillic ``а``) is refused; Latin with Han, kana or Hangul is one script family (UTS #39's
highly restrictive level).
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
    mixed = mixed_scripts(value)
    if mixed is not None:
        raise ValueError(f"ids may not mix scripts ({mixed[0].title()} and {mixed[1].title()} letters): a look-alike")
    return value


# Look-alikes of ASCII (a subset of Unicode's confusables.txt: dashes, and the Cyrillic and Greek
# letters drawn like Latin ones) folded into the skeleton after NFKC.
_CONFUSABLES = str.maketrans(
    {
        **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212\u02d7\u2043\ufe58\ufe63\uff0d", "-"),
        **dict(zip("авеесһіјкмнорсѕтухуԁԛԝӏпгь", "abeechijkmhopcstyxydqwlnrb", strict=True)),
        **dict(zip("АВЕЅІЈКМНОРСТХУ", "ABESIJKMHOPCTXY", strict=True)),
        **dict(zip("αβεικνορτυχ", "aBeiKvopTux", strict=True)),
        **dict(zip("ΑΒΕΖΗΙΚΜΝΟΡΤΥΧ", "ABEZHIKMNOPTYX", strict=True)),
    }
)
_CJK = {"CJK", "HIRAGANA", "KATAKANA", "HANGUL", "BOPOMOFO"}


def _script(ch: str) -> str | None:
    """A letter's script: the first word of its compatibility form's Unicode name (``LATIN``, ...); else None."""
    if not ch.isalpha():
        return None
    folded = unicodedata.normalize("NFKC", ch)[:1] or ch  # full-width and ligature forms name their script
    name = unicodedata.name(folded, "")
    first = name.split(" ", 1)[0]
    return "CJK" if first in _CJK or name.startswith("IDEOGRAPHIC") else first or None


def mixed_scripts(value: str) -> tuple[str, str] | None:
    """Two scripts whose letters ``value`` mixes, or None (Latin may go with one CJK script family).

    >>> mixed_scripts("\u0430nn-2")
    ('CYRILLIC', 'LATIN')
    >>> mixed_scripts("user-名前") is None
    True
    """
    scripts = sorted({s for s in map(_script, value) if s is not None})
    if len(scripts) <= 1 or set(scripts) == {"CJK", "LATIN"}:
        return None
    others = [s for s in scripts if s != "CJK"] if "CJK" in scripts else scripts
    return (others[0], others[1]) if len(others) >= 2 else (scripts[0], scripts[1])


def collision_key(external_id: str) -> str:
    """The skeleton under which two ids of a project count as the same: NFKC, then look-alikes of ASCII folded."""
    if external_id.isascii():
        return external_id
    return unicodedata.normalize("NFKC", external_id).translate(_CONFUSABLES)


ExternalId = Annotated[str, StringConstraints(min_length=1, max_length=200), AfterValidator(normalized_id)]
"""An item or rater id in a request: 1-200 characters, normalised and checked by :func:`normalized_id`."""
