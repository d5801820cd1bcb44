"""ORM models: projects, items, raters, append-only label events, keys, idempotency records."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from typing import Any, get_args

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Enum,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.engine.default import DefaultExecutionContext
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from service.core.identifiers import collision_key
from service.schemas.keys import Role
from service.schemas.projects import DecisionSettings, ProjectKind, ProjectScale

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# BigInteger primary keys autoincrement on PostgreSQL; on SQLite only INTEGER is the rowid.
BigId = BigInteger().with_variant(Integer, "sqlite")


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp stored as UTC and always read back timezone-aware (SQLite drops the zone)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        return value.astimezone(UTC) if value is not None and value.tzinfo else value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


def utcnow() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


def new_public_id(prefix: str) -> str:
    """An opaque, unguessable id such as ``p_3f9a...``."""
    return f"{prefix}_{secrets.token_hex(8)}"


def _values(members: type[Role]) -> list[str]:
    """An enum column stores its members' values (``"pm"``), not their names (``"PM"``)."""
    return [member.value for member in members]


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {dict[str, Any]: JSON, list[str]: JSON, datetime: UTCDateTime()}


def table_of(model: type[Base]) -> Table:
    """A mapped class's table (SQLAlchemy types ``__table__`` as any ``FromClause``)."""
    table = model.__table__
    assert isinstance(table, Table)
    return table


class Project(Base):
    __tablename__ = "projects"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    labels: Mapped[list[str]]
    scale: Mapped[ProjectScale] = mapped_column(
        Enum(*get_args(ProjectScale), native_enum=False, length=16, create_constraint=True, name="scale")
    )
    criteria: Mapped[list[str]]
    allow_abstain: Mapped[bool] = mapped_column(Boolean, default=False)
    decision: Mapped[dict[str, Any]]
    target: Mapped[dict[str, Any]]
    label_seq: Mapped[int] = mapped_column(BigInteger, default=0)
    item_count: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # Label Studio choice -> project label, consulted before the exact and case-insensitive match
    # (null: no mapping).
    label_map: Mapped[dict[str, Any] | None]
    # The Label Studio choices control last read from a labeling config (name, data key, choices).
    label_studio: Mapped[dict[str, Any] | None]
    # Seed of the item order that breaks ties of equal arrival rank (docs/method.md §8.2; null: a hash of
    # the id), fixed at creation, before any label.
    order_seed: Mapped[int | None] = mapped_column(BigInteger)
    # The label_seq of the first look (the first reliability document computed): the labels in hand then
    # are the opening, read as one rank (null: no look yet).
    opening_seq: Mapped[int | None] = mapped_column(BigInteger)
    # A numeric project's range {min, max, step}: its labels are numbers in it (null: a label scale).
    value_range: Mapped[dict[str, Any] | None]
    # pointwise (a label per item) or pairwise (answers A and B of a prompt compared; docs/method.md §13)
    kind: Mapped[ProjectKind] = mapped_column(
        Enum(*get_args(ProjectKind), native_enum=False, length=16, create_constraint=True, name="kind"),
        server_default="pointwise",
    )

    @property
    def decision_settings(self) -> DecisionSettings:
        """``decision`` parsed, once per value the row holds (a changed project holds a new value)."""
        parsed = self.__dict__.get("_decision_settings")
        if parsed is None or parsed[0] is not self.decision:
            parsed = (self.decision, DecisionSettings(**self.decision))
            self.__dict__["_decision_settings"] = parsed
        settings: DecisionSettings = parsed[1]
        return settings


def _external_key(context: DefaultExecutionContext) -> str:
    """Column default: the collision key of the row's external id."""
    parameters: dict[str, Any] = context.get_current_parameters()  # type: ignore[no-untyped-call]
    return collision_key(parameters["external_id"])


