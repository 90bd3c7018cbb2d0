"""Stopping a generation, the one way every Stop button and cancel route does it: the queue's
cancel (a waiting one settles at once; a running one's worker tears the provider call down on
its next step), counted, and the budget reservation of one that never ran given back (no
worker holds it, so nobody else will: :func:`gateway.admission.budgets.release_if_never_ran`).
"""

from __future__ import annotations

from genq import Job

from ..access.owned_jobs import OwnedJob
from ..state import Gateway
from .budgets import release_if_never_ran


async def cancel(gateway: Gateway, owned: OwnedJob) -> tuple[bool, Job]:
    """(True when it will not produce a result, its record after the cancel)."""
    job_id = owned.job.id
    cancelled = await owned.queue.cancel(job_id)
    gateway.metrics.cancels.labels(owned.provider).inc()
    job = await owned.queue.get(job_id)
    if cancelled:
        await release_if_never_ran(gateway.redis, gateway.settings, job)
    return cancelled, job or owned.job
