"""Jobs as their tenant may reach them: a job that belongs to another tenant is reported
exactly like one that does not exist."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from genq import Job, Queue
from genq_contract.payload import payload_fields

from ..errors import NotFound
from ..state import Gateway


@dataclass(frozen=True)
class OwnedJob:
    provider: str
    queue: Queue
    job: Job


async def load_owned_job(gateway: Gateway, job_id: str, tenant: str) -> OwnedJob:
    """The job if it exists and belongs to ``tenant``; NotFound otherwise (either way)."""
    provider, queue = gateway.queues.locate(job_id)
    job = await queue.get(job_id)
    if job is None or tenant_of(job) != tenant:
        raise NotFound("generation not found")
    return OwnedJob(provider, queue, job)


def tenant_of(job: Job) -> Any:
    return payload_fields(job.payload).get("tenant")
