"""A Label Studio labeling config read for what this service needs: its label controls.

A ``<Choices name="sentiment" toName="text">`` control reads the data key of the object tag
it points at (``<Text name="text" value="$review"/>`` -> ``review``) and offers the values of
its ``<Choice>`` children (``alias`` when set: that is what Label Studio writes in results).
A ``<Rating>`` or ``<Number>`` control gives a number (results ``{"rating": 4}``, ``{"number": 3}``):
the label of a numeric project. A ``<Pairwise name="pw" toName="left,right"/>`` control gives the answer
picked of the two objects it names (results ``{"selected": "left"}`` or ``"right"``): the verdict of a
pairwise project (a pairwise project also reads a ``<Choices>`` control whose values are its verdicts, the
only way to a tie: Label Studio's Pairwise has none).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from xml.etree.ElementTree import ParseError

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring

from service.core.errors import Invalid, echo

NUMERIC_KINDS = ("rating", "number")
"""The controls whose result is a number (its ``type``, and its value's key)."""
PAIRWISE_KIND = "pairwise"
"""The control whose result names the one of its two objects picked (``value.selected``: left or right)."""


@dataclass(frozen=True)
class ChoiceControl:
    """One label control: its name (``from_name``), target, data key and values; ``kind`` is its tag
    (``choices``; ``rating`` / ``number``, whose value is a number and which have no choices; ``pairwise``,
    whose choices are ``left`` and ``right`` and which has no data key: its objects are the two answers, not
    the item's text)."""

    name: str
    to_name: str
    data_key: str | None
    choices: tuple[str, ...]
    single: bool
    kind: str = "choices"

    def as_dict(self) -> dict[str, Any]:
        return {
            "from_name": self.name,
            "to_name": self.to_name,
            "data_key": self.data_key,
            "choices": list(self.choices),
            "single": self.single,
            "kind": self.kind,
        }


def control_kinds(numeric: bool, pairwise: bool = False) -> tuple[str, ...]:
    """The control kinds whose result is a label of a project: numbers for a numeric one, a pairwise pick or
    choices for a pairwise one, else choices."""
    if numeric:
        return NUMERIC_KINDS
    return (PAIRWISE_KIND, "choices") if pairwise else ("choices",)


@lru_cache(maxsize=64)
def choice_controls(label_config: str) -> tuple[ChoiceControl, ...]:
    """The label controls (choices, rating, number) of a labeling config, in document order; 422 if it has none.

    >>> cfg = '''<View><Text name="t" value="$review"/>
    ...   <Choices name="verdict" toName="t"><Choice value="Pass"/><Choice value="Fail" alias="F"/></Choices>
    ...   <Choices name="flags" toName="t" choice="multiple"><Choice value="spam"/></Choices></View>'''
    >>> [(c.name, c.data_key, c.choices, c.single) for c in choice_controls(cfg)]
    [('verdict', 'review', ('Pass', 'F'), True), ('flags', 'review', ('spam',), False)]
    >>> cfg = '<View><Text name="t" value="$answer"/><Rating name="stars" toName="t" maxRating="5"/></View>'
    >>> [(c.name, c.data_key, c.kind) for c in choice_controls(cfg)]
    [('stars', 'answer', 'rating')]
    >>> cfg = '''<View><Text name="a" value="$answer_a"/><Text name="b" value="$answer_b"/>
    ...   <Pairwise name="pw" toName="a,b"/></View>'''
    >>> [(c.name, c.data_key, c.choices, c.kind) for c in choice_controls(cfg)]
    [('pw', None, ('left', 'right'), 'pairwise')]
    """
    try:
        root = fromstring(label_config)
    except (ParseError, DefusedXmlException) as exc:
        raise Invalid(
            f"label_config is not a Label Studio labeling config: {exc}"[:300], code="bad_label_config"
        ) from None
    keys = {
        el.get("name"): el.get("value", "")[1:]
        for el in root.iter()
        if el.get("name") and el.get("value", "").startswith("$")
    }
    controls = tuple(
        ChoiceControl(
            name=el.get("name", ""),
            to_name=el.get("toName", ""),
            data_key=None if el.tag.lower() == PAIRWISE_KIND else keys.get(el.get("toName", "").split(",")[0]) or None,
            choices=("left", "right")
            if el.tag.lower() == PAIRWISE_KIND
            else tuple(c.get("alias") or c.get("value", "") for c in el.iter() if c.tag.lower() == "choice"),
            single=el.get("choice", "single") != "multiple",
            kind=el.tag.lower(),
        )
        for el in root.iter()
        if el.tag.lower() in ("choices", PAIRWISE_KIND, *NUMERIC_KINDS) and el.get("name")
    )
    if not controls:
        raise Invalid(
            "label_config has no <Choices>, <Pairwise>, <Rating> or <Number> control; only those give labels",
            code="bad_label_config",
        )
    return controls


def label_controls(controls: Iterable[ChoiceControl], *, numeric: bool, pairwise: bool = False) -> list[ChoiceControl]:
    """The controls that give a project's labels: rating and number controls for a numeric project, pairwise
    and choices controls for a pairwise one, choices controls for the others; 422 when the config has none.

    >>> a = ChoiceControl("verdict", "t", "t", ("Pass",), True)
    >>> b = ChoiceControl("stars", "t", "t", (), True, "rating")
    >>> [c.name for c in label_controls([a, b], numeric=True)], [c.name for c in label_controls([a, b], numeric=False)]
    (['stars'], ['verdict'])
    >>> pw = ChoiceControl("pw", "a,b", "a", ("left", "right"), True, "pairwise")
    >>> [c.name for c in label_controls([a, pw], numeric=False)], [c.name for c in label_controls([pw], numeric=False,
    ...                                                                                            pairwise=True)]
    (['verdict'], ['pw'])
    """
    kinds = control_kinds(numeric, pairwise)
    kept = [c for c in controls if c.kind in kinds]
    if not kept:
        wanted = (
            "a <Rating> or <Number> control (the project is numeric)"
            if numeric
            else "a <Pairwise> or <Choices> control (the project is pairwise)"
            if pairwise
            else "a <Choices> control"
        )
        raise Invalid(
            f"the labeling config has no label control for this project: it needs {wanted}", code="bad_label_config"
        )
    return kept


def pick_control(
    controls: Iterable[ChoiceControl], from_name: str | None, maps: Callable[[str], bool]
) -> ChoiceControl:
    """The control whose choices are the label: ``from_name`` if given, else the one single-choice
    control, else the single-choice control with the most choices that ``maps`` to a project label.

    >>> a = ChoiceControl("sentiment", "text", "text", ("Pos", "Neg"), True)
    >>> b = ChoiceControl("flags", "text", "text", ("spam",), False)
    >>> c = ChoiceControl("topic", "text", "text", ("news", "chat"), True)
    >>> pick_control([a, b], None, lambda v: False).name
    'sentiment'
    >>> pick_control([a, b, c], None, lambda v: v in ("Pos", "Neg")).name
    'sentiment'
    >>> pick_control([a, c], None, lambda v: v in ("Pos", "news")).name  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    service.core.errors.Invalid: the labeling config has several single-choice controls ['sentiment', 'topic'] and ...
    >>> pick_control([b], None, lambda v: False).name  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    service.core.errors.Invalid: the labeling config has no single-choice control: its choices controls ['flags'] ...
    >>> pick_control([a, b, c], "flags", lambda v: False).name
    'flags'
    """
    controls = list(controls)
    if from_name is not None:
        named = [c for c in controls if c.name == from_name]
        if not named:
            raise Invalid(
                f"from_name {echo(from_name)} is not a choices control of the labeling config; "
                f"it has {[c.name for c in controls]}",
                code="unknown_from_name",
            )
        return named[0]
    single = [c for c in controls if c.single]
    if not single:
        raise Invalid(
            f"the labeling config has no single-choice control: its choices controls {[c.name for c in controls]} "
            'all take several choices (choice="multiple"); name the one that holds the label with ?from_name=',
            code="ambiguous_from_name",
        )
    if len(single) == 1:
        return single[0]
    ranked = sorted(((sum(map(maps, c.choices)), k) for k, c in enumerate(single)), reverse=True)
    if len(ranked) > 1 and ranked[0][0] > ranked[1][0]:
        return single[ranked[0][1]]
    raise Invalid(
        f"the labeling config has several single-choice controls {[c.name for c in single]} and their choices "
        "do not tell which holds the label; name it with ?from_name=",
        code="ambiguous_from_name",
    )
