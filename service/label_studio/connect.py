"""Connect: set up a Label Studio project for the integration through its REST API, and say what changed.

What the integration needs from the Label Studio project: a labeling config this service can
read (a TextArea-only config is refused before anything changes), collaborators' predictions
hidden from annotators (``show_collab_predictions: false``: an annotator who sees the judge's
prediction is no independent human), ``maximum_annotations`` at least the plan's panel (the
primary and every secondary), the webhook to this project with its secret header, and one Data
Manager tab per secondary showing the tasks of that annotator's batches (a filter on the
``annoplan_rater`` field batch exports carry, so tasks imported later appear without a refresh).
Label Studio users named in ``annotators`` are mapped to raters (:mod:`service.label_studio.annotators`;
an email is looked up in Label Studio's user list), and each mapped rater gets its tab too.
Running it again changes only what drifted. The Label Studio token is used for these calls only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from service.core.errors import Conflict, Invalid, echo
from service.core.outbound import OutboundPolicy
from service.data.keys import Principal, create_key, revoke_key
from service.data.models import ApiKey, Assignment, Project, Rater
from service.label_studio.annotators import (
    Annotator,
    AnnotatorMap,
    AnnotatorsMapped,
    Wanted,
    annotators_read,
    checked_annotators,
    known_emails,
    map_annotators,
    wanted_annotators,
)
from service.label_studio.config import choice_controls, label_controls
from service.label_studio.mapping import RATER_KEY
from service.label_studio.sync import (
    LabelStudioTarget,
    LabelStudioUnavailable,
    answer_json,
    answer_object,
    label_studio_calls,
)
from service.planning.plans import current_plan
from service.schemas.keys import Role

VIEW_PREFIX = "annoplan: "
"""The title of a tab this service manages starts with this, then the rater's external id."""


class ConnectRequest(LabelStudioTarget):
    """Where the Label Studio project is, how this service is reached from it, and what may be changed."""

    webhook_url: str = Field(
        max_length=2000,
        pattern=r"^https?://",
        description="This service's base URL as Label Studio reaches it, e.g. `https://annoplan.example.org`; "
        "the webhook posts to `<webhook_url>/projects/<pid>/webhooks/label-studio`.",
    )
    hide_predictions: bool = Field(
        True,
        description="Turn `show_collab_predictions` off in Label Studio (annotators would see the judge's "
        "predictions). `false`: leave it, and refuse to connect while Label Studio shows them.",
    )
    annotators: AnnotatorMap = Field(
        default_factory=dict,
        description="Label Studio user (id or email, which Label Studio is asked for) -> the rater its annotations "
        "are labels of, as `POST .../integrations/label-studio/annotators` takes it; checked before anything "
        "changes, made once Label Studio is set up.",
    )


class ConnectResult(BaseModel):
    """What connect changed in the Label Studio project (empty ``changed``: it was already set up)."""

    changed: list[str] = Field(description="Each change made, in words, in the order made.")
    webhook_id: int = Field(description="The Label Studio webhook posting to this project.")
    maximum_annotations: int = Field(description="Label Studio's annotations per task now.")
    views: dict[str, int] = Field(
        description="Per secondary annotator, and per rater a Label Studio user is mapped to (external id), its "
        "Data Manager tab's id."
    )
    key_id: str = Field(description="The pm key the webhook authenticates with (a new one when it was rotated).")
    annotators: list[Annotator] = Field(description="Every Label Studio user mapped to a rater, after this connect.")
    moved: int = Field(description="Labels moved onto mapped raters (given before their users were mapped).")


@dataclass(frozen=True)
class WebhookKey:
    """The pm key made for the webhook, the keys it replaces, and the panel the project plans."""

    key_id: str
    secret: str
    replaces: list[str]
    panel: int
    secondaries: list[str]


