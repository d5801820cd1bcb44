"""A planned batch as Label Studio tasks, to import into the Label Studio project it is labelled in."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from service.data.models import Batch, Item, Project, Rater
from service.label_studio.mapping import ITEM_KEY, RATER_KEY


class TaskMeta(BaseModel):
    """Where an exported task comes from."""

    annoplan_batch: str = Field(description="The batch the task was exported from.")
    annoplan_rater: str = Field(description="External id of the rater the batch was issued to.")


class ExportedTask(BaseModel):
    """A Label Studio task to import: the item's data under its original keys, and its batch."""

    data: dict[str, Any] = Field(description="The item's text and features under their original keys.")
    meta: TaskMeta = Field(description="Where the task comes from.")


def batch_tasks(session: Session, project: Project, batch: Batch) -> list[ExportedTask]:
    """A batch's items as Label Studio tasks, in batch order; no labels of anyone.

    The text goes under the data key the project's labeling config reads (``text`` until
    one is known), so the tasks import into the project they came from; ``annoplan_rater`` names
    the batch's annotator, for the Data Manager tab that shows it its tasks.
    """
    text_key = (project.label_studio or {}).get("data_key") or "text"
    rater = session.scalar(select(Rater.external_id).where(Rater.id == batch.rater_id))
    found = {
        ext: (text, features)
        for ext, text, features in session.execute(
            select(Item.external_id, Item.text, Item.features).where(
                Item.project_id == batch.project_id, Item.external_id.in_(batch.items)
            )
        )
    }
    meta = TaskMeta(annoplan_batch=batch.id, annoplan_rater=str(rater))
    return [
        ExportedTask(
            data={
                **found[ext][1],
                **({text_key: found[ext][0]} if found[ext][0] is not None else {}),
                ITEM_KEY: ext,
                RATER_KEY: str(rater),
            },
            meta=meta,
        )
        for ext in batch.items
    ]
