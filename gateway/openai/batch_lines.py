"""A batch's input file, read and admitted line by line.

:func:`parse` checks the file's shape (JSON lines of ``{custom_id, method, url, body}``, each
``custom_id`` once, every ``url`` the batch's endpoint): a file that fails fails the batch at
validation with OpenAI's ``errors`` list, and nothing runs.

:func:`admit` takes each line through the admission of a single request to its route: the
route's request schema and its mapping to a generation (:mod:`.schemas`), the model check
(404 ``model_not_found``), :func:`gateway.admission.submit.check_route` (allow-list, params,
capabilities), the tenant's daily quota (a batch line is a generation of the day like any
other, so a batch is no way around the quota) and the tenant's budget reservation; a line
refused there gets the answer the route would have given, for the error file, and the others
run. The per-request rate and in-flight limits are for interactive traffic: the batch took one
rate token at its create, and its lane's share of each provider (``GENQ_BATCH_SHARE``) bounds
how many of its lines run at once.
Admitted lines are enqueued on their provider's batch lane (:mod:`genq_contract.lanes`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from genq import EnqueueManyError
from genq_contract.routing import ModelNotAllowedError

from ..access.auth import Principal
from ..admission.schemas import GenerationRequest
from ..admission.submit import (
    Pending,
    budget_terms,
    check_route,
    draft_job,
    refund,
    reserve_budget,
    undo,
)
from ..errors import RateLimited
from ..state import Gateway
from ..telemetry import enqueue_span
from .errors import model_not_found, openai_error_response
from .file_store import MAX_LINES
from .response_chain import previous_history
from .schemas import ChatCompletionCreate, ResponseCreate

MAX_ERRORS = 100
"""Validation errors reported for one file (the first ones, in line order)."""


@dataclass(frozen=True)
class Line:
    number: int
    """1-based, as OpenAI counts ``line`` in a batch's errors."""
    custom_id: str
    body: dict[str, Any]


def _error(code: str, message: str, line: int | None, param: str | None = None) -> dict[str, Any]:
    return {"code": code, "message": message, "param": param, "line": line}


def parse(content: bytes, endpoint: str) -> tuple[list[Line], list[dict[str, Any]]]:
    """The file's lines, or the errors that fail the batch (OpenAI's error objects)."""
    errors: list[dict[str, Any]] = []
    lines: list[Line] = []
    seen: set[str] = set()
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        return [], [_error("invalid_file_encoding", "the file is not UTF-8", None)]
    rows = [(n, row) for n, row in enumerate(text.splitlines(), start=1) if row.strip()]
    if not rows:
        return [], [_error("empty_file", "the file holds no requests", None)]
    if len(rows) > MAX_LINES:
        return [], [_error("too_many_requests", f"a batch holds at most {MAX_LINES} lines", None)]
    for number, row in rows:
        if len(errors) >= MAX_ERRORS:
            break
        try:
            item = json.loads(row)
        except ValueError:
            errors.append(_error("invalid_json_line", "this line is not valid JSON", number))
            continue
        if not isinstance(item, dict):
            errors.append(_error("invalid_json_line", "this line is not a JSON object", number))
            continue
        custom_id = item.get("custom_id")
        if not isinstance(custom_id, str) or not custom_id or len(custom_id) > 512:
            errors.append(
                _error(
                    "missing_required_parameter", "custom_id must be a string", number, "custom_id"
                )
            )
            continue
        if custom_id in seen:
            errors.append(
                _error(
                    "duplicate_custom_id",
                    f"the custom_id {custom_id!r} is used by an earlier line",
                    number,
                    "custom_id",
                )
            )
            continue
        seen.add(custom_id)
        if item.get("method") != "POST":
            errors.append(_error("invalid_method", "method must be POST", number, "method"))
            continue
        if item.get("url") != endpoint:
            errors.append(
                _error(
                    "mismatched_endpoint",
                    f"url must be the batch's endpoint {endpoint}",
                    number,
                    "url",
                )
            )
            continue
        body = item.get("body")
        if not isinstance(body, dict):
            errors.append(_error("invalid_request", "body must be a JSON object", number, "body"))
            continue
        lines.append(Line(number, custom_id, body))
    return lines, errors


@dataclass
class Admitted:
    """What admitting some lines gave: each line's record (``{custom_id, job}`` or
    ``{custom_id, status, body}``) by its number."""

    records: dict[int, dict[str, Any]]
    enqueued: int = 0