def webhook_key(session: Session, project_id: str, req: ConnectRequest) -> WebhookKey:
    """A new pm key for the webhook of ``req``'s Label Studio project (the earlier ones it replaces are revoked
    once Label Studio holds the new one), and the panel: the primary and each secondary with a planned list
    under the plan in force (every human rater while there is no plan)."""
    name = f"label-studio webhook: {req.url} project {req.project}"
    replaces = list(
        session.scalars(
            select(ApiKey.id).where(ApiKey.project_id == project_id, ApiKey.name == name, ApiKey.revoked_at.is_(None))
        )
    )
    plan = current_plan(session, project_id)
    humans = select(Rater.external_id).where(Rater.project_id == project_id, Rater.kind == "human")
    if plan is not None:
        planned = select(Assignment.rater_id).where(Assignment.plan_id == plan.id).distinct()
        humans = humans.where(Rater.id.in_(planned))
    secondaries = sorted(session.scalars(humans))
    row, secret = create_key(session, role=Role.PM, project_id=project_id, name=name)
    return WebhookKey(row.id, secret, replaces, 1 + len(secondaries), secondaries)


def connect_key(
    session: Session, project: Project, req: ConnectRequest, ls_emails: dict[str, int], *, max_rows: int
) -> tuple[WebhookKey, list[Wanted], list[str]]:
    """Before Label Studio is changed: the annotators to map (checked: 422, 409, 413 here), the webhook's new
    key, and the raters that get a tab."""
    wanted = wanted_annotators(req.annotators, {**known_emails(session, project.id), **ls_emails})
    checked_annotators(session, project, wanted, max_rows=max_rows)
    key = webhook_key(session, project.id, req)
    return key, wanted, tab_raters(session, project.id, key.secondaries, wanted)


def connect_finish(
    session: Session, project: Project, principal: Principal, key: WebhookKey, wanted: list[Wanted], *, max_rows: int
) -> AnnotatorsMapped:
    """Once Label Studio holds the new key: the keys it replaces revoked, the annotators mapped."""
    revoke_keys(session, key.replaces)
    return map_annotators(session, project, principal, wanted, max_rows=max_rows)


def revoke_keys(session: Session, key_ids: list[str]) -> None:
    """Revoke the webhook keys given (replaced ones after a connect, or the new one when it failed)."""
    for key_id in key_ids:
        revoke_key(session, key_id)


def _view_body(ls_project: int, rater: str) -> dict[str, Any]:
    item = {"filter": f"filter:tasks:data.{RATER_KEY}", "operator": "equal", "type": "String", "value": rater}
    return {
        "project": ls_project,
        "data": {"title": VIEW_PREFIX + rater, "filters": {"conjunction": "and", "items": [item]}},
    }


def checked_project(
    req: ConnectRequest, policy: OutboundPolicy, *, numeric: bool = False, pairwise: bool = False
) -> tuple[dict[str, Any], dict[str, int]]:
    """The Label Studio project, read before anything changes, and (when ``annotators`` are to be mapped) Label
    Studio's users' emails (casefolded) to their ids: 422 for a config this service cannot read (no Rating or
    Number control for a ``numeric`` project, no Pairwise or Choices control for a ``pairwise`` one, no Choices
    control for another) or a user id Label Studio does not
    list, 409 when predictions are shown and ``hide_predictions`` is off, 502 when Label Studio fails."""
    emails: dict[str, int] = {}
    with label_studio_calls(req, policy, max_calls=40) as http:
        found = answer_object(http.get(f"/api/projects/{req.project}"), "the project")
        if req.annotators:
            emails = _users(answer_json(http.get("/api/users/", params={"page_size": 1000}), "the users"))
    unknown = sorted(
        user for user in req.annotators if user.strip().isdigit() and int(user.strip()) not in emails.values()
    )
    if unknown:
        raise Invalid(
            f"annotators: Label Studio lists no user {echo(unknown[0])} ({len(emails)} users listed); "
            "its users' ids are in Label Studio under Organization > People",
            code="unknown_ls_user",
        )
    config = found.get("label_config")
    controls = choice_controls(config if isinstance(config, str) else "")
    label_controls(controls, numeric=numeric, pairwise=pairwise)  # 422: TextArea-only
    if found.get("show_collab_predictions") is not False and not req.hide_predictions:
        raise Conflict(
            "Label Studio shows collaborators' predictions to annotators (show_collab_predictions): their labels "
            "would not be independent of the judge's; connect with hide_predictions true, or turn it off in the "
            "project's settings",
            code="predictions_shown",
        )
    return found, emails


