"""What every request body shares: strict models (no unknown fields, NUL or non-finite numbers), NUL-free
text, and the validated label and criterion lists."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, field_validator

from planner import SPECIAL


def _distinct_names(names: list[str]) -> list[str]:
    if any(not n or len(n) > 200 for n in names):
        raise ValueError("names must be non-empty strings of at most 200 characters")
    if len(set(names)) != len(names):
        raise ValueError("names must be distinct")
    return names


def _no_special_values(labels: list[str]) -> list[str]:
    clash = sorted(set(labels) & set(SPECIAL))
    if clash:
        raise ValueError(f"{', '.join(clash)} is reserved and cannot be a label")
    return labels


def _short_names(names: list[str]) -> list[str]:
    if any(len(n) > 100 for n in names):
        raise ValueError("criterion names must be at most 100 characters")
    return names


Criteria = Annotated[
    list[str], Field(min_length=1, max_length=100), AfterValidator(_distinct_names), AfterValidator(_short_names)
]
Labels = Annotated[
    list[str],
    Field(min_length=2, max_length=100, description="Ordered label set."),
    AfterValidator(_distinct_names),
    AfterValidator(_no_special_values),
]


def _no_nul(value: Any) -> Any:
    if isinstance(value, str):
        texts = [value]
    elif isinstance(value, dict):
        texts = [*value.keys(), *value.values()]
    else:
        texts = list(value) if isinstance(value, list) else []
    if any(isinstance(t, str) and "\x00" in t for t in texts):
        raise ValueError("must not contain NUL characters")
    return value


class StrictRow(BaseModel):
    """Rows of bulk uploads: unknown fields and non-finite numbers (NaN, Infinity) are refused;
    strings use :data:`Text` (no NUL)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Strict(StrictRow):
    """Request bodies: unknown fields and NUL characters are refused."""

    _nul = field_validator("*")(_no_nul)


# NUL cannot be stored by PostgreSQL; checked by pydantic's own (compiled) pattern matching,
# since bulk uploads validate hundreds of thousands of strings.
Text = Annotated[str, StringConstraints(pattern=r"^[^\x00]*$")]
