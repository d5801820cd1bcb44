"""``annoplan sync`` and ``connect``: labels in from annotation tools, and the tools set up (Label Studio)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    pass

from service.cli.common import api_client

sync = typer.Typer(help="Bring labels in from annotation tools.", no_args_is_help=True)


@sync.command("label-studio")
def sync_label_studio(
    project: Annotated[str, typer.Option(help="The annoplan project id.")],
    ls_project: Annotated[int, typer.Option(help="The Label Studio project id.")],
    ls_url: Annotated[str, typer.Option(envvar="LABEL_STUDIO_URL", help="Label Studio's base URL.")] = "",
    ls_token: Annotated[str, typer.Option(envvar="LABEL_STUDIO_TOKEN", help="A Label Studio API token.")] = "",
    token_type: Annotated[
        str, typer.Option(help="Token (a legacy API token), Personal (a personal access token) or Bearer.")
    ] = "Token",
    from_name: Annotated[str | None, typer.Option(help="The choices control, when the config is ambiguous.")] = None,
    primary: Annotated[str | None, typer.Option(help="Label Studio id or email of the primary annotator.")] = None,
    judge_prefix: Annotated[str, typer.Option(help="Prefix of the judges' external ids.")] = "",
    criterion: Annotated[
        str | None, typer.Option(help="The criterion the labels are for (a rubric: one sync per criterion).")
    ] = None,
    url: Annotated[str, typer.Option(envvar="ANNOPLAN_URL", help="The annoplan server.")] = "http://127.0.0.1:8000",
    key: Annotated[str, typer.Option(envvar="ANNOPLAN_KEY", help="An admin key or a pm key of the project.")] = "",
) -> None:
    """Reconcile an annoplan project with a full snapshot of a Label Studio project (adds,
    updates, retractions, judges from predictions) and print what changed; safe to rerun.

    Example: annoplan sync label-studio --project p_... --ls-project 3 --ls-url http://127.0.0.1:8080
    (with ANNOPLAN_KEY and LABEL_STUDIO_TOKEN set)
    """
    _require_credentials(key, ls_url, ls_token)
    body = {
        "url": ls_url,
        "project": ls_project,
        "token": ls_token,
        "token_type": token_type,
        "from_name": from_name,
        "primary": primary,
        "judge_prefix": judge_prefix,
        "criterion": criterion,
    }
    with api_client(url, key, timeout=600) as c:
        done = c.sync_label_studio(project, **body).model_dump(mode="json")
    changes = done["changes"]
    typer.echo(
        f"{done['tasks']} tasks ({done['from_name']}): {changes['added']} added, "
        f"{changes['updated']} updated, {changes['retracted']} retracted, {changes['unchanged']} unchanged; "
        f"{len(done['unmapped'])} unmapped, {len(done['raters_created'])} raters created; "
        f"label_seq {done['labels']['label_seq']}"
    )
    if created := done["items"]["created"]:
        typer.echo(
            f"  {created} tasks were new to annoplan and became items (tasks added in Label Studio by hand): "
            "they are in no plan's lists until you plan again"
        )
    for u in done["unmapped"][:20]:
        typer.echo(f"  unmapped: task {u['task']} {u['rater']}: {u['value']!r}")
    if done.get("issues"):
        typer.echo(
            f"  {len(done['issues'])} annotations kept out of the labels, open in the inbox "
            f"(GET /projects/{project}/integrations/label-studio/issues)"
        )


connect = typer.Typer(help="Set up annotation tools to work with a project.", no_args_is_help=True)


@connect.command("label-studio")
def connect_label_studio(
    project: Annotated[str, typer.Option(help="The annoplan project id.")],
    ls_project: Annotated[int, typer.Option(help="The Label Studio project id.")],
    webhook_url: Annotated[
        str, typer.Option(help="annoplan's base URL as Label Studio reaches it (the webhook posts there).")
    ],
    ls_url: Annotated[str, typer.Option(envvar="LABEL_STUDIO_URL", help="Label Studio's base URL.")] = "",
    ls_token: Annotated[str, typer.Option(envvar="LABEL_STUDIO_TOKEN", help="A Label Studio API token.")] = "",
    token_type: Annotated[
        str, typer.Option(help="Token (a legacy API token), Personal (a personal access token) or Bearer.")
    ] = "Token",
    hide_predictions: Annotated[
        bool,
        typer.Option(
            help="Turn Label Studio's show_collab_predictions off; --no-hide-predictions refuses instead "
            "while annotators would see the judge's predictions."
        ),
    ] = True,
    annotator: Annotated[
        list[str] | None,
        typer.Option(
            help="USER=RATER: the Label Studio user (its id or email) whose annotations are labels of the rater "
            "(e.g. 7=ann-1, the rater its batches are issued to); repeat for each annotator."
        ),
    ] = None,
    url: Annotated[str, typer.Option(envvar="ANNOPLAN_URL", help="The annoplan server.")] = "http://127.0.0.1:8000",
    key: Annotated[str, typer.Option(envvar="ANNOPLAN_KEY", help="An admin key or a pm key of the project.")] = "",
) -> None:
    """Set a Label Studio project up for this project (predictions hidden, maximum_annotations at the
    plan's panel, the webhook with a new secret, a Data Manager tab per secondary) and print what changed;
    a rerun changes only what drifted, and rotates the webhook's secret.

    Example: annoplan connect label-studio --project p_... --ls-project 3 --webhook-url http://127.0.0.1:8000
    --annotator 7=ann-1 --annotator ana@example.com=ann-2
    (with ANNOPLAN_KEY, LABEL_STUDIO_URL and LABEL_STUDIO_TOKEN set)
    """
    _require_credentials(key, ls_url, ls_token)
    pairs = [a.partition("=") for a in annotator or []]
    if any(not user or not sep or not rater for user, sep, rater in pairs):
        raise typer.BadParameter("--annotator takes USER=RATER, e.g. 7=ann-1 or ana@example.com=ann-2")
    body = {
        "url": ls_url,
        "project": ls_project,
        "token": ls_token,
        "token_type": token_type,
        "webhook_url": webhook_url,
        "hide_predictions": hide_predictions,
        "annotators": {user.strip(): rater.strip() for user, _, rater in pairs},
    }
    with api_client(url, key, timeout=600) as c:
        done = c.connect_label_studio(project, **body).model_dump(mode="json")
    for change in done["changed"]:
        typer.echo(f"- {change}")
    typer.echo(
        f"webhook {done['webhook_id']} (pm key {done['key_id']}), maximum_annotations {done['maximum_annotations']}"
    )
    users = {a["rater"]: a for a in done["annotators"]}
    for rater, view in sorted(done["views"].items()):
        who = users.get(rater)
        by = f" (Label Studio user {who['ls_user']}{', ' + who['email'] if who['email'] else ''})" if who else ""
        typer.echo(f"  Data Manager tab {view} 'annoplan: {rater}'{by} lists {rater}'s batches")


def _require_credentials(key: str, ls_url: str, ls_token: str) -> None:
    """Refuse a Label Studio command missing the annoplan key, Label Studio's URL or its token."""
    if not (key and ls_url and ls_token):
        raise typer.BadParameter(
            "pass --key, --ls-url and --ls-token (or ANNOPLAN_KEY, LABEL_STUDIO_URL, LABEL_STUDIO_TOKEN)"
        )