def refusal(exc: Exception) -> tuple[int, dict[str, Any]]:
    """The status and body the route answers ``exc`` with."""
    if isinstance(exc, ValidationError):
        exc = RequestValidationError(exc.errors())
    answer = openai_error_response(exc)
    return answer.status_code, json.loads(bytes(answer.body))


async def _generation(
    gateway: Gateway, principal: Principal, endpoint: str, body: dict[str, Any]
) -> GenerationRequest:
    """The line's generation, as its route maps its request (a batch line neither streams
    nor runs in the background: its answer goes to the output file)."""
    body = {k: v for k, v in body.items() if k not in ("stream", "background", "stream_options")}
    max_image_bytes = gateway.settings.max_image_bytes
    if endpoint == "/v1/chat/completions":
        return ChatCompletionCreate.model_validate(body).generation(max_image_bytes)
    request = ResponseCreate.model_validate(body)
    history = None
    if request.previous_response_id is not None:
        history = await previous_history(gateway, principal.tenant, request.previous_response_id)
    return request.generation(max_image_bytes, history)


async def _draft(gateway: Gateway, principal: Principal, endpoint: str, line: Line) -> Pending:
    generation = await _generation(gateway, principal, endpoint, line.body)
    try:
        lane, lane_queue = gateway.queues.lane_for_model(generation.model)
    except ModelNotAllowedError as exc:
        raise model_not_found(generation.model) from exc
    route = await check_route(gateway, generation)
    return draft_job(
        gateway, principal, generation, replace(route, provider=lane, queue=lane_queue), None
    )


async def admit(
    gateway: Gateway,
    principal: Principal,
    endpoint: str,
    lines: Sequence[Line],
    keep: Callable[[dict[int, dict[str, Any]]], Awaitable[None]],
    traceparent: str | None = None,
) -> Admitted:
    """Admits ``lines`` (see the module) and enqueues the admitted ones. Each line's record
    is given to ``keep`` before its generation is enqueued (and again if the enqueue fails),
    so a gateway that dies in between leaves a record naming a generation that does not
    exist, which the next runner admits again, never a generation no record names. Each
    lane's enqueue is a span linked to ``traceparent`` (the batch's create)."""
    out = Admitted({})
    drafts: dict[int, Pending] = {}
    for line in lines:
        try:
            drafts[line.number] = await _draft(gateway, principal, endpoint, line)
        except Exception as exc:
            out.records[line.number] = _refused(line, exc)
    custom = {line.number: line.custom_id for line in lines}
    if drafts:
        charges = await gateway.limiter.charge_daily_many(principal.tenant, len(drafts))
        for (number, draft), charge in zip(list(drafts.items()), charges, strict=True):
            if isinstance(charge, RateLimited):
                out.records[number] = _refused_as(custom[number], charge)
                del drafts[number]
            else:
                draft.charged = charge
    if drafts:
        terms = await budget_terms(gateway, list(drafts.values()))
        for number, draft in list(drafts.items()):
            try:
                await reserve_budget(gateway, draft, terms)
            except Exception as exc:
                await refund(gateway, [draft])
                out.records[number] = _refused_as(custom[number], exc)
                del drafts[number]
    by_queue: dict[str, list[int]] = {}
    for number, draft in drafts.items():
        by_queue.setdefault(draft.provider, []).append(number)
        out.records[number] = {"custom_id": custom[number], "job": draft.job_id}
    await keep(out.records)
    for lane, numbers in by_queue.items():
        group = [drafts[n] for n in numbers]
        try:
            payloads = [(d.job_id, d.item.payload) for d in group]
            with enqueue_span(group[0].queue.prefix, payloads, principal.tenant, traceparent):
                results: list[Any] = list(await group[0].queue.enqueue_many(d.item for d in group))
        except EnqueueManyError as exc:
            results = list(exc.results)
        failed: dict[int, dict[str, Any]] = {}
        for number, draft, result in zip(numbers, group, results, strict=True):
            if isinstance(result, Exception):
                await asyncio.shield(undo(gateway, draft))
                out.records[number] = failed[number] = _refused_as(custom[number], result)
            else:
                out.enqueued += 1
        if failed:
            await keep(failed)
        gateway.metrics.enqueued.labels(lane).inc(len(numbers) - len(failed))
    return out


def _refused(line: Line, exc: Exception) -> dict[str, Any]:
    return _refused_as(line.custom_id, exc)


def _refused_as(custom_id: str, exc: Exception) -> dict[str, Any]:
    status, body = refusal(exc)
    return {"custom_id": custom_id, "status": status, "body": body}
