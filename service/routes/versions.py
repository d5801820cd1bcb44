"""Judge versions: add and list a judge's versions, compare two on shared items, watch one for drift."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import JSONResponse

from service.core.errors import Invalid, echo, error_responses
from service.core.pagination import Page, PageDep, page_of
from service.data.idempotency import IdempotencyKey, idempotent_write, request_fingerprint
from service.data.models import Project
from service.data.queries import project_rater
from service.data.versions import add_version, find_rater, set_drift_watch, versioned_judge, versions_page
from service.deps import (
    PrincipalDep,
    ProjectForPM,
    ProjectForPMWrite,
    ProjectForViewer,
    ProjectId,
    ReadSession,
    SettingsDep,
    WriteSession,
)
from service.documents.versions import judge_drift, version_comparison
from service.planning.anchors import anchor_panel, anchor_panel_read, freeze_anchor_panel
from service.schemas.versions import (
    AnchorPanelCreate,
    AnchorPanelRead,
    DriftRead,
    DriftWatchRead,
    DriftWatchSettings,
    JudgeVersionCreate,
    JudgeVersionRead,
    VersionComparisonRead,
)

router = APIRouter(prefix="/projects/{pid}/raters/{rid}", tags=["judge versions"])
RaterId = Annotated[str, Path(description="The judge's id (or its external id).")]
Criterion = Annotated[str | None, Query(description="Criterion (default: the project's first).")]


def _criterion(project: Project, criterion: str | None) -> str:
    name = criterion or project.criteria[0]
    if name not in project.criteria:
        raise Invalid(f"unknown criterion {echo(name)}; the project has {project.criteria}")
    return name


@router.post(
    "/versions", status_code=201, response_model=JudgeVersionRead, responses=error_responses(401, 403, 404, 409, 422)
)
def create_version(
    pid: ProjectId,
    project: ProjectForPMWrite,
    rid: RaterId,
    body: JudgeVersionCreate,
    request: Request,
    session: WriteSession,
    principal: PrincipalDep,
    idem: IdempotencyKey = None,
) -> JSONResponse:
    """Add a version of a judge (a new prompt or model); it labels as the judge rater `<judge>@<name>`.

    422 when the rater is not a judge or is itself a version; 409 when the name (or the rater id it
    makes) is taken.
    """

    def write() -> tuple[int, JudgeVersionRead]:
        judge = project_rater(session, project.id, rid)
        version, rater = add_version(session, project, judge, body)
        return 201, JudgeVersionRead(
            name=version.name,
            rater=rater.external_id,
            rater_id=str(rater.id),
            judge=judge.external_id,
            model=version.model,
            prompt_digest=version.prompt_digest,
            created_at=version.created_at,
            n_labels=0,
        )

    return idempotent_write(
        session, principal, idem, request_fingerprint(request, body.model_dump_json().encode()), write
    )


@router.get("/versions", response_model=Page[JudgeVersionRead], responses=error_responses(401, 403, 404, 422))
def list_versions(
    pid: ProjectId, project: ProjectForViewer, rid: RaterId, session: ReadSession, page: PageDep
) -> Page[JudgeVersionRead]:
    """A judge's versions, oldest first, with their label counts."""
    judge = versioned_judge(session, find_rater(session, project.id, rid))
    return page_of(
        versions_page(session, judge.id, page),
        page,
        key=lambda row: row[0].rater_id,
        read=lambda row: JudgeVersionRead(
            name=row[0].name,
            rater=row[1].external_id,
            rater_id=str(row[1].id),
            judge=judge.external_id,
            model=row[0].model,
            prompt_digest=row[0].prompt_digest,
            created_at=row[0].created_at,
            n_labels=row[2],
        ),
    )


@router.get("/versions/compare", response_model=VersionComparisonRead, responses=error_responses(401, 403, 404, 422))
def compare_judge_versions(
    pid: ProjectId,
    project: ProjectForViewer,
    rid: RaterId,
    session: ReadSession,
    settings: SettingsDep,
    old: Annotated[str, Query(description="The old version's name (or the judge's own external id).")],
    new: Annotated[str, Query(description="The new version's name (or the judge's own external id).")],
    criterion: Criterion = None,
    seed: Annotated[int, Query(ge=0, lt=2**63, description="Seed of the paired bootstrap.")] = 0,
) -> VersionComparisonRead:
    """Two versions of a judge on the items both and the primary labelled (docs/method.md §12): each
    version's agreement with the primary, their agreement with each other, the flip rate, McNemar's
    chi-square and exact p on the discordant items, and a paired bootstrap interval of the change.
    """
    judge = versioned_judge(session, find_rater(session, project.id, rid))
    return version_comparison(
        session,
        project,
        judge,
        old,
        new,
        _criterion(project, criterion),
        n_resamples=settings.bootstrap_resamples,
        seed=seed,
    )