def _users(listed: Any) -> dict[str, int]:
    """Label Studio's user list (a list, or a page of ``results``) as emails (casefolded) -> ids; a user
    without an email is listed under ``#<id>``."""
    rows = listed.get("results") if isinstance(listed, dict) else listed
    if not isinstance(rows, list):
        raise LabelStudioUnavailable("Label Studio's user list is not a list")
    users: dict[str, int] = {}
    for row in rows:
        if isinstance(row, dict) and isinstance(row.get("id"), int):
            email = row.get("email")
            users[email.casefold() if isinstance(email, str) and email else f"#{row['id']}"] = row["id"]
    return users


def tab_raters(session: Session, project_id: str, secondaries: list[str], wanted: list[Wanted]) -> list[str]:
    """The raters that get a Data Manager tab: each secondary, and each rater a Label Studio user is (or is
    about to be) mapped to, the primary included (its batches then have a tab too)."""
    mapped = [a.rater for a in annotators_read(session, project_id).annotators]
    return sorted({*secondaries, *mapped, *(w.rater for w in wanted)})


def connected(
    req: ConnectRequest,
    policy: OutboundPolicy,
    found: dict[str, Any],
    *,
    hook_url: str,
    secret: str,
    panel: int,
    tab_for: list[str],
) -> tuple[list[str], int, int, dict[str, int]]:
    """Set the project up as the module says; the changes in words, the webhook id, the annotations per task
    and the tabs. 502 when Label Studio fails part way (what was changed before stays changed: connect again)."""
    changed: list[str] = []
    settings: dict[str, Any] = {}
    if found.get("show_collab_predictions") is not False:
        settings["show_collab_predictions"] = False
        changed.append("collaborators' predictions hidden from annotators (show_collab_predictions: false)")
    current = found.get("maximum_annotations")
    maximum = current if isinstance(current, int) and current >= panel else panel
    if maximum != current:
        settings["maximum_annotations"] = maximum
        changed.append(f"maximum_annotations {current} -> {maximum} (the plan's panel: the primary and secondaries)")
    header = {"X-Annoplan-Secret": secret}
    with label_studio_calls(req, policy, max_calls=40) as http:
        if settings:
            answer_object(http.patch(f"/api/projects/{req.project}", json=settings), "the project's settings")
        hooks = answer_json(http.get("/api/webhooks", params={"project": req.project}), "the webhooks")
        ours = [h for h in hooks if isinstance(h, dict) and h.get("url") == hook_url] if isinstance(hooks, list) else []
        hook = {"project": req.project, "url": hook_url, "send_payload": True, "send_for_all_actions": True}
        if ours:
            answer = answer_object(
                http.patch(f"/api/webhooks/{ours[0]['id']}", json={**hook, "headers": header}), "the webhook"
            )
            changed.append(f"webhook {answer.get('id')} given a new secret")
        else:
            answer = answer_object(http.post("/api/webhooks", json={**hook, "headers": header}), "a new webhook")
            changed.append(f"webhook {answer.get('id')} created, posting to {hook_url}")
        hook_id = answer.get("id")
        listed = answer_json(http.get("/api/dm/views", params={"project": req.project}), "the Data Manager tabs")
        tabs = {
            v["data"]["title"][len(VIEW_PREFIX) :]: v
            for v in (listed if isinstance(listed, list) else [])
            if isinstance(v, dict)
            and isinstance(v.get("data"), dict)
            and str(v["data"].get("title", "")).startswith(VIEW_PREFIX)
        }
        views: dict[str, int] = {}
        for rater in tab_for:
            body = _view_body(req.project, rater)
            tab = tabs.get(rater)
            if tab is None:
                tab = answer_object(http.post("/api/dm/views", json=body), "a new Data Manager tab")
                changed.append(f"tab {VIEW_PREFIX + rater!r} created (tasks of {rater}'s batches)")
            elif tab["data"].get("filters") != body["data"]["filters"]:
                tab = answer_object(http.patch(f"/api/dm/views/{tab['id']}", json=body), "a Data Manager tab")
                changed.append(f"tab {VIEW_PREFIX + rater!r} filter restored")
            views[rater] = int(tab["id"])
    if not isinstance(hook_id, int):
        raise LabelStudioUnavailable("Label Studio's webhook answer has no integer id")
    return changed, hook_id, maximum, views
