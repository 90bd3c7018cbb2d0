"""The operator's routes (an admin key) and a tenant's own listing, as client methods.

``AsyncClient`` and ``Client`` inherit these; they are split out to keep each file readable.
Listings are newest first by creation; pass a page's ``next_cursor`` to get the next one.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote

import httpx

from ._common import Created, created_from, generate_body, raise_for

if TYPE_CHECKING:
    from anyio.from_thread import BlockingPortal

BulkAction = Literal["cancel", "retry", "delete"]


@dataclass(frozen=True)
class JobPage:
    """One page of a queue's jobs (``GET /v1/queues/{name}/jobs``): rows are generation
    records plus ``tenant`` and ``queue``; ``counts`` are the queue's jobs per status (of the
    tenant filter, if given)."""

    queue: str
    jobs: list[dict[str, Any]]
    next_cursor: str | None
    counts: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class GenerationPage:
    """One page of the caller's own generations (``GET /v1/generations``)."""

    generations: list[dict[str, Any]]
    next_cursor: str | None


@dataclass(frozen=True)
class CancelOutcome:
    ok: bool
    """True if the generation will not produce a result (False: it had already finished)."""
    status: str
    """Its status after the cancel."""


@dataclass(frozen=True)
class BulkOutcome:
    count: int
    """Jobs acted on."""
    matched: int
    """Jobs selected (the given ids of this queue, or the snapshot of ``status``)."""


@dataclass(frozen=True)
class UsageReport:
    """Tokens and cost summed per group (``GET /v1/usage``), for days ``first_day`` to
    ``last_day`` (UTC, both included). Each row has ``day``, ``tenant`` and ``model`` (None
    when not grouped by it), ``prompt_tokens``, ``completion_tokens``, ``cached_tokens``,
    ``cost_usd`` and ``attempts``; ``total`` the same counts over every row."""

    tenant: str
    """The tenant reported on, or ``*`` for all."""
    first_day: str
    last_day: str
    group_by: list[str]
    rows: list[dict[str, Any]]
    total: dict[str, Any]