@router.get("/drift", response_model=DriftRead, responses=error_responses(401, 403, 404, 422))
def get_drift(
    pid: ProjectId,
    project: ProjectForViewer,
    rid: RaterId,
    session: ReadSession,
    baseline: Annotated[float, Query(gt=0, lt=1, description="The agreement the judge was approved at, p0.")],
    drop: Annotated[float, Query(gt=0, lt=1, description="The drop in agreement to detect.")] = 0.05,
    horizon: Annotated[int, Query(ge=1, le=10**9, description="Labels over which false alarms are bounded.")] = 10_000,
    alpha: Annotated[float, Query(ge=1e-9, lt=1, description="Bound on any false alarm within the horizon.")] = 0.05,
    criterion: Criterion = None,
) -> DriftRead:
    """The drift watch of a judge (or a version): a CUSUM e-detector on its agreement with the primary,
    pairs in the order their later label arrived (docs/method.md §12). 422 unless drop < baseline.
    """
    judge = find_rater(session, project.id, rid)
    if judge.kind != "judge":
        raise Invalid(f"rater {echo(judge.external_id)} is a {judge.kind}, not a judge")
    if drop >= baseline:
        raise Invalid(f"drop ({drop}) must be below baseline ({baseline})")
    return judge_drift(
        session,
        project,
        judge,
        _criterion(project, criterion),
        baseline=baseline,
        drop=drop,
        horizon=horizon,
        alpha=alpha,
    )


@router.put("/drift-watch", response_model=DriftWatchRead, responses=error_responses(401, 403, 404, 422))
def put_drift_watch(
    pid: ProjectId, project: ProjectForPMWrite, rid: RaterId, body: DriftWatchSettings, session: WriteSession
) -> DriftWatchRead:
    """Watch a judge (or a version) for drift with these settings (pm): the webhook sender announces the
    detector's alarm once as `judge.drifted`; setting the watch again clears the alarm. 422 unless
    `drop < baseline`, or for a rater that is not a judge.
    """
    judge = project_rater(session, project.id, rid)
    watch = set_drift_watch(session, judge, _criterion(project, body.criterion), body)
    return DriftWatchRead(
        judge=judge.external_id,
        criterion=watch.criterion,
        baseline=watch.baseline,
        drop=watch.drop,
        horizon=watch.horizon,
        alpha=watch.alpha,
        alarm_label_seq=watch.alarm_label_seq,
    )


@router.post(
    "/anchor-panel", status_code=201, response_model=AnchorPanelRead, responses=error_responses(401, 403, 404, 409, 422)
)
def post_anchor_panel(
    pid: ProjectId, project: ProjectForPMWrite, rid: RaterId, body: AnchorPanelCreate, session: WriteSession
) -> AnchorPanelRead:
    """Freeze a judge's anchor panel (pm; docs/method.md §12): the items each new version re-labels, so that
    `/versions/compare` detects a drop of `drop` in agreement with the primary with probability `power` at
    two-sided level `alpha` (Connor's paired-proportions size at the discordance `psi`), drawn by Strat over
    the primary's labels among the items the judge and the primary labelled. 422 for a rater that is not a
    judge (or is a version), a project without a primary, or a discordance below the drop; 409 when the judge
    has a panel already or too few labelled items for its size. Nothing is written then.
    """
    judge = project_rater(session, project.id, rid)
    panel = freeze_anchor_panel(session, project, judge, _criterion(project, body.criterion), body)
    return anchor_panel_read(session, judge, panel)


@router.get("/anchor-panel", response_model=AnchorPanelRead, responses=error_responses(401, 403, 404, 422))
def get_anchor_panel(pid: ProjectId, project: ProjectForPM, rid: RaterId, session: ReadSession) -> AnchorPanelRead:
    """A judge's frozen anchor panel (pm: it names items), its items in labelling order for the judge's
    pipeline and how many of them each version has labelled; 404 when it has none."""
    judge = versioned_judge(session, find_rater(session, project.id, rid))
    return anchor_panel_read(session, judge, anchor_panel(session, judge))
