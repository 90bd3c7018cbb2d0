"""Request and response bodies of the operators' routes (admin role): queue stats and history,
dead letters, job listings and actions, the audit log. Part of the OpenAPI schema; they build
on the generation bodies (``gateway.admission.schemas``, ``gateway.records``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

from genq_contract.api_keys import TENANT_PATTERN

from ..access.schemas import Reason
from ..admission.schemas import GenerationCreated, GenerationRequest
from ..records import Generation


class QueueStatsOut(BaseModel):
    name: str
    waiting: int
    scheduled: int
    active: int
    dead: int
    oldest_wait: float
    cooldown_remaining: float
    viewers: int


class DeadEntryOut(BaseModel):
    id: str
    reason: str
    error: str | None
    attempts: int
    died_at: float


class DeadList(BaseModel):
    queue: str
    total: int
    entries: list[DeadEntryOut]
    next_cursor: str | None = Field(
        default=None, description="Pass as ?cursor= for the next page; null after the last one"
    )


class DeadSelection(BaseModel):
    """Either ``ids`` or ``all: true``: an empty body never means "everything"."""

    model_config = ConfigDict(extra="forbid")

    ids: list[str] | None = Field(default=None, max_length=1000)
    all: bool = False
    reason: Reason = None

    @model_validator(mode="after")
    def _one_choice(self) -> DeadSelection:
        if (self.ids is None) == (not self.all):
            raise ValueError("give either 'ids' or 'all': true")
        return self


class AuditEntryOut(BaseModel):
    at: float
    actor: str
    action: str
    queue: str
    count: int
    ids: list[str]
    reason: str | None = None


class AuditLog(BaseModel):
    entries: list[AuditEntryOut]


class HistoryBucket(BaseModel):
    start: int
    peak_depth: int = Field(description="Largest waiting + scheduled seen in the step")
    longest_wait: float | None


class QueueHistory(BaseModel):
    queue: str
    step: int
    buckets: list[HistoryBucket]


class Count(BaseModel):
    count: int


class Done(BaseModel):
    ok: bool


class ActionReason(BaseModel):
    """The optional body of an operator's action on one job."""

    model_config = ConfigDict(extra="forbid")

    reason: Reason = None


class JobCounts(BaseModel):
    waiting: int
    scheduled: int
    active: int
    completed: int
    failed: int
    cancelled: int


class AdminJobRow(Generation):
    """A generation as the operator's listing shows it: the record plus whose and where."""

    tenant: str | None
    queue: str


class AdminJobList(BaseModel):
    queue: str
    jobs: list[AdminJobRow] = Field(description="Newest first (by creation)")
    next_cursor: str | None = Field(
        default=None,
        description="Pass as ?cursor= for the next page; null after the last one. A page "
        "filtered by model may hold fewer than limit rows and still have one",
    )
    counts: JobCounts = Field(description="Jobs per status (of the tenant filter, if given)")


class CancelDone(BaseModel):
    ok: bool = Field(description="True if the generation will not produce a result")
    status: str = Field(description="Its status after the cancel")


class BulkSelection(BaseModel):
    """Either ``ids``, or ``all: true`` with a ``status`` (and optionally a ``tenant``): the
    jobs matching when the request arrives. An empty body never means "everything"."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"all": True, "status": "failed", "reason": "fixed"}]},
    )

    ids: list[Annotated[str, Field(min_length=1, max_length=200)]] | None = Field(
        default=None, max_length=1000
    )
    all: bool = False
    status: str | None = Field(default=None, max_length=20, description="Required with all")
    tenant: str | None = Field(default=None, pattern=TENANT_PATTERN)
    reason: Reason = None

    @model_validator(mode="after")
    def _one_choice(self) -> BulkSelection:
        if (self.ids is None) == (not self.all):
            raise ValueError("give either 'ids' or 'all': true")
        if self.all and self.status is None:
            raise ValueError("'all' needs a 'status'")
        if self.ids is not None and (self.status is not None or self.tenant is not None):
            raise ValueError("'status' and 'tenant' select with 'all', not with 'ids'")
        return self


class BulkCount(BaseModel):
    count: int = Field(description="Jobs acted on")
    matched: int = Field(
        description="Jobs selected: with all, those matching when the request arrived; with "
        "ids, those naming a job of this queue"
    )


class AdminGenerationRequest(GenerationRequest):
    """``POST /v1/generations``'s body on behalf of a tenant (its limits apply)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"model": "demo/fast", "prompt": "Say hello", "tenant": "acme"}]
        },
    )

    tenant: str = Field(pattern=TENANT_PATTERN, description="The tenant it is enqueued for")
    reason: Reason = None


class AdminGenerationCreated(GenerationCreated):
    """The answer to an enqueue on a tenant's behalf: as the tenant's own POST's, plus what
    the operator may want to check."""

    warnings: list[str] = Field(
        default_factory=list,
        description="E.g. that no API key acts as this tenant (a typo in its name?); empty "
        "when nothing",
    )