def _params(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _reason(reason: str | None) -> dict[str, Any] | None:
    return {"reason": reason} if reason is not None else None


def _selection(
    ids: list[str] | None, status: str | None, tenant: str | None, reason: str | None
) -> dict[str, Any]:
    if (ids is None) == (status is None):
        raise ValueError("give either ids or status (every job of that status)")
    if ids is not None:
        if tenant is not None:
            raise ValueError("tenant selects with status, not with ids")
        return _params(ids=list(ids), reason=reason)
    return _params(all=True, status=status, tenant=tenant, reason=reason)


def _json(response: httpx.Response) -> Any:
    raise_for(response)
    return response.json()


def _job_path(queue: str, job_id: str) -> str:
    return f"/v1/queues/{quote(queue, safe='')}/jobs/{quote(job_id, safe='')}"


def _budget_path(tenant: str) -> str:
    return f"/v1/budgets/{quote(tenant, safe='')}"


def _day(value: datetime.date | str | None) -> str | None:
    return value.isoformat() if isinstance(value, datetime.date) else value


def _group_by(value: str | Sequence[str] | None) -> str | None:
    return value if value is None or isinstance(value, str) else ",".join(value)


class AsyncOperations:
    """Methods of :class:`AsyncClient` for operators and for listing one's generations."""

    _http: httpx.AsyncClient

    async def _post(self, path: str, body: Any, headers: dict[str, str]) -> httpx.Response:
        raise NotImplementedError  # pragma: no cover (AsyncClient's)

    async def list_generations(
        self, status: str | None = None, *, limit: int = 20, cursor: str | None = None
    ) -> GenerationPage:
        """The caller's own generations across every queue, newest first."""
        response = await self._http.get(
            "/v1/generations", params=_params(status=status, limit=limit, cursor=cursor)
        )
        body = _json(response)
        return GenerationPage(list(body["generations"]), body["next_cursor"])

    async def list_jobs(
        self,
        queue: str,
        *,
        status: str | None = None,
        tenant: str | None = None,
        model: str | None = None,
        q: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> JobPage:
        """A page of any tenant's jobs in ``queue`` (admin). ``status`` may be ``dead``
        (= failed); ``q`` is a job id, or an idempotency key of ``tenant``. A page filtered by
        model may hold fewer than ``limit`` rows and still have a ``next_cursor``."""
        response = await self._http.get(
            f"/v1/queues/{quote(queue, safe='')}/jobs",
            params=_params(
                status=status, tenant=tenant, model=model, q=q, limit=limit, cursor=cursor
            ),
        )
        body = _json(response)
        return JobPage(body["queue"], list(body["jobs"]), body["next_cursor"], dict(body["counts"]))

    async def iter_jobs(
        self,
        queue: str,
        *,
        status: str | None = None,
        tenant: str | None = None,
        model: str | None = None,
        page_size: int = 200,
    ) -> AsyncIterator[dict[str, Any]]:
        """Every job of ``queue`` matching the filters, page after page (admin)."""
        cursor: str | None = None
        while True:
            page = await self.list_jobs(
                queue, status=status, tenant=tenant, model=model, limit=page_size, cursor=cursor
            )
            for job in page.jobs:
                yield job
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def get_job(self, queue: str, job_id: str) -> dict[str, Any]:
        """Any tenant's generation in ``queue``, with its request and a watch token (admin)."""
        return dict(_json(await self._http.get(_job_path(queue, job_id))))

    async def cancel_job(
        self, queue: str, job_id: str, *, reason: str | None = None
    ) -> CancelOutcome:
        """Cancels any tenant's generation (admin); APIError 404 for an unknown one."""
        response = await self._http.post(f"{_job_path(queue, job_id)}/cancel", json=_reason(reason))
        body = _json(response)
        return CancelOutcome(bool(body["ok"]), str(body["status"]))

    async def retry_job(self, queue: str, job_id: str, *, reason: str | None = None) -> None:
        """Puts a failed or cancelled generation back in line, same id (admin); APIError 409
        when it is neither."""
        _json(await self._http.post(f"{_job_path(queue, job_id)}/retry", json=_reason(reason)))

    async def delete_job(self, queue: str, job_id: str, *, reason: str | None = None) -> None:
        """Deletes a finished generation for good (admin); APIError 409 when unfinished."""
        response = await self._http.delete(_job_path(queue, job_id), params=_params(reason=reason))
        _json(response)

    async def bulk(
        self,
        action: BulkAction,
        queue: str,
        ids: list[str] | None = None,
        *,
        status: str | None = None,
        tenant: str | None = None,
        reason: str | None = None,
    ) -> BulkOutcome:
        """Cancels, retries or deletes the given ids (at most 1000), or every job of ``status``
        (optionally of one ``tenant``) as they stand when the request arrives (admin)."""
        body = _selection(ids, status, tenant, reason)
        response = await self._http.post(
            f"/v1/queues/{quote(queue, safe='')}/jobs/{action}", json=body
        )
        answer = _json(response)
        return BulkOutcome(int(answer["count"]), int(answer["matched"]))

    async def cancel_jobs(
        self, queue: str, ids: list[str] | None = None, **selection: Any
    ) -> BulkOutcome:
        """:meth:`bulk` ``cancel`` (status: waiting, scheduled or active)."""
        return await self.bulk("cancel", queue, ids, **selection)

    async def retry_jobs(
        self, queue: str, ids: list[str] | None = None, **selection: Any
    ) -> BulkOutcome:
        """:meth:`bulk` ``retry`` (status: failed, cancelled or dead)."""
        return await self.bulk("retry", queue, ids, **selection)

    async def delete_jobs(
        self, queue: str, ids: list[str] | None = None, **selection: Any
    ) -> BulkOutcome:
        """:meth:`bulk` ``delete`` (status: completed, failed, cancelled or dead)."""
        return await self.bulk("delete", queue, ids, **selection)

    async def enqueue_for(
        self,
        queue: str,
        tenant: str,
        model: str,
        prompt: str | None = None,
        *,
        reason: str | None = None,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> Created:
        """Enqueues a generation on ``tenant``'s behalf (admin): as that tenant's ``generate``
        would (its limits apply, its watch token); the model must run on ``queue``. ``fields``
        are the other ``generate`` options (messages, params, priority, delay_ms, metadata)."""
        messages = fields.pop("messages", None)
        body = generate_body(model, prompt, messages, tenant=tenant, reason=reason, **fields)
        headers = {"Idempotency-Key": idempotency_key or uuid.uuid4().hex}
        response = await self._post(f"/v1/queues/{quote(queue, safe='')}/jobs", body, headers)
        return created_from(response.json())

    async def usage(
        self,
        first_day: datetime.date | str | None = None,
        last_day: datetime.date | str | None = None,
        *,
        group_by: str | Sequence[str] | None = None,
        tenant: str | None = None,
    ) -> UsageReport:
        """Tokens and cost from ``first_day`` to ``last_day`` (UTC days, both included;
        default today), grouped by any of ``model``, ``day``, ``tenant``. The caller's own
        tenant unless ``tenant`` (a name, or ``*`` for all: admin keys only)."""
        params = _params(
            **{"from": _day(first_day), "to": _day(last_day)},
            group_by=_group_by(group_by),
            tenant=tenant,
        )
        body = _json(await self._http.get("/v1/usage", params=params))
        return UsageReport(
            tenant=body["tenant"],
            first_day=body["from"],
            last_day=body["to"],
            group_by=list(body["group_by"]),
            rows=list(body["data"]),
            total=dict(body["total"]),
        )

    async def budgets(self) -> list[dict[str, Any]]:
        """Every tenant's budget: limits, spent today and this month, reserved (admin)."""
        body = _json(await self._http.get("/v1/budgets"))
        return list(body["budgets"] if isinstance(body, dict) else body)

    async def budget(self, tenant: str | None = None) -> dict[str, Any]:
        """One tenant's budget (admin), or without ``tenant`` the caller's own."""
        path = "/v1/budget" if tenant is None else _budget_path(tenant)
        return dict(_json(await self._http.get(path)))

    async def set_budget(
        self,
        tenant: str,
        *,
        daily_usd: float | None = None,
        monthly_usd: float | None = None,
        reason: str | None = None,
    ) -> dict[str, Any]:
        """Sets a tenant's limits in USD (admin; None: no limit of that kind; audited with
        ``reason``); they win over the gateway's ``GENQ_TENANT_BUDGETS``. Answers the budget
        as it stands."""
        body = _params(daily_usd=daily_usd, monthly_usd=monthly_usd, reason=reason)
        return dict(_json(await self._http.put(_budget_path(tenant), json=body)))

    async def clear_budget(self, tenant: str, *, reason: str | None = None) -> dict[str, Any]:
        """Removes the limits set through the API (admin; audited): the settings' budget, if
        any, applies again. Answers the budget as it stands."""
        response = await self._http.delete(_budget_path(tenant), params=_params(reason=reason))
        return dict(_json(response))


class BlockingOperations:
    """The blocking twins of :class:`AsyncOperations`, for :class:`Client`."""

    _portal: BlockingPortal
    _async: AsyncOperations

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._portal.call(partial(getattr(self._async, method), *args, **kwargs))

    def list_generations(self, status: str | None = None, **options: Any) -> GenerationPage:
        """See :meth:`AsyncOperations.list_generations`."""
        page: GenerationPage = self._call("list_generations", status, **options)
        return page

    def list_jobs(self, queue: str, **options: Any) -> JobPage:
        """See :meth:`AsyncOperations.list_jobs`."""
        page: JobPage = self._call("list_jobs", queue, **options)
        return page

    def get_job(self, queue: str, job_id: str) -> dict[str, Any]:
        record: dict[str, Any] = self._call("get_job", queue, job_id)
        return record

    def cancel_job(self, queue: str, job_id: str, *, reason: str | None = None) -> CancelOutcome:
        outcome: CancelOutcome = self._call("cancel_job", queue, job_id, reason=reason)
        return outcome

    def retry_job(self, queue: str, job_id: str, *, reason: str | None = None) -> None:
        self._call("retry_job", queue, job_id, reason=reason)

    def delete_job(self, queue: str, job_id: str, *, reason: str | None = None) -> None:
        self._call("delete_job", queue, job_id, reason=reason)

    def bulk(
        self, action: BulkAction, queue: str, ids: list[str] | None = None, **selection: Any
    ) -> BulkOutcome:
        """See :meth:`AsyncOperations.bulk`."""
        outcome: BulkOutcome = self._call("bulk", action, queue, ids, **selection)
        return outcome

    def cancel_jobs(
        self, queue: str, ids: list[str] | None = None, **selection: Any
    ) -> BulkOutcome:
        return self.bulk("cancel", queue, ids, **selection)

    def retry_jobs(self, queue: str, ids: list[str] | None = None, **selection: Any) -> BulkOutcome:
        return self.bulk("retry", queue, ids, **selection)

    def delete_jobs(
        self, queue: str, ids: list[str] | None = None, **selection: Any
    ) -> BulkOutcome:
        return self.bulk("delete", queue, ids, **selection)

    def enqueue_for(
        self, queue: str, tenant: str, model: str, prompt: str | None = None, **options: Any
    ) -> Created:
        """See :meth:`AsyncOperations.enqueue_for`."""
        created: Created = self._call("enqueue_for", queue, tenant, model, prompt, **options)
        return created

    def usage(
        self,
        first_day: datetime.date | str | None = None,
        last_day: datetime.date | str | None = None,
        **options: Any,
    ) -> UsageReport:
        """See :meth:`AsyncOperations.usage`."""
        report: UsageReport = self._call("usage", first_day, last_day, **options)
        return report

    def budgets(self) -> list[dict[str, Any]]:
        """See :meth:`AsyncOperations.budgets`."""
        rows: list[dict[str, Any]] = self._call("budgets")
        return rows

    def budget(self, tenant: str | None = None) -> dict[str, Any]:
        """See :meth:`AsyncOperations.budget`."""
        row: dict[str, Any] = self._call("budget", tenant)
        return row

    def set_budget(self, tenant: str, **options: Any) -> dict[str, Any]:
        """See :meth:`AsyncOperations.set_budget`."""
        row: dict[str, Any] = self._call("set_budget", tenant, **options)
        return row

    def clear_budget(self, tenant: str, *, reason: str | None = None) -> dict[str, Any]:
        """See :meth:`AsyncOperations.clear_budget`."""
        row: dict[str, Any] = self._call("clear_budget", tenant, reason=reason)
        return row
