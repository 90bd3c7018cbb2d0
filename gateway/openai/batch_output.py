"""A batch's output and error files, made from its lines' generations when they are read.

Each line of either file is ``{id, custom_id, response: {status_code, request_id, body},
error}``, where ``body`` is exactly what the line's route answers for that generation
(:func:`.objects.chat_completion`, :func:`.objects.response_object`, or the error a chat
client gets: :func:`.chat.failure`). Lines answered 2xx go to the output file, the others to
the error file, with ``error: {code, message}`` taken from the answer: a line refused at
admission (the answer the route gave), a generation that failed or was stopped while it ran,
and a line the batch's cancel or expiry stopped before it ran (``response`` null, code
``batch_cancelled`` or ``batch_expired``). Nothing is copied: a generation's record is read
where it lives, for ``GENQ_BATCH_RESULT_TTL`` after it finished (``batch_record_gone`` after
that).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from genq import TERMINAL, Job, JobStatus

from ..state import Gateway
from .batch_store import CANCELLED, EXPIRED
from .chat import failure
from .errors import error_body
from .objects import chat_completion, response_object
from .response_events import current_output

READ_AT_ONCE = 100
"""Generations read concurrently while a file is made."""


def request_id_of(job_id: str) -> str:
    return f"batch_req_{job_id.rpartition('.')[2]}"


async def answer(gateway: Gateway, endpoint: str, job: Job) -> tuple[int, dict[str, Any]]:
    """The status and body the route answers for ``job`` (a finished generation)."""
    if endpoint == "/v1/chat/completions":
        if job.status.value == "completed":
            return 200, chat_completion(job)
        error = failure(job)
        return error.status, error_body(error.status, error.detail, error.code)
    _, queue = gateway.queues.locate(job.id)
    return 200, response_object(job, await current_output(queue, job))


def _line(
    custom_id: str, job_id: str | None, status: int, body: dict[str, Any]
) -> tuple[bool, dict[str, Any]]:
    error = None
    if status >= 400:
        found = body.get("error")
        detail: dict[str, Any] = found if isinstance(found, dict) else {}
        error = {
            "code": detail.get("code") or detail.get("type") or "error",
            "message": detail.get("message") or "",
        }
    return status < 400, {
        "id": request_id_of(job_id or custom_id),
        "custom_id": custom_id,
        "response": {"status_code": status, "request_id": job_id, "body": body},
        "error": error,
    }


def _unfinished(custom_id: str, job_id: str | None, status: str) -> dict[str, Any]:
    if status == CANCELLED:
        code, message = "batch_cancelled", "the batch was cancelled before this request ran"
    elif status == EXPIRED:
        code, message = "batch_expired", "the batch expired before this request ran"
    else:
        code, message = "batch_record_gone", "this request's record is no longer kept"
    return {
        "id": request_id_of(job_id or custom_id),
        "custom_id": custom_id,
        "response": None,
        "error": {"code": code, "message": message},
    }


async def _rows(
    gateway: Gateway, batch: dict[str, str], lines: dict[int, dict[str, Any]]
) -> AsyncIterator[list[tuple[bool, bytes]]]:
    """Every line's row of either file, in input order, in chunks: (goes to the output
    file, its JSON line)."""
    endpoint, status = batch["endpoint"], batch["status"]
    numbers = sorted(lines)
    for start in range(0, len(numbers), READ_AT_ONCE):
        chunk = [lines[n] for n in numbers[start : start + READ_AT_ONCE]]
        jobs = await asyncio.gather(*(_job(gateway, line.get("job")) for line in chunk))
        rows: list[tuple[bool, bytes]] = []
        for line, job in zip(chunk, jobs, strict=True):
            custom_id, job_id = line["custom_id"], line.get("job")
            if job_id is None:
                ok, item = _line(custom_id, None, int(line["status"]), line["body"])
            elif job is None or job.status not in TERMINAL or _never_ran(job, status):
                ok, item = False, _unfinished(custom_id, job_id, status)
            else:
                ok, item = _line(custom_id, job_id, *await answer(gateway, endpoint, job))
            rows.append((ok, json.dumps(item, separators=(",", ":")).encode() + b"\n"))
        yield rows


async def file_lines(
    gateway: Gateway, batch: dict[str, str], lines: dict[int, dict[str, Any]], kind: str
) -> AsyncIterator[bytes]:
    """The lines of the batch's ``kind`` file (``output`` or ``error``), in input order."""
    async for rows in _rows(gateway, batch, lines):
        part = b"".join(row for ok, row in rows if ok == (kind == "output"))
        if part:
            yield part


async def file_sizes(
    gateway: Gateway, batch: dict[str, str], lines: dict[int, dict[str, Any]]
) -> dict[str, int]:
    """The size of the batch's ``output`` and ``error`` files, made once."""
    sizes = {"output": 0, "error": 0}
    async for rows in _rows(gateway, batch, lines):
        for ok, row in rows:
            sizes["output" if ok else "error"] += len(row)
    return sizes


def _never_ran(job: Job, batch_status: str) -> bool:
    """A line the batch's cancel or expiry stopped before any attempt."""
    return (
        batch_status in (CANCELLED, EXPIRED)
        and job.status is JobStatus.CANCELLED
        and job.attempt == 0
    )


async def _job(gateway: Gateway, job_id: str | None) -> Job | None:
    if job_id is None:
        return None
    _, queue = gateway.queues.locate(job_id)
    return await queue.get(job_id)
