"""Accepting a batch of generations (``POST /v1/generations:batch``): every item as a single
POST would be accepted (:mod:`gateway.admission.submit`'s steps, in request order), but each
step taken for all items in one round trip, and the accepted items enqueued with one
``Queue.enqueue_many`` per provider queue."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from genq import Enqueued, EnqueueManyError, ReplicationTimeoutError

from ..access.auth import Principal
from ..errors import RateLimited, error_response
from ..state import Gateway
from ..telemetry import enqueue_span
from .schemas import BatchItem, BatchItemError, BatchItemFailed
from .submit import (
    Pending,
    Route,
    Submitted,
    bound_jobs,
    budget_terms,
    charge_one,
    check_route,
    draft_job,
    finish,
    refund,
    replay,
    reserve_budget,
    scoped,
    submit,
    undo,
    undo_all,
)


async def submit_many(
    gateway: Gateway, principal: Principal, bodies: Sequence[BatchItem | ValidationError]
) -> list[Submitted | BatchItemFailed]:
    """Accepts a batch (an item that failed its validation comes as its error): each item as
    :func:`gateway.admission.submit.submit` would with the item's ``idempotency_key``, answered
    in order with its :class:`Submitted` or, as :func:`failed`, what a single POST would have
    answered.

    Each step runs for every item still in the race in one round trip, item after item in
    request order, so every item meets the limits as it would one after another: the claims
    of all the keys (held until the batch's enqueue is done), the replay lookups, the rate
    tokens, the daily charges, the in-flight places; then the budget reservations, one by one.
    The accepted items go out in one ``Queue.enqueue_many`` per provider queue, all in one
    round trip; a failed enqueue gives back what its items took, as a single POST's does.

    An item whose key an earlier item of the batch already used is accepted after the batch's
    enqueue, once the claims are let go, as a single POST (a replay of the earlier item's
    generation, or 422 for another body; if the earlier item was refused, it is tried afresh):
    it cannot wait on a claim its own batch holds. Once a 503 (storage down or full) answers
    an item before its enqueue, the items not answered yet get it without being tried.
    """
    answers: list[Submitted | BatchItemFailed | None] = [None] * len(bodies)
    later: list[tuple[int, BatchItem]] = []  # items whose key an earlier item used
    stop: tuple[int, BatchItemFailed] | None = None  # the first 503 and its index
    checked: dict[int, tuple[BatchItem, Route]] = {}
    seen: set[str] = set()
    for index, body in enumerate(bodies):
        if stop is not None:
            answers[index] = stop[1]
        elif isinstance(body, ValidationError):
            answers[index] = failed(body)
        elif body.idempotency_key and scoped(principal, body.idempotency_key) in seen:
            later.append((index, body))
        else:
            try:
                checked[index] = (body, await check_route(gateway, body))
            except Exception as exc:
                answers[index] = refused = failed(exc)
                if refused.error.status == 503:  # the rest would wait to learn the same
                    stop = (index, refused)
                continue
            if body.idempotency_key:
                seen.add(scoped(principal, body.idempotency_key))
    keyed = {
        scoped(principal, b.idempotency_key): i
        for i, (b, _) in checked.items()
        if b.idempotency_key
    }
    pending: dict[int, Pending] = {}
    async with gateway.limiter.claim_many(list(keyed)) as busy:
        try:
            for scoped_key, conflict in busy.items():
                index = keyed.pop(scoped_key)
                answers[index] = failed(conflict)
                del checked[index]
            bound = await bound_jobs(gateway, list(keyed))
            for index, (body, route) in checked.items():
                key = scoped(principal, body.idempotency_key) if body.idempotency_key else None
                job = bound.get(key) if key else None
                if job is not None:
                    try:
                        answers[index] = replay(
                            job, principal, body.fingerprint(), gateway, route.provider
                        )
                    except Exception as exc:
                        answers[index] = failed(exc)
                else:
                    pending[index] = draft_job(gateway, principal, body, route, key)
            refusals = await _charge_many(gateway, principal.tenant, list(pending.values()))
        except BaseException as exc:
            await asyncio.shield(undo_all(gateway, pending.values()))
            if not isinstance(exc, Exception):
                raise
            refused = failed(exc)  # e.g. storage down: every item not answered yet gets it
            for index in checked:
                if answers[index] is None:
                    answers[index] = refused
            stop = (min(checked, default=len(bodies)), refused)
            pending, refusals = {}, {}
        for index, item in list(pending.items()):
            if item in refusals:
                answers[index] = failed(refusals[item])
                del pending[index]
        for index, outcome in (await _enqueue_many(gateway, principal, pending)).items():
            answers[index] = outcome if isinstance(outcome, Submitted) else failed(outcome)
    for index, body in later:
        if stop is not None and stop[0] < index:
            answers[index] = stop[1]
            continue
        try:
            answers[index] = await submit(gateway, principal, body, body.idempotency_key)
        except Exception as exc:
            answers[index] = failed(exc)
    return [answer for answer in answers if answer is not None]


def failed(exc: Exception) -> BatchItemFailed:
    """A batch item's answer to ``exc``: what :func:`error_response` answers a single POST."""
    if isinstance(exc, ValidationError):
        exc = RequestValidationError(exc.errors())
    answer = error_response(exc)
    detail = json.loads(bytes(answer.body))["detail"]
    return BatchItemFailed(error=BatchItemError(status=answer.status_code, detail=detail))


async def _enqueue_many(
    gateway: Gateway, principal: Principal, pending: dict[int, Pending]
) -> dict[int, Submitted | Exception]:
    """Enqueues the prepared items, one ``enqueue_many`` per provider queue (concurrently),
    and finishes each: its :class:`Submitted`, or the exception its enqueue got (what it took
    given back, as :func:`_submit` does)."""
    groups: dict[str, list[int]] = {}
    for index, item in pending.items():
        groups.setdefault(item.provider, []).append(index)
    answers = await asyncio.gather(
        *(
            _enqueue_group(gateway, principal, [pending[i] for i in group])
            for group in groups.values()
        )
    )
    return {
        index: outcome
        for group, outcomes in zip(groups.values(), answers, strict=True)
        for index, outcome in zip(group, outcomes, strict=True)
    }


async def _enqueue_group(
    gateway: Gateway, principal: Principal, group: list[Pending]
) -> list[Submitted | Exception]:
    results: list[Enqueued | Exception]
    try:
        jobs = [(p.job_id, p.item.payload) for p in group]
        with enqueue_span(group[0].queue.prefix, jobs, group[0].tenant):
            results = list(await group[0].queue.enqueue_many(p.item for p in group))
    except EnqueueManyError as exc:
        results = exc.results
    except BaseException as exc:
        # As in _submit: jobs written but not confirmed by the replicas keep what they took.
        if not isinstance(exc, ReplicationTimeoutError):
            await asyncio.shield(undo_all(gateway, group))
        if not isinstance(exc, Exception):
            raise
        return [exc] * len(group)
    outcomes: list[Submitted | Exception] = []
    for item, result in zip(group, results, strict=True):
        try:
            if isinstance(result, Exception):
                await asyncio.shield(undo(gateway, item))
                raise result
            outcomes.append(await finish(gateway, principal, item, result))
        except Exception as exc:
            outcomes.append(exc)
    return outcomes


async def _charge_many(
    gateway: Gateway, tenant: str, drafts: list[Pending]
) -> dict[Pending, Exception]:
    """The limits of :func:`gateway.admission.submit.submit` for every draft of a batch (one
    tenant's), with the outcome of charging them one after another in order; returns the refused
    ones, each with its refusal (the others hold everything).

    Rate tokens, daily charges and in-flight places are each taken for all the drafts in one
    round trip (``Limiter``'s bulk forms, in order). Only a give-back could make an item's
    outcome depend on a later step of an earlier item: past the in-flight cap, every later item
    is refused by the cap as it would have been (and gives back its daily charge); a budget
    refusal gives back the item's in-flight place and charge, and if a later item had been
    refused a charge or a place, the items after it are charged again one by one."""
    limiter = gateway.limiter
    refused: dict[Pending, Exception] = {}
    labels: dict[Pending, str] = {}
    tokens = await limiter.take_enqueue_tokens(tenant, len(drafts))
    paid = []
    for draft, refusal in zip(drafts, tokens, strict=True):
        if refusal is None:
            paid.append(draft)
        else:
            refused[draft], labels[draft] = refusal, "rate"
    charged = []
    for draft, charge in zip(paid, await limiter.charge_daily_many(tenant, len(paid)), strict=True):
        if isinstance(charge, RateLimited):
            refused[draft], labels[draft] = charge, "daily_quota"
        else:
            draft.charged = charge
            charged.append(draft)
    fit = await limiter.admit_in_flight_many(tenant, [draft.job_id for draft in charged])
    if fit < len(charged):
        over = limiter.in_flight_refusal(tenant)
        first = paid.index(charged[fit])
        await refund(gateway, charged[fit:])
        for draft in paid[first:]:  # each one after the first refused meets a full cap
            refused[draft], labels[draft] = over, "in_flight"
    held = charged[:fit]
    terms = await budget_terms(gateway, held) if held else None
    for n, draft in enumerate(held):
        try:
            await reserve_budget(gateway, draft, terms)
        except Exception as exc:
            refused[draft] = exc
            rest = paid[paid.index(draft) + 1 :]
            if any(other in refused for other in rest):
                await undo_all(gateway, held[n + 1 :])
                await _charge_one_by_one(gateway, rest, refused, labels)
                break
    for label in labels.values():
        gateway.metrics.refused.labels(label).inc()
    return refused


async def _charge_one_by_one(
    gateway: Gateway,
    drafts: list[Pending],
    refused: dict[Pending, Exception],
    labels: dict[Pending, str],
) -> None:
    for draft in drafts:
        refused.pop(draft, None)
        labels.pop(draft, None)
        try:
            await charge_one(gateway, draft)
        except Exception as exc:
            refused[draft] = exc
