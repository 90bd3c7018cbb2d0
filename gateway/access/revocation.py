"""Revoking a key or disabling a tenant, and stopping the work it already queued.

Shared by the admin API (``routes/api_keys.py``, ``routes/tenants.py``) and ``genq keys
revoke`` / ``genq tenants`` (which talk to Redis directly). The order matters: the refusal is
recorded first (``genq_services.access``), so a worker that picks one of the jobs while the
sweep runs refuses it too; then the key's digest leaves the key store; then the sweep cancels
every waiting, scheduled and running job of the key (payload ``key_id``) or tenant, found
through the job index. Cancel, not a terminal failure: it is the queue's one state change that
ends a job in any of those states at once (a running one through the cancel channel, which
closes its provider stream), and it adds no dead letters. The reason is in the audit log. A job
accepted after the sweep by a gateway whose key cache still held the key is refused by the
worker that picks it (failed, with the reason). Budget reservations and in-flight places of the
cancelled jobs are given back by the gateway's sweeps, as after any cancel.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from genq import JobStatus, Queue
from genq_contract.api_keys import TENANT_PATTERN, KeyGrant, key_id_of
from genq_contract.payload import payload_fields
from genq_contract.refusals import disabled_reason, revoked_reason
from genq_services.access import Access

from .audit import Audit
from .auth import ApiKeyStore

STOPPABLE = (JobStatus.WAITING.value, JobStatus.SCHEDULED.value, JobStatus.ACTIVE.value)
PAGE = 500
CANCELS_AT_ONCE = 32
AUDIT_QUEUE = "access"
"""The audit log's ``queue`` of revocations and tenant switches (they belong to no queue)."""
_DIGEST_PREFIX = re.compile(r"^[0-9a-f]{8,64}$")
_TENANT = re.compile(TENANT_PATTERN)


@dataclass(frozen=True)
class Stopped:
    """The jobs a sweep cancelled, per provider queue."""

    jobs: dict[str, list[str]] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return sum(len(ids) for ids in self.jobs.values())


@dataclass(frozen=True)
class Revoked:
    key_id: str
    removed: list[str]
    """Digests removed from the key store (none for a key of ``GENQ_API_KEYS``)."""
    tenants: list[str]
    """The tenants of the matching keys (stored or configured)."""
    configured: bool
    """A key of ``GENQ_API_KEYS`` matched: it stays there until removed, refused by its id."""
    stopped: Stopped


def check_tenant(tenant: str) -> str:
    if not _TENANT.match(tenant):
        raise ValueError(f"not a tenant name: {tenant!r}")
    return tenant


async def revoke_key(
    store: ApiKeyStore,
    access: Access,
    queues: Iterable[tuple[str, Queue]],
    digest_prefix: str,
    configured: dict[str, KeyGrant] | None = None,
) -> Revoked:
    """Revokes the key(s) whose digest starts with ``digest_prefix`` (8 to 64 hex digits, as
    ``genq keys list`` shows) and stops their jobs. A prefix no stored key matches still
    revokes its key id: that is how a key of ``GENQ_API_KEYS`` (``configured``, digest ->
    grant, when the caller knows them) is revoked."""
    prefix = digest_prefix.strip().lower().removeprefix("sha256:")
    if not _DIGEST_PREFIX.match(prefix):
        raise ValueError("give 8 to 64 hex digits of the key's digest (genq keys list shows them)")
    key_id = key_id_of(prefix)
    stored = await store.all()
    from_settings = {d: g for d, g in (configured or {}).items() if d.startswith(prefix)}
    grants = {**from_settings, **{d: g for d, g in stored.items() if d.startswith(prefix)}}
    await access.revoke_key_ids([key_id])
    removed = await store.revoke(prefix)
    # A tenant key's jobs are all under its tenant; an admin key (or one only GENQ_API_KEYS
    # knows) may have enqueued for anyone.
    tenants = sorted({g.tenant for g in grants.values()})
    scope: list[str | None] = (
        list(tenants) if grants and not any(g.admin for g in grants.values()) else [None]
    )
    stopped = await stop_jobs(queues, scope, key_id=key_id)
    return Revoked(key_id, removed, tenants, bool(from_settings), stopped)


async def disable_tenant(
    access: Access, queues: Iterable[tuple[str, Queue]], tenant: str
) -> tuple[bool, Stopped]:
    """Disables the tenant and stops its jobs; (whether it was enabled before, the jobs)."""
    newly = await access.disable_tenant(check_tenant(tenant))
    return newly, await stop_jobs(queues, [tenant])


async def stop_jobs(
    queues: Iterable[tuple[str, Queue]], tenants: list[str | None], key_id: str | None = None
) -> Stopped:
    """Cancels the waiting, scheduled and running jobs of ``tenants`` (None: every tenant's),
    only those whose payload names ``key_id`` when given."""
    stopped: dict[str, list[str]] = {}
    for name, queue in queues:
        ids: list[str] = []
        for tenant in tenants:
            ids += await _matching(queue, tenant, key_id)
        cancelled = await _cancel_all(queue, ids)
        if cancelled:
            stopped[name] = cancelled
    return Stopped(stopped)


async def _matching(queue: Queue, tenant: str | None, key_id: str | None) -> list[str]:
    ids: list[str] = []
    for status in STOPPABLE:
        cursor: str | None = None
        while True:
            if key_id is None:
                id_page = await queue.job_ids(status, tenant, PAGE, cursor)
                ids += id_page.ids
                cursor = id_page.next_cursor
            else:
                page = await queue.jobs(status, tenant, PAGE, cursor)
                ids += [
                    j.id for j in page.jobs if payload_fields(j.payload).get("key_id") == key_id
                ]
                cursor = page.next_cursor
            if cursor is None:
                break
    return list(dict.fromkeys(ids))


async def _cancel_all(queue: Queue, ids: list[str]) -> list[str]:
    gate = asyncio.Semaphore(CANCELS_AT_ONCE)

    async def cancel(job_id: str) -> bool:
        async with gate:
            return await queue.cancel(job_id)

    done = await asyncio.gather(*(cancel(job_id) for job_id in ids))
    return [job_id for job_id, ok in zip(ids, done, strict=True) if ok]


async def record(
    audit: Audit,
    actor: str,
    action: str,
    subject: str,
    stopped: Stopped | None,
    reason: str | None,
) -> None:
    """Audits an access change (``revoke_key``, ``disable_tenant``, ``enable_tenant`` on
    ``subject``), and the jobs it stopped as one ``cancel`` entry per queue."""
    await audit.record(actor, action, AUDIT_QUEUE, 1, [subject], reason)
    if stopped is None:
        return
    why = revoked_reason(subject) if action == "revoke_key" else disabled_reason(subject)
    for name, ids in stopped.jobs.items():
        await audit.record(actor, "cancel", name, len(ids), ids, why)
