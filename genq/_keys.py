"""Every Redis key of a queue, built in one place.

All keys share the hash tag ``{prefix}`` so that a queue lives in one Redis Cluster slot and
every script can touch any of its keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

_FORBIDDEN = set("{}\x00")


def check_prefix(prefix: str) -> str:
    if not prefix or len(prefix) > 100 or _FORBIDDEN & set(prefix):
        raise ValueError(f"invalid queue prefix {prefix!r}: 1-100 characters, no braces")
    return prefix


def check_tenant(tenant: str) -> str:
    """A tenant name: '' (the default tenant) or up to 200 characters, no braces and no control
    characters (the scripts separate a tenant from what follows it with a NUL)."""
    if (
        not isinstance(tenant, str)
        or len(tenant) > 200
        or _FORBIDDEN & set(tenant)
        or any(c < " " for c in tenant)
    ):
        raise ValueError(f"invalid tenant {tenant!r}: up to 200 characters, no braces")
    return tenant


def check_job_id(job_id: str) -> str:
    if not job_id or len(job_id) > 200 or _FORBIDDEN & set(job_id) or job_id != job_id.strip():
        raise ValueError(f"invalid job id {job_id!r}: 1-200 characters, no braces or outer spaces")
    return job_id


@dataclass(frozen=True)
class Keys:
    prefix: str

    @cached_property
    def tag(self) -> str:
        return "{" + self.prefix + "}"

    @cached_property
    def ready(self) -> str:
        """zset: every runnable job, scored priority-major then FIFO (what is served next)."""
        return f"{self.tag}:ready"

    @cached_property
    def waits(self) -> str:
        """zset: the ready set's jobs again, each scored by when it became runnable (ms, server
        clock: enqueued, due, or put back), so the oldest wait is its first entry whatever the
        job's place in line."""
        return f"{self.tag}:waits"

    @cached_property
    def intake(self) -> str:
        """list: jobs enqueued ready and not yet admitted, oldest first, one entry each:
        ``<created ms, 15 digits>\\0<tenant>\\0<rank, 16 digits>\\0<id>``. An enqueue only
        appends here; the next pick (or any reader of the ready set, ``admit.lua``) moves them
        into the ready set, their tenants' lines and the job index."""
        return f"{self.tag}:intake"

    @cached_property
    def lines(self) -> str:
        """zset, scores 0: ``<tenant>\\0<rank, 16 digits>\\0<id>`` per runnable job: each
        tenant's line is one lexical range, in rank order."""
        return f"{self.tag}:lines"

    @cached_property
    def turns(self) -> str:
        """zset: tenants with runnable jobs under their cap, scored by pass (lowest served next)."""
        return f"{self.tag}:turns"

    @cached_property
    def parked(self) -> str:
        """zset: tenants with runnable jobs that hold as many leases as the cap, scored by pass."""
        return f"{self.tag}:parked"

    @cached_property
    def passes(self) -> str:
        """hash: tenant -> pass, for tenants with no runnable job (kept for when they return)."""
        return f"{self.tag}:passes"

    @cached_property
    def running(self) -> str:
        """hash: tenant -> jobs it holds in the lease set (claimed or running)."""
        return f"{self.tag}:running"

    @cached_property
    def vtime(self) -> str:
        """string: the pass last served; a tenant that joins starts no earlier."""
        return f"{self.tag}:vtime"

    @cached_property
    def index(self) -> str:
        """zset, scores 0: ``<status>\\0<created ms, 15 digits>\\0<id>`` per job (the job index;
        an active job is listed as ``waiting``: genq/_job_index.py)."""
        return f"{self.tag}:index"

    @cached_property
    def tenant_index(self) -> str:
        """zset, scores 0: ``<tenant>\\0<status>\\0<created ms>\\0<id>`` per job."""
        return f"{self.tag}:tindex"

    @cached_property
    def index_expiry(self) -> str:
        """zset: ``<status>\\0<tenant>\\0<created ms>\\0<id>`` of finished jobs whose records
        expire, scored by that expiry: ``pick.lua`` drops their index entries when due."""
        return f"{self.tag}:ixexpiry"

    @cached_property
    def holders(self) -> str:
        """hash: job id -> the worker (holder id) whose claim or lease it is under."""
        return f"{self.tag}:holders"

    @cached_property
    def holds(self) -> str:
        """zset, scores 0: ``<holder>\\0<id>`` per lease: one worker's leases are one lexical
        range, which ``presence.lua`` expires when that worker's presence lapses."""
        return f"{self.tag}:holds"

    @cached_property
    def presence(self) -> str:
        """zset: holder id -> when its presence lapses (ms, server clock), renewed by each
        worker's own loop every fraction of a second (``presence.lua``)."""
        return f"{self.tag}:presence"

    @cached_property
    def books(self) -> tuple[str, ...]:
        """The keys every state-changing script keeps in step with the job (fair share, job
        index, holders, the dead-letter outbox, the waits), passed as its last KEYS in this
        order (``books_at`` in ``_lib.lua``)."""
        return (
            self.lines, self.turns, self.parked, self.passes, self.running, self.vtime,
            self.index, self.tenant_index, self.index_expiry, self.holders, self.holds,
            self.outbox, self.waits,
        )  # fmt: skip

    @cached_property
    def outbox(self) -> str:
        """stream: one entry (field ``notice``, the dead-letter notice as JSON) per job that
        dead-letters, written by the script that dead-letters it and trimmed to about
        ``OUTBOX_MAX_LEN`` (10,000, ``_lib.lua``) entries; the workers' alerts read it through
        the consumer group ``alerts`` (``workers.outbox``), so no alert is lost while no
        worker runs."""
        return f"{self.tag}:outbox"

    @cached_property
    def scheduled(self) -> str:
        """zset: delayed jobs and backoff retries, scored by ready time (ms)."""
        return f"{self.tag}:scheduled"

    @cached_property
    def leases(self) -> str:
        """zset: claimed and running jobs, scored by lease expiry (ms)."""
        return f"{self.tag}:leases"

    @cached_property
    def dead(self) -> str:
        """zset: dead-lettered jobs, scored by the time they died (ms)."""
        return f"{self.tag}:dead"

    @cached_property
    def rank(self) -> str:
        """hash: job id -> ``<ready-set score>:<tenant>``, for jobs in the scheduled set."""
        return f"{self.tag}:rank"

    @cached_property
    def signal(self) -> str:
        """list: the doorbell idle workers block on."""
        return f"{self.tag}:signal"

    @cached_property
    def idle(self) -> str:
        """list: one offer per built-in worker waiting on the doorbell with a free slot, oldest
        first, ``<holder>\\0<lease token>\\0<lease ms>\\0<leases per tenant, 0: no cap>``. A
        worker appends its offer as it starts to wait; the enqueue of a job no other job is
        ahead of takes the oldest offer and starts the job under it (the hand-off,
        ``enqueue.lua``); the worker's next pick withdraws an offer still there."""
        return f"{self.tag}:idle"

    @cached_property
    def handoffs(self) -> str:
        """list: jobs an enqueue started under an idle worker's offer, each
        ``<holder>\\0<lease token>\\0<id>\\0<the record as a JSON list of fields and
        values>``; the idle workers wait on it before the doorbell."""
        return f"{self.tag}:handoffs"

    def wake(self, holder: str) -> str:
        """list: what a stopping worker pushes to end its own wait (it waits on this key after
        the hand-offs and the doorbell), so that a hand-off its wait takes is not cut off with
        the wait; expires within seconds if the wait had ended already."""
        return f"{self.tag}:wake:{holder}"

    @cached_property
    def hand_off(self) -> tuple[str, ...]:
        """The keys an enqueue that may hand its job off sends after its own, in this order
        (``hand_off`` in ``enqueue.lua``): the offers, the hand-offs, the ready set, the
        cooldown, the scheduled set, the lease set, then the books."""
        return (
            self.idle, self.handoffs, self.ready, self.cooldown, self.scheduled, self.leases,
            *self.books,
        )  # fmt: skip

    @cached_property
    def seq(self) -> str:
        """string: counter that orders jobs within a priority."""
        return f"{self.tag}:seq"

    @cached_property
    def cooldown(self) -> str:
        """string with a TTL: while it lives no worker reserves from this queue."""
        return f"{self.tag}:cooldown"

    @cached_property
    def cancels(self) -> str:
        """pub/sub channel: ids of running jobs whose cancel was requested."""
        return f"{self.tag}:cancels"

    @cached_property
    def dead_letters(self) -> str:
        """pub/sub channel: a JSON notice for every job that dead-letters."""
        return f"{self.tag}:deadletters"

    def job(self, job_id: str) -> str:
        """hash: the job record."""
        return f"{self.tag}:job:{job_id}"

    def events(self, job_id: str) -> str:
        """stream: the job's output."""
        return f"{self.tag}:events:{job_id}"

    def idempotency(self, key: str) -> str:
        """string: idempotency key -> job id."""
        return f"{self.tag}:idem:{key}"

    def usage_day(self, day: str) -> str:
        """hash: the usage settled on UTC ``day`` (``YYYY-MM-DD``), field
        ``<tenant>\\0<label>\\0<count>`` (see ``meter`` in _lib.lua); kept ``USAGE_DAYS_KEPT``."""
        return f"{self.tag}:usage:{day}"

    @cached_property
    def usage_total(self) -> str:
        """hash: all the usage ever settled, fields as in :meth:`usage_day`."""
        return f"{self.tag}:usage"

    def usage_journal(self, day: str) -> str:
        """list: ``<tenant>\\0<metered JSON>`` per attempt settled on UTC ``day`` and not yet
        added to the counters (``fold_usage`` in _lib.lua adds them in bulk)."""
        return f"{self.tag}:ujournal:{day}"

    @cached_property
    def usage_journals(self) -> str:
        """set: the days whose :meth:`usage_journal` holds attempts, for the readers to fold."""
        return f"{self.tag}:ujournals"

    @cached_property
    def lost(self) -> str:
        """hash: ``<job id>\\0<attempt>`` -> what a lost attempt streamed (JSON), written by
        ``reclaim.lua`` when it takes the attempt back and removed by ``meter_lost.lua`` when
        its estimated usage is metered (:meth:`genq.Queue.lost_attempts`)."""
        return f"{self.tag}:lost"

    def extra(self, name: str) -> str:
        """A key for a layer built on the queue (history, audit log, cooldowns)."""
        return f"{self.tag}:x:{name}"
