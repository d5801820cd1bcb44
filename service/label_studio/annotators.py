"""Label Studio users mapped to raters: LS user 7 is the rater ``ann-1`` its batches were issued to.

Unmapped, a Label Studio user is the rater ``ls-user-<id>`` (:func:`service.label_studio.mapping.human_rater`),
so the batches a pm issues to ``ann-1`` and the labels LS user 7 gives them would be two raters. A pm maps
the user (by its id, or its email) to an existing ``human`` or ``primary`` rater, at connect time or through
the endpoint; every path that reads Label Studio (webhook, import, sync, inbox replay) then writes that
rater. What user 7 labelled before the mapping is moved onto ``ann-1`` when the mapping is made: each of
``ls-user-7``'s current labels is retracted there and written for ``ann-1`` (the history keeps both), and
the Label Studio links follow, so a later deletion or sync finds them under ``ann-1``. A cell both raters
label with different values is a conflict (409, nothing written): the pm retracts one first.

Unmapping (``DELETE``) is the reverse, and loses nothing: the labels the rater holds through Label Studio links
move back onto ``ls-user-7`` (retracted on the rater, written for ``ls-user-7``; the history keeps both) with
their links, so later deliveries, deletions and syncs of user 7 find them there; the rater keeps every label it
has from anywhere else (uploads, other tools). The user can then be mapped to another rater.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, Field, StringConstraints
from sqlalchemy import and_, func, select, update
from sqlalchemy.orm import Session, aliased

from service.core.errors import Conflict, Invalid, NotFound, TooLarge, echo
from service.data.keys import Principal
from service.data.labels import retract_labels, write_labels
from service.data.models import CurrentLabel, Item, LabelStudioLink, LabelStudioUser, Project, Rater
from service.data.projects import lock_project
from service.data.queries import external_ids
from service.data.raters import ensure_raters
from service.label_studio.mapping import USER_PREFIX, UserRaters
from service.schemas.base import Strict
from service.schemas.labels import LabelIn
from service.schemas.raters import RaterCreate

MAX_ANNOTATORS = 200
"""Mappings one request may set (a Label Studio organisation's annotators, with room)."""

AnnotatorMap = Annotated[
    dict[
        Annotated[str, StringConstraints(min_length=1, max_length=254)],
        Annotated[str, StringConstraints(min_length=1, max_length=200)],
    ],
    Field(
        max_length=MAX_ANNOTATORS,
        description="Label Studio user (its id, or its email) -> the external id of the existing `human` or "
        '`primary` rater its annotations are labels of, e.g. `{"7": "ann-1"}`; an unmapped user is the rater '
        "`ls-user-<id>`. Labels the user gave before are moved onto that rater.",
    ),
]


class AnnotatorsRequest(Strict):
    """Label Studio users to map to raters (mappings not named stay as they are)."""

    annotators: AnnotatorMap


class Annotator(BaseModel):
    """One Label Studio user and the rater its annotations are labels of."""

    ls_user: int = Field(description="The Label Studio user id.")
    email: str | None = Field(description="The user's email, when the mapping named it or Label Studio told it.")
    rater: str = Field(description="External id of the rater.")


class AnnotatorsRead(BaseModel):
    """The project's Label Studio users mapped to raters, by user id."""

    annotators: list[Annotator] = Field(description="Every mapping of the project, by Label Studio user id.")


class AnnotatorsMapped(AnnotatorsRead):
    """What mapping Label Studio users did."""

    changed: list[str] = Field(description="Each mapping made or changed, in words (empty: all were already so).")
    moved: int = Field(
        description="Current labels moved from the `ls-user-<id>` raters onto the mapped raters (labels that "
        "arrived before the mapping)."
    )


@dataclass(frozen=True)
class Wanted:
    """One mapping asked for, its user resolved to an id."""

    ls_user: int
    email: str | None
    rater: str


def user_raters(session: Session, project_id: str) -> UserRaters:
    """The project's mapped users, by Label Studio user id and by email (casefolded)."""
    rows = session.execute(
        select(LabelStudioUser.ls_user, LabelStudioUser.email, Rater.external_id)
        .join(Rater, Rater.id == LabelStudioUser.rater_id)
        .where(LabelStudioUser.project_id == project_id)
    ).all()
    return UserRaters(
        by_id={user: rater for user, _, rater in rows},
        by_email={email.casefold(): rater for _, email, rater in rows if email},
    )


def annotators_read(session: Session, project_id: str) -> AnnotatorsRead:
    """Every mapping of the project, by Label Studio user id."""
    rows = session.execute(
        select(LabelStudioUser.ls_user, LabelStudioUser.email, Rater.external_id)
        .join(Rater, Rater.id == LabelStudioUser.rater_id)
        .where(LabelStudioUser.project_id == project_id)
        .order_by(LabelStudioUser.ls_user)
    ).all()
    return AnnotatorsRead(annotators=[Annotator(ls_user=u, email=e, rater=r) for u, e, r in rows])


def known_emails(session: Session, project_id: str) -> dict[str, int]:
    """Label Studio users' emails this project has seen, casefolded, to their ids: the names imports and syncs
    gave the raters ``ls-user-<id>`` (a snapshot's ``completed_by`` carries the email), and the mappings'."""
    found: dict[str, int] = {}
    for ext, name in session.execute(
        select(Rater.external_id, Rater.name).where(
            Rater.project_id == project_id, Rater.external_id.startswith(USER_PREFIX), Rater.name.is_not(None)
        )
    ):
        if (user := _user_of(ext)) is not None and "@" in str(name):
            found[str(name).casefold()] = user
    for user, email in session.execute(
        select(LabelStudioUser.ls_user, LabelStudioUser.email).where(
            LabelStudioUser.project_id == project_id, LabelStudioUser.email.is_not(None)
        )
    ):
        found[str(email).casefold()] = user
    return found


def _user_of(rater: str) -> int | None:
    """The Label Studio user id of a rater ``ls-user-<id>``; ``None`` for any other rater."""
    tail = rater[len(USER_PREFIX) :] if rater.startswith(USER_PREFIX) else ""
    return int(tail) if tail.isdigit() else None


def wanted_annotators(annotators: Mapping[str, str], emails: Mapping[str, int]) -> list[Wanted]:
    """The mappings asked for, each user resolved to its id: a key of digits is a Label Studio user id (its
    email filled from ``emails`` when known), a key with ``@`` an email looked up in ``emails`` (casefolded ->
    id); 422 for any other key or an unknown email.

    >>> [(w.ls_user, w.email, w.rater) for w in wanted_annotators({"7": "ann-1", "Ana@X.org": "ann-2"},
    ...                                                          {"ana@x.org": 9})]
    [(7, None, 'ann-1'), (9, 'Ana@X.org', 'ann-2')]
    >>> [(w.ls_user, w.email) for w in wanted_annotators({"9": "ann-2"}, {"ana@x.org": 9})]
    [(9, 'ana@x.org')]
    >>> wanted_annotators({"ana": "ann-1"}, {})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    service.core.errors.Invalid: annotators: 'ana' is neither a Label Studio user id nor an email; ...
    """
    wanted: list[Wanted] = []
    email_of = {user: email for email, user in emails.items() if "@" in email}
    for user, rater in annotators.items():
        key = user.strip()
        if key.isdigit() and int(key) > 0:
            wanted.append(Wanted(int(key), email_of.get(int(key)), rater))
        elif "@" in key:
            if key.casefold() not in emails:
                raise Invalid(
                    f"annotators: Label Studio user {echo(key)} is not known here: no import or sync has shown that "
                    "email yet; map the user by its id (Label Studio: Organization > People), or connect, which "
                    "asks Label Studio",
                    code="unknown_ls_user",
                )
            wanted.append(Wanted(emails[key.casefold()], key, rater))
        else:
            raise Invalid(
                f"annotators: {echo(user)} is neither a Label Studio user id nor an email; "
                'map e.g. {"7": "ann-1"} or {"ana@example.com": "ann-1"}',
                code="validation_error",
            )
    return wanted


def _moves(session: Session, source: int, target: int) -> list[tuple[int, str, str, str | None]]:
    """Each current label of ``source`` as (item id, criterion, value, ``target``'s current value of that cell
    or ``None``): one pass over ``source``'s key range, ``target``'s cells looked up by key."""
    theirs, ours = aliased(CurrentLabel), aliased(CurrentLabel)
    rows = session.execute(
        select(theirs.item_id, theirs.criterion, theirs.value, ours.value)
        .outerjoin(
            ours, and_(ours.rater_id == target, ours.item_id == theirs.item_id, ours.criterion == theirs.criterion)
        )
        .where(theirs.rater_id == source)
        .order_by(theirs.item_id, theirs.criterion)
    )
    return [(item, criterion, value, held) for item, criterion, value, held in rows]


@dataclass(frozen=True)
class Checked:
    """A mapping that passed every check: its target's id, and the rater ``ls-user-<id>`` it takes labels
    from (``None`` when the user labelled nothing yet)."""

    want: Wanted
    target: int
    source: int | None
    current: int | None
    """The rater the user is mapped to now (``None``: not mapped)."""


def checked_annotators(session: Session, project: Project, wanted: list[Wanted], *, max_rows: int) -> list[Checked]:
    """The mappings, checked before anything is written.

    422: a rater the project does not have, a judge, another user's ``ls-user-<id>``, one rater named for two
    users, one user named twice. 409: a rater another user is mapped to; a user mapped to another rater that
    already took labels through it; a cell the user and the rater both label with different values. 413: more
    labels to move than one request writes (``max_rows``).
    """
    users = [w.ls_user for w in wanted]
    if len(set(users)) != len(users):
        raise Invalid("annotators: one Label Studio user is named twice (by id and by email)", code="validation_error")
    targets = [w.rater for w in wanted]
    if len(set(targets)) != len(targets):
        twice = sorted({t for t in targets if targets.count(t) > 1})[0]
        raise Invalid(
            f"annotators: rater {echo(twice)} is named for two Label Studio users; a rater is one person",
            code="validation_error",
        )
    sources = {f"{USER_PREFIX}{w.ls_user}" for w in wanted}
    raters = {
        ext: (rid, kind)
        for ext, rid, kind in session.execute(
            select(Rater.external_id, Rater.id, Rater.kind).where(
                Rater.project_id == project.id, Rater.external_id.in_(sorted({*targets, *sources}))
            )
        )
    }
    mapped = {
        user: (rater_id, ext)
        for user, rater_id, ext in session.execute(
            select(LabelStudioUser.ls_user, LabelStudioUser.rater_id, Rater.external_id)
            .join(Rater, Rater.id == LabelStudioUser.rater_id)
            .where(LabelStudioUser.project_id == project.id)
        )
    }
    taken = {ext: user for user, (_, ext) in mapped.items()}
    checked: list[Checked] = []
    for want in wanted:
        if want.rater not in raters:
            raise Invalid(
                f"annotators: rater {echo(want.rater)} is not a rater of this project: create it first "
                "(POST /projects/{pid}/raters), or map the user to the rater its batches are issued to",
                code="unknown_rater",
            )
        target, kind = raters[want.rater]
        if kind == "judge":
            raise Invalid(
                f"annotators: rater {echo(want.rater)} is a judge; a Label Studio user is a human annotator "
                "(map it to a human or primary rater)",
                code="judge_rater",
            )
        if (other := _user_of(want.rater)) is not None and other != want.ls_user:
            raise Invalid(
                f"annotators: rater {echo(want.rater)} is Label Studio user {other}'s own rater, not user "
                f"{want.ls_user}'s",
                code="validation_error",
            )
        if taken.get(want.rater, want.ls_user) != want.ls_user:
            raise Conflict(
                f"rater {echo(want.rater)} is already Label Studio user {taken[want.rater]}'s; a rater is one person",
                code="rater_mapped",
            )
        current = mapped.get(want.ls_user)
        if current is not None and current[0] != target:
            linked = session.scalar(
                select(func.count())
                .select_from(LabelStudioLink)
                .where(LabelStudioLink.project_id == project.id, LabelStudioLink.rater_id == current[0])
            )
            if linked:
                raise Conflict(
                    f"Label Studio user {want.ls_user} is mapped to rater {echo(current[1])}, which already has "
                    f"{linked} Label Studio annotations through it; that mapping stays",
                    code="already_mapped",
                )
        source = raters.get(f"{USER_PREFIX}{want.ls_user}", (None, ""))[0]
        checked.append(Checked(want, target, source if source != target else None, current[0] if current else None))
    givers = [one.source for one in checked if one.source is not None]
    moving = (
        session.scalar(select(func.count()).select_from(CurrentLabel).where(CurrentLabel.rater_id.in_(givers)))
        if givers
        else 0
    ) or 0
    if moving > max_rows:  # before the cells are read
        raise TooLarge(f"{moving} labels to move in one request; the limit is {max_rows}", code="too_many_rows")
    for one in checked:
        if one.source is None:
            continue
        clash = [
            (item, crit)
            for item, crit, value, held in _moves(session, one.source, one.target)
            if held not in (None, value)
        ]
        if clash:
            items = external_ids(session, Item, (i for i, _ in clash[:10]))
            raise Conflict(
                f"Label Studio user {one.want.ls_user} (rater {USER_PREFIX}{one.want.ls_user}) and rater "
                f"{echo(one.want.rater)} label {len(clash)} cells differently, e.g. item {echo(items[clash[0][0]])} "
                f"({clash[0][1]}); retract one of them (DELETE the label) and map again: nothing was written",
                code="labels_conflict",
                fields=[{"item": items[i], "criterion": c} for i, c in clash[:10]],
            )
    return checked


def map_annotators(
    session: Session, project: Project, principal: Principal, wanted: list[Wanted], *, max_rows: int
) -> AnnotatorsMapped:
    """Map the users (checked first, nothing written on a refusal) and move what they labelled before."""
    lock_project(session, project.id)
    checked = checked_annotators(session, project, wanted, max_rows=max_rows)
    changed: list[str] = []
    moved = 0
    for one in checked:
        want = one.want
        if one.current == one.target:
            row = session.get(LabelStudioUser, (project.id, want.ls_user))
            if row is not None and want.email and row.email != want.email:
                row.email = want.email
            continue
        row = session.get(LabelStudioUser, (project.id, want.ls_user))
        if row is None:
            session.add(
                LabelStudioUser(project_id=project.id, ls_user=want.ls_user, rater_id=one.target, email=want.email)
            )
        else:
            row.rater_id, row.email = one.target, want.email or row.email
        session.flush()
        changed.append(f"Label Studio user {want.ls_user} is rater {want.rater}")
        if one.source is None:
            continue
        theirs = _moves(session, one.source, one.target)
        retract_labels(session, project, [(item, one.source, crit) for item, crit, _, _ in theirs])
        new = [(item, crit, value) for item, crit, value, held in theirs if held is None]
        if new:
            items = external_ids(session, Item, (i for i, _, _ in new))
            rows: list[LabelIn] = [
                {"item": items[i], "rater": want.rater, "criterion": c, "value": v} for i, c, v in new
            ]
            write_labels(session, project, principal, rows)
        session.execute(
            update(LabelStudioLink)
            .where(LabelStudioLink.project_id == project.id, LabelStudioLink.rater_id == one.source)
            .values(rater_id=one.target)
            .execution_options(synchronize_session=False)
        )
        moved += len(theirs)
        if theirs:
            changed.append(
                f"{len(theirs)} label{'s' * (len(theirs) != 1)} of {USER_PREFIX}{want.ls_user} moved to {want.rater}"
            )
    return AnnotatorsMapped(**annotators_read(session, project.id).model_dump(), changed=changed, moved=moved)


class AnnotatorUnmapped(AnnotatorsRead):
    """What unmapping a Label Studio user did."""

    changed: list[str] = Field(description="What the unmapping did, in words.")
    moved: int = Field(
        description="Current labels moved back from the rater onto `ls-user-<id>`: those that came from Label "
        "Studio annotations (labels the rater has from anywhere else stay with it)."
    )


def unmap_annotator(
    session: Session, project: Project, principal: Principal, ls_user: int, *, max_rows: int
) -> AnnotatorUnmapped:
    """Undo a user's mapping (404 when it has none): the labels the rater holds through Label Studio
    annotations and predictions' links move back onto ``ls-user-<id>`` (created as a ``human`` rater when
    missing), the links follow; the rater keeps every label from elsewhere. Checked before anything is
    written: 409 when ``ls-user-<id>`` labels one of those cells differently, 413 past ``max_rows``."""
    lock_project(session, project.id)
    row = session.get(LabelStudioUser, (project.id, ls_user))
    if row is None:
        raise NotFound(f"Label Studio user {ls_user} is not mapped in this project", code="not_mapped")
    mapped = session.get(Rater, row.rater_id)
    assert mapped is not None  # a foreign key
    linked = {
        (item, criterion)
        for item, criterion in session.execute(
            select(LabelStudioLink.item_id, LabelStudioLink.criterion).where(
                LabelStudioLink.project_id == project.id, LabelStudioLink.rater_id == mapped.id
            )
        )
    }
    if len(linked) > max_rows:
        raise TooLarge(f"{len(linked)} labels to move in one request; the limit is {max_rows}", code="too_many_rows")
    own = f"{USER_PREFIX}{ls_user}"
    ensure_raters(session, project, [RaterCreate(external_id=own, kind="human", name=row.email)])
    source = session.scalars(select(Rater.id).where(Rater.project_id == project.id, Rater.external_id == own)).one()
    back = [move for move in _moves(session, mapped.id, source) if move[:2] in linked]
    clash = [(item, crit) for item, crit, value, held in back if held not in (None, value)]
    if clash:
        items = external_ids(session, Item, (i for i, _ in clash[:10]))
        raise Conflict(
            f"rater {echo(own)} and rater {echo(mapped.external_id)} label {len(clash)} cells differently, e.g. item "
            f"{echo(items[clash[0][0]])} ({clash[0][1]}); retract one of them (DELETE the label) and unmap again: "
            "nothing was written",
            code="labels_conflict",
            fields=[{"item": items[i], "criterion": c} for i, c in clash[:10]],
        )
    session.delete(row)
    retract_labels(session, project, [(item, mapped.id, crit) for item, crit, _, _ in back])
    new = [(item, crit, value) for item, crit, value, held in back if held is None]
    if new:
        items = external_ids(session, Item, (i for i, _, _ in new))
        rows: list[LabelIn] = [{"item": items[i], "rater": own, "criterion": c, "value": v} for i, c, v in new]
        write_labels(session, project, principal, rows)
    session.execute(
        update(LabelStudioLink)
        .where(LabelStudioLink.project_id == project.id, LabelStudioLink.rater_id == mapped.id)
        .values(rater_id=source)
        .execution_options(synchronize_session=False)
    )
    session.flush()
    changed = [f"Label Studio user {ls_user} is no longer rater {mapped.external_id}: its annotations are {own}'s"]
    if back:
        changed.append(f"{len(back)} label{'s' * (len(back) != 1)} of {mapped.external_id} moved back to {own}")
    return AnnotatorUnmapped(**annotators_read(session, project.id).model_dump(), changed=changed, moved=len(back))