class Item(Base):
    __tablename__ = "items"
    __table_args__ = (
        UniqueConstraint("project_id", "external_id"),
        UniqueConstraint("project_id", "external_key"),
        Index("ix_items_project_id_id", "project_id", "id"),  # the primary's cursor walks a project by id
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    external_id: Mapped[str] = mapped_column(String(200))
    position: Mapped[int] = mapped_column(Integer)
    features: Mapped[dict[str, Any]] = mapped_column(default=dict)
    text: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    external_key: Mapped[str | None] = mapped_column(Text, default=_external_key)


class Rater(Base):
    __tablename__ = "raters"
    __table_args__ = (
        UniqueConstraint("project_id", "external_id"),
        UniqueConstraint("project_id", "external_key"),
        Index(
            "uq_raters_one_primary",
            "project_id",
            unique=True,
            sqlite_where=text("kind = 'primary'"),
            postgresql_where=text("kind = 'primary'"),
        ),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    external_id: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(16))
    name: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    external_key: Mapped[str | None] = mapped_column(Text, default=_external_key)
    # The primary's cursor over the corpus: every item with an id up to this one has been labeled
    # by it or is on its assignment rows (null: no batch yet). Other raters' lists are materialised.
    issued_through: Mapped[int | None] = mapped_column(BigInteger)


class RaterProgress(Base):
    """How many items a rater has a current label for (any criterion), kept in step by label writes,
    so a batch request knows what is left without counting a million labels."""

    __tablename__ = "rater_progress"

    rater_id: Mapped[int] = mapped_column(ForeignKey("raters.id", ondelete="CASCADE"), primary_key=True)
    labeled_items: Mapped[int] = mapped_column(BigInteger)


class LabelEvent(Base):
    """One append-only event: a label, or the retraction of the cell's label (``value`` null).

    The current label of a cell is its latest event when that is a label; a retraction
    removes the cell from ``current_labels``.
    """

    __tablename__ = "label_events"
    # Keyed by the project's sequence; on SQLite the rows live in that key's b-tree (no rowid table
    # beside a unique index: about 40 bytes less per label).
    __table_args__ = {"sqlite_with_rowid": False}

    # The project, its item and its rater, as write_labels checks under the project's row lock; no foreign
    # keys (a check of three parent rows per label written, and projects, items and raters are never deleted).
    project_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    item_id: Mapped[int] = mapped_column(BigId)
    rater_id: Mapped[int] = mapped_column(BigId)
    criterion: Mapped[str] = mapped_column(String(100))
    value: Mapped[str | None] = mapped_column(String(200))
    batch_id: Mapped[str | None] = mapped_column(String(40))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    kind: Mapped[str] = mapped_column(String(16), default="label", server_default="label")
    # A judge label's own certainty in [0, 1] (selective evaluation, docs/method.md §3c); null when not given.
    confidence: Mapped[float | None] = mapped_column(Float)
    # Arrival rank (docs/method.md §8.2): the label_seq of the write that gave the cell its first label,
    # kept by corrections (null: written before ranks, read as ``seq``).
    rank: Mapped[int | None] = mapped_column(BigInteger)
    # The order a pairwise judge was shown the item's answers, AB or BA (docs/method.md §13); '' for any
    # other label. Part of the cell: a judge holds a label of an item in each order.
    shown_order: Mapped[str] = mapped_column(String(2), server_default=text("''"))


class CurrentLabel(Base):
    """The latest event of each (item, rater, criterion, shown order) cell, kept in step with the events.

    Keyed rater first, its only index: a project's labels are its raters' key ranges, and a label
    written costs one index entry here (a second index, by project and ``seq``, cost ~0.3 s of
    PostgreSQL CPU per 100,000 labels at a million items; a read by ``seq`` goes through the events).
    """

    __tablename__ = "current_labels"
    __table_args__ = (
        PrimaryKeyConstraint("rater_id", "item_id", "criterion", "shown_order"),
        {"sqlite_with_rowid": False},
    )

    item_id: Mapped[int] = mapped_column(BigId, autoincrement=False)  # no foreign keys:
    rater_id: Mapped[int] = mapped_column(BigId, autoincrement=False)  # see LabelEvent
    criterion: Mapped[str] = mapped_column(String(100))
    project_id: Mapped[str] = mapped_column(String(40))  # no foreign key: see LabelEvent
    value: Mapped[str] = mapped_column(String(200))
    seq: Mapped[int] = mapped_column(BigInteger)
    confidence: Mapped[float | None] = mapped_column(Float)  # the current event's (see LabelEvent)
    rank: Mapped[int | None] = mapped_column(BigInteger)  # the arrival rank of its event (see LabelEvent)
    shown_order: Mapped[str] = mapped_column(String(2), server_default=text("''"))  # see LabelEvent


class PoolScore(Base):
    """The human-pool score of a criterion at one ``label_seq``, stored by the job queue's history turn
    (``service.documents.history_keeper``), never by a read.

    A point at ``label_seq`` 0 (no labels: undefined) marks that the history before the first
    stored document was replayed from the events once.
    """

    __tablename__ = "pool_scores"

    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"), primary_key=True)
    criterion: Mapped[str] = mapped_column(String(100), primary_key=True)
    label_seq: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    score: Mapped[float | None] = mapped_column(Float)


class MatrixSnapshot(Base):
    """A label matrix saved as the bytes of its snapshot file (service/matrices/snapshots.py), on PostgreSQL
    by default: every worker of every host reads it. A cache: deleting rows is always safe."""

    __tablename__ = "matrix_snapshots"

    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"), primary_key=True)
    criterion: Mapped[str] = mapped_column(String(100), primary_key=True)
    label_seq: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    body: Mapped[bytes] = mapped_column(LargeBinary)


class ApiKey(Base):
    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    role: Mapped[Role] = mapped_column(
        Enum(Role, native_enum=False, length=16, create_constraint=True, name="role", values_callable=_values)
    )
    project_id: Mapped[str | None] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    rater_id: Mapped[int | None] = mapped_column(ForeignKey("raters.id", ondelete="CASCADE"))
    name: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    revoked_at: Mapped[datetime | None]
    expires_at: Mapped[datetime | None]
    """From this moment the key is refused (401 ``key_expired``); null: it never expires."""


class Login(Base):
    """A dashboard login: the browser's cookie holds a random token, this row its hash, the key it
    stands for, and when it stops working (expiry, logout, or the key's revocation)."""

    __tablename__ = "logins"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    key_id: Mapped[str] = mapped_column(ForeignKey("api_keys.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(index=True)
    revoked_at: Mapped[datetime | None]


class IdempotencyRecord(Base):
    """The first response to a write sent with an ``Idempotency-Key``."""

    __tablename__ = "idempotency_records"
    __table_args__ = (UniqueConstraint("key_id", "idempotency_key"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    key_id: Mapped[str] = mapped_column(ForeignKey("api_keys.id", ondelete="CASCADE"))
    idempotency_key: Mapped[str] = mapped_column(String(200))
    request_hash: Mapped[str] = mapped_column(String(64))
    status_code: Mapped[int] = mapped_column(Integer)
    response: Mapped[dict[str, Any]]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Plan(Base):
    """A computed overlap plan (docs/method.md §4–5); the newest one of a project is in force."""

    __tablename__ = "plans"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"), index=True)
    purpose: Mapped[str] = mapped_column(String(16))
    source: Mapped[str] = mapped_column(String(16))
    design: Mapped[str] = mapped_column(String(16))
    seed: Mapped[int] = mapped_column(BigInteger)
    m: Mapped[int | None] = mapped_column(Integer)
    params: Mapped[dict[str, Any]]
    recipe: Mapped[dict[str, Any]]
    label_seq: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Assignment(Base):
    """One item on one rater's planned list, in order; held by at most one live batch.

    A secondary's rows are its whole list. The primary's list is the corpus, read through its
    cursor (``Rater.issued_through``): its rows are only the items issued and not yet seen labeled.
    """

    __tablename__ = "assignments"
    __table_args__ = (
        UniqueConstraint("rater_id", "item_id"),
        Index("ix_assignments_rater_position", "rater_id", "position"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    rater_id: Mapped[int] = mapped_column(ForeignKey("raters.id", ondelete="CASCADE"))
    item_id: Mapped[int] = mapped_column(ForeignKey("items.id", ondelete="CASCADE"))
    plan_id: Mapped[str] = mapped_column(ForeignKey("plans.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)
    batch_id: Mapped[str | None] = mapped_column(ForeignKey("batches.id", ondelete="SET NULL"))
    lease_expires_at: Mapped[datetime | None]
    # Probability that the design put this item on the list (None: not a probability sample,
    # e.g. depth-first or sequential designs); estimates weight by its inverse (docs/method.md §9).
    inclusion_probability: Mapped[float | None] = mapped_column(Float)


class Batch(Base):
    """A lease of some of a rater's planned items."""

    __tablename__ = "batches"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"), index=True)
    rater_id: Mapped[int] = mapped_column(ForeignKey("raters.id", ondelete="CASCADE"))
    plan_id: Mapped[str] = mapped_column(ForeignKey("plans.id", ondelete="CASCADE"))
    design: Mapped[str] = mapped_column(String(16))
    items: Mapped[list[str]]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime]
    released_at: Mapped[datetime | None]


class Simulation(Base):
    """A simulation job (docs/method.md §6): its settings, progress and result."""

    __tablename__ = "simulations"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"), index=True)
    status: Mapped[str] = mapped_column(String(16))
    params: Mapped[dict[str, Any]]
    done: Mapped[int] = mapped_column(Integer, default=0)
    total: Mapped[int] = mapped_column(Integer, default=0)
    result: Mapped[dict[str, Any] | None]
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None]
    key_id: Mapped[str | None] = mapped_column(ForeignKey("api_keys.id", ondelete="SET NULL"))
    """The API key that asked for it (its share of the jobs in flight); null for jobs from before 0025."""


class Job(Base):
    """A unit of background work on the row queue (service/data/jobs.py): its kind and key (a
    simulation's id, a periodic task's name), what it needs, its state, and the lease of the
    worker running it."""

    __tablename__ = "jobs"
    __table_args__ = (UniqueConstraint("kind", "key"), Index("ix_jobs_due", "state", "run_after"))

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(40))
    key: Mapped[str] = mapped_column(String(100))
    payload: Mapped[dict[str, Any]]
    state: Mapped[str] = mapped_column(String(16), default="queued")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    max_attempts: Mapped[int] = mapped_column(Integer, default=3)
    run_after: Mapped[datetime] = mapped_column(default=utcnow)
    lease_owner: Mapped[str | None] = mapped_column(String(200))
    lease_token: Mapped[str | None] = mapped_column(String(40))
    lease_until: Mapped[datetime | None]
    result: Mapped[dict[str, Any] | None]
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None]


class LabelStudioLink(Base):
    """The cell a Label Studio annotation or prediction labels, per criterion (a rubric labels one
    annotation under several), with its task and Label Studio project, so a deletion of the
    annotation or of its task can retract every label it gave, and a sync reconciles only the
    links of the Label Studio project it reads (``NULL``: not known, links made before 0013).
    ``value`` is the label the annotation gave (``NULL``: none, it was skipped or emptied), so
    deleting the newer of one rater's two annotations gives the cell the older one's label at
    once; ``value_known`` is false where it was not kept (links made before 0024, a choice no
    label maps to)."""

    __tablename__ = "label_studio_links"
    __table_args__ = (Index("ix_label_studio_links_project_task", "project_id", "ls_task"),)

    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"), primary_key=True)
    source: Mapped[str] = mapped_column(String(16), primary_key=True)  # "annotation" or "prediction"
    ls_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    item_id: Mapped[int] = mapped_column(ForeignKey("items.id", ondelete="CASCADE"))
    rater_id: Mapped[int] = mapped_column(ForeignKey("raters.id", ondelete="CASCADE"))
    criterion: Mapped[str] = mapped_column(String(100), primary_key=True)
    ls_task: Mapped[int | None] = mapped_column(BigInteger)
    ls_project: Mapped[int | None] = mapped_column(BigInteger)
    value: Mapped[str | None] = mapped_column(String(200))
    value_known: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class LabelStudioUser(Base):
    """The rater a Label Studio user's annotations are labels of, as a pm mapped it (an unmapped user is the
    rater ``ls-user-<id>``): LS user 7 -> ``ann-1`` makes the annotations of user 7 labels of ``ann-1``, the
    rater its batches were issued to. One rater stands for at most one Label Studio user; ``email`` is the
    user's email when the mapping named it (or Label Studio told it)."""

    __tablename__ = "label_studio_users"
    __table_args__ = (UniqueConstraint("project_id", "rater_id"),)

    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"), primary_key=True)
    ls_user: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    rater_id: Mapped[int] = mapped_column(ForeignKey("raters.id", ondelete="CASCADE"))
    email: Mapped[str | None] = mapped_column(String(254))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class LabelStudioIssue(Base):
    """A webhook delivery that could not be recorded, kept with its body to be replayed."""

    __tablename__ = "label_studio_issues"
    __table_args__ = (Index("ix_label_studio_issues_project_status", "project_id", "status"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    action: Mapped[str] = mapped_column(String(40))
    task: Mapped[str | None] = mapped_column(String(40))
    annotation: Mapped[str | None] = mapped_column(String(40))
    reason: Mapped[str] = mapped_column(Text)
    payload: Mapped[dict[str, Any]]
    status: Mapped[str] = mapped_column(String(16), default="open")  # open, resolved
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    resolved_at: Mapped[datetime | None]


class Certificate(Base):
    """A frozen, re-derivable validation decision (an in-toto statement); one per (label_seq, settings)."""

    __tablename__ = "certificates"
    __table_args__ = (UniqueConstraint("project_id", "label_seq", "settings_sha256"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"), index=True)
    label_seq: Mapped[int] = mapped_column(BigInteger)
    settings_sha256: Mapped[str] = mapped_column(String(64))
    criterion: Mapped[str] = mapped_column(String(100))
    decision: Mapped[str] = mapped_column(String(32))
    statement: Mapped[dict[str, Any]]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Webhook(Base):
    """An outbound webhook: where to send which events, signed with its secret (Standard Webhooks)."""

    __tablename__ = "webhooks"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"), index=True)
    url: Mapped[str] = mapped_column(Text)
    events: Mapped[list[str]]
    secret: Mapped[str] = mapped_column(String(100))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class WebhookEvent(Base):
    """The transactional outbox: an event, written in the transaction of the change it announces."""

    __tablename__ = "webhook_events"
    __table_args__ = (UniqueConstraint("project_id", "dedupe_key"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"), index=True)
    type: Mapped[str] = mapped_column(String(40))
    dedupe_key: Mapped[str | None] = mapped_column(String(200))
    payload: Mapped[dict[str, Any]]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class WebhookDelivery(Base):
    """One event to one webhook: attempts, the next try, the outcome of the last (its webhook's target
    job on the queue says which sender may attempt it)."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (Index("ix_webhook_deliveries_due", "status", "next_attempt_at"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    webhook_id: Mapped[str] = mapped_column(ForeignKey("webhooks.id", ondelete="CASCADE"), index=True)
    event_id: Mapped[str] = mapped_column(ForeignKey("webhook_events.id", ondelete="CASCADE"))
    status: Mapped[str] = mapped_column(String(16), default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(default=utcnow)
    retry_until: Mapped[datetime]
    last_attempt_at: Mapped[datetime | None]
    last_status_code: Mapped[int | None] = mapped_column(Integer)
    last_error: Mapped[str | None] = mapped_column(Text)
    delivered_at: Mapped[datetime | None]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class ShownDecision(Base):
    """The first pass or reject a reliability document showed for a judge, kept as of its ``label_seq``:
    a later document whose decision differs marks itself ``rewritten_at`` (docs/method.md §8.3)."""

    __tablename__ = "shown_decisions"

    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"), primary_key=True)
    criterion: Mapped[str] = mapped_column(String(100), primary_key=True)
    judge: Mapped[str] = mapped_column(String(200), primary_key=True)
    decision: Mapped[str] = mapped_column(String(32))
    label_seq: Mapped[int] = mapped_column(BigInteger)
    decided_at: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class DecisionWatch(Base):
    """The last decision the webhook sender saw for a project, so a change is announced once."""

    __tablename__ = "decision_watches"

    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"), primary_key=True)
    label_seq: Mapped[int] = mapped_column(BigInteger)
    decision: Mapped[str | None] = mapped_column(String(32))
    omega: Mapped[float | None]


class JudgeVersion(Base):
    """A version of a judge (a prompt or model), labelling as a judge rater of its own linked to the judge:
    its labels carry the version through their rater, so every document reads a version as a judge."""

    __tablename__ = "judge_versions"
    __table_args__ = (UniqueConstraint("judge_id", "name"),)

    rater_id: Mapped[int] = mapped_column(ForeignKey("raters.id", ondelete="CASCADE"), primary_key=True)
    judge_id: Mapped[int] = mapped_column(ForeignKey("raters.id", ondelete="CASCADE"), index=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(100))
    model: Mapped[str | None] = mapped_column(String(200))
    prompt_digest: Mapped[str | None] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class AnchorPanel(Base):
    """A judge's frozen anchor items (docs/method.md §12): a new version re-labels them to be compared with the
    old; sized for ``drop`` at ``power`` and two-sided level ``alpha`` given the expected ``discordance``,
    drawn by Strat over the primary's labels (``items``: item ids, in labelling order); ``baseline``: the judge's
    agreement with the primary the default ``discordance`` was read at (null when the caller gave it)."""

    __tablename__ = "anchor_panels"

    rater_id: Mapped[int] = mapped_column(ForeignKey("raters.id", ondelete="CASCADE"), primary_key=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"), index=True)
    criterion: Mapped[str] = mapped_column(String(100))
    drop: Mapped[float] = mapped_column(Float)
    discordance: Mapped[float] = mapped_column(Float)
    baseline: Mapped[float | None] = mapped_column(Float)
    alpha: Mapped[float] = mapped_column(Float)
    power: Mapped[float] = mapped_column(Float)
    seed: Mapped[int] = mapped_column(BigInteger)
    items: Mapped[list[int]] = mapped_column(JSON)
    label_seq: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class DriftWatch(Base):
    """A judge watched for drift (docs/method.md §12): the detector's settings, and the ``label_seq`` of the
    alarm once ``judge.drifted`` announced it (null: not drifted since the watch was set)."""

    __tablename__ = "drift_watches"

    rater_id: Mapped[int] = mapped_column(ForeignKey("raters.id", ondelete="CASCADE"), primary_key=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"), index=True)
    criterion: Mapped[str] = mapped_column(String(100))
    baseline: Mapped[float] = mapped_column(Float)
    drop: Mapped[float] = mapped_column(Float)
    horizon: Mapped[int] = mapped_column(BigInteger)
    alpha: Mapped[float] = mapped_column(Float)
    alarm_label_seq: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
