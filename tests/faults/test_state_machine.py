"""A Hypothesis stateful test: genq's state machine against a plain Python model.

The system under test is a real queue on the real server, driven one state change at a time
the way the Worker drives it (``ScriptCalls``: pick, activate, emit, settle, reclaim) and through
the public API (enqueue, cancel, retry_dead, purge_dead). The model is a few dicts. After every
step the invariants compare the two: each job's status, attempt and cancel flag; ``stats()``;
which of intake / ready / scheduled / leases / dead holds each job (exactly the one its state
names; a pick, or ``Queue.admit``, moves the intake's jobs to the ready set), and the waits
(the oldest wait's order) holding exactly the ready set's jobs; idempotency keys; one
terminal event per finished job. ``pick`` must also return the job the model expects: the
job of the tenant whose turn it is (fair share: weighted stride scheduling,
a tenant at its concurrency cap parked until one of its leases ends), and within a tenant the
highest priority first, FIFO within a priority, a retried job keeping its place. The model keeps
its own copy of the fair-share books (turns, parked, passes, virtual time) and compares them.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest
import redis.asyncio as aioredis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from genq import JobExistsError, Queue
from tests.faults.invariants import check_invariants
from tests.faults.support import ScriptCalls

pytestmark = pytest.mark.timeout(180)

T = TypeVar("T")
LATER_MS = 3_600_000  # a delay no example outlives
KEYS = ("k1", "k2", "k3")
CUSTOM_IDS = ("c1", "c2")
TENANTS = ("", "a", "b")
WEIGHTS = {"a": 2}
CAP = 2
STRIDE = 1_000_000
HOLDERS = ("w1", "w2")  # the workers whose presence files the claims (presence.lua)


@dataclass
class Model:
    """One job as the model sees it."""

    id: str
    rank: int
    max_attempts: int
    key: str | None
    tenant: str = ""
    status: str = "waiting"  # as Queue.get reports it (a due retry reads as waiting)
    where: str = "ready"  # intake | ready | scheduled | leases | dead | none
    attempt: int = 0
    cancel_requested: bool = False
    token: str | None = None
    claimed: bool = False  # in the lease set under a claim, not activated
    output: bool = False  # the current attempt wrote chunks
    due: bool = False  # in the scheduled set, and its time has come
    seq: int = 0
    stale: list[str] = field(default_factory=list)
    holder: str | None = None  # the worker its claim or lease is filed under

    @property
    def held(self) -> bool:
        return self.status == "active"

    @property
    def finished(self) -> bool:
        return self.status in ("completed", "failed", "cancelled")


class QueueMachine(RuleBasedStateMachine):
    def __init__(self, url: str) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.redis = aioredis.Redis.from_url(url)
        self.queue = Queue(
            self.redis, f"sm-{uuid.uuid4().hex[:12]}", result_ttl=300.0,
            tenant_weights=WEIGHTS, tenant_concurrency=CAP,
        )  # fmt: skip
        # The fair-share books, as pick.lua and _lib.lua keep them.
        self.turns: dict[str, int] = {}
        self.parked: dict[str, int] = {}
        self.passes: dict[str, int] = {}
        self.vtime = 0
        self.calls = ScriptCalls(self.queue)
        self.jobs: dict[str, Model] = {}
        self.intake: list[str] = []  # enqueued ready, not yet admitted, in order
        self.keys: dict[str, str] = {}
        self.next_seq = 0

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    def teardown(self) -> None:
        async def clean() -> None:
            keys = [k async for k in self.redis.scan_iter(match=f"{self.queue.keys.tag}:*")]
            if keys:
                await self.redis.delete(*keys)
            await self.redis.aclose()

        try:
            # The suite-wide invariants too (orphan keys, TTLs, one settle), on top of the model.
            self.run(check_invariants(self.queue, list(self.jobs), settled=False))
        finally:
            self.run(clean())
            self.loop.close()

    # -- helpers -------------------------------------------------------------------------------

    def pick_job(self, index: int, where: Any = None) -> Model:
        jobs = [j for j in self.jobs.values() if where is None or where(j)]
        return jobs[index % len(jobs)]

    def has(self, test: Any) -> bool:
        return any(test(j) for j in self.jobs.values())

    def release_key(self, job: Model) -> None:
        if job.key and self.keys.get(job.key) == job.id:
            del self.keys[job.key]

    def settle_cancelled(self, job: Model) -> None:
        self.move(job, "none")
        job.status, job.claimed, job.due = "cancelled", False, False
        self.release_key(job)

    def dead_letter(self, job: Model) -> None:
        self.move(job, "dead")
        job.status = "failed"
        self.release_key(job)

    # -- the fair-share books --------------------------------------------------------------------

    def waiting_of(self, tenant: str) -> list[Model]:
        return [j for j in self.jobs.values() if j.tenant == tenant and j.where == "ready"]

    def move(self, job: Model, where: str) -> None:
        """Moves a job between sets, keeping the books as the scripts do (leases end first)."""
        old, job.where = job.where, where
        if old == "intake":
            self.intake.remove(job.id)
        if where == "intake":
            self.intake.append(job.id)
        if old == "leases" and where != "leases":
            job.holder = None
        if old == "leases" and where != "leases" and job.tenant in self.parked:
            self.turns[job.tenant] = self.parked.pop(job.tenant)
        if old == "ready" and where not in ("ready", "leases") and not self.waiting_of(job.tenant):
            pass_ = self.turns.pop(job.tenant, None)
            pass_ = self.parked.pop(job.tenant, pass_)
            if pass_ is not None:
                self.passes[job.tenant] = pass_
        if where == "ready" and old != "ready" and self.waiting_of(job.tenant) == [job]:
            start = max(self.vtime, self.passes.pop(job.tenant, 0))
            self.turns[job.tenant] = start

    def admit_model(self) -> None:
        """The intake's jobs, in order, become runnable (as _lib.lua's admit does)."""
        for job_id in list(self.intake):
            self.move(self.jobs[job_id], "ready")

    def pick_model(self, count: int) -> list[Model]:
        """The jobs pick.lua claims next, one turn at a time, with the books updated as it
        does (the script admits the intake first, and claims a tenant's consecutive turns in
        one go: same outcome)."""
        self.admit_model()
        picked: list[Model] = []
        for _ in range(count):
            job = self.pick_one()
            if job is None:
                break
            picked.append(job)
        return picked

    def pick_one(self) -> Model | None:
        due = [j for j in self.jobs.values() if j.where == "scheduled" and j.due]
        for job in due:
            job.due = False
            self.move(job, "ready")
        picked, served = None, None
        while picked is None and self.turns:
            tenant = min(self.turns, key=lambda t: (self.turns[t], t))
            served = pass_ = self.turns[tenant]
            held = [j for j in self.jobs.values() if j.tenant == tenant and j.where == "leases"]
            if len(held) >= CAP:
                self.parked[tenant] = self.turns.pop(tenant)
                continue
            picked = min(self.waiting_of(tenant), key=lambda j: j.rank)
            picked.where = "leases"
            after = pass_ + STRIDE // WEIGHTS.get(tenant, 1)
            if self.waiting_of(tenant):
                self.turns[tenant] = after
            else:
                del self.turns[tenant]
                self.passes[tenant] = after
        if served is not None:
            if not self.turns and not self.parked:
                self.passes.clear()
                self.vtime = 0
            else:
                self.vtime = served
        return picked

    def new_job(
        self, job_id: str, priority: int, delayed: bool, attempts: int, key: str | None,
        tenant: str,
    ) -> Model:  # fmt: skip
        self.next_seq += 1
        rank = (1000 - priority) * 10**12 + self.next_seq
        job = Model(job_id, rank, attempts, key, tenant, where="none")
        self.jobs[job_id] = job
        if delayed:
            job.status = "scheduled"
            self.move(job, "scheduled")
        else:
            self.move(job, "intake")
        if key:
            self.keys[key] = job_id
        return job

    def activate_model(self, job: Model, token: str) -> None:
        job.attempt += 1
        job.status, job.claimed, job.token = "active", False, token
        job.output, job.seq = False, 0

    # -- producing -----------------------------------------------------------------------------

    @rule(
        priority=st.sampled_from([-1, 0, 5]),
        delayed=st.booleans(),
        key=st.none() | st.sampled_from(KEYS),
        attempts=st.integers(1, 3),
        tenant=st.sampled_from(TENANTS),
    )
    def enqueue(
        self, priority: int, delayed: bool, key: str | None, attempts: int, tenant: str
    ) -> None:
        e = self.run(
            self.queue.enqueue(
                {"p": priority},
                idempotency_key=key,
                priority=priority,
                delay=LATER_MS / 1000 if delayed else 0.0,
                max_attempts=attempts,
                tenant=tenant,
            )
        )
        if key and key in self.keys:
            assert e.deduplicated and e.id == self.keys[key], (e, self.keys)
            return
        assert not e.deduplicated
        self.new_job(e.id, priority, delayed, attempts, key, tenant)

    @rule(
        job_id=st.sampled_from(CUSTOM_IDS),
        priority=st.sampled_from([0, 5]),
        tenant=st.sampled_from(TENANTS),
    )
    def enqueue_custom_id(self, job_id: str, priority: int, tenant: str) -> None:
        known = self.jobs.get(job_id)
        enqueue = self.queue.enqueue({}, job_id=job_id, priority=priority, tenant=tenant)
        if known is not None and not known.finished:
            with pytest.raises(JobExistsError):
                self.run(enqueue)
            return
        e = self.run(enqueue)
        assert (e.id, e.deduplicated) == (job_id, False)
        if known is not None:
            known.where = "none"  # a finished job's record is replaced (in no set)
        self.new_job(job_id, priority, False, self.queue.max_attempts, None, tenant)

    @rule()
    def admit(self) -> None:
        """A reader of the ready set admits the intake (Queue.admit), as the next pick would."""
        assert self.run(self.queue.admit()) == len(self.intake)
        self.admit_model()

    # -- reserving -----------------------------------------------------------------------------

    @rule(activate=st.booleans(), count=st.integers(1, 4), holder=st.sampled_from(HOLDERS))
    def reserve(self, activate: bool, count: int, holder: str) -> None:
        self.run(self.calls.presence(holder, 3_600_000))
        claimed = self.run(self.calls.pick(count, holder=holder))
        expected = self.pick_model(count)
        assert claimed == [job.id for job in expected], (claimed, expected)
        for job in expected:
            job.claimed, job.holder = True, holder
            if activate:
                token = uuid.uuid4().hex
                assert self.run(self.calls.activate(job.id, token)) == 0
                self.activate_model(job, token)

    @precondition(lambda self: self.has(lambda j: j.claimed))
    @rule(index=st.integers(0, 50))
    def activate_claimed(self, index: int) -> None:
        job = self.pick_job(index, lambda j: j.claimed)
        token = uuid.uuid4().hex
        assert self.run(self.calls.activate(job.id, token)) == 0
        self.activate_model(job, token)

    @precondition(lambda self: self.has(lambda j: j.claimed))
    @rule(index=st.integers(0, 50))
    def claim_expires(self, index: int) -> None:
        job = self.pick_job(index, lambda j: j.claimed)
        self.run(self.calls.expire_lease(job.id))
        self.claim_reclaimed(job)

    def claim_reclaimed(self, job: Model) -> None:
        reply = self.run(self.calls.reclaim(job.id))
        assert [int(reply[0]), reply[1].decode()] == [1, "waiting"]
        self.move(job, "ready")
        job.claimed, job.status = False, "waiting"  # no attempt spent

    @rule(holder=st.sampled_from(HOLDERS))
    def worker_vanishes(self, holder: str) -> None:
        """The holder's presence lapses: the other worker's next renewal expires every claim
        and lease filed under it, and reclaims each, as after a lease expiry."""
        other = next(h for h in HOLDERS if h != holder)
        self.run(self.redis.zadd(self.queue.keys.presence, {holder: 0}))
        taken = self.run(self.calls.presence(other, 3_600_000))
        lost = [j for j in self.jobs.values() if j.where == "leases" and j.holder == holder]
        assert sorted(taken) == sorted(j.id for j in lost)
        for job in lost:
            if job.held:
                self.lease_reclaimed(job)
            else:
                self.claim_reclaimed(job)

    # -- running -------------------------------------------------------------------------------

    @precondition(lambda self: self.has(lambda j: j.held))
    @rule(index=st.integers(0, 50))
    def emit(self, index: int) -> None:
        job = self.pick_job(index, lambda j: j.held)
        job.seq += 1
        code = self.run(self.calls.emit(job.id, job.token or "", job.seq, f'"t{job.seq}"'))
        assert code == (5 if job.cancel_requested else 0)
        if not job.cancel_requested:
            job.output = True

    @precondition(lambda self: self.has(lambda j: j.held))
    @rule(
        index=st.integers(0, 50),
        outcome=st.sampled_from(["complete", "fail", "retry", "retry_later", "release"]),
    )
    def settle(self, index: int, outcome: str) -> None:
        job = self.pick_job(index, lambda j: j.held)
        later = outcome == "retry_later"
        kind = "retry" if later else outcome
        data = '"done"' if kind == "complete" else "err"
        reply = self.run(
            self.calls.settle(
                job.id, job.token or "", kind, data, LATER_MS if later else 0, "terminal",
                job.key or "",
            )
        )  # fmt: skip
        if job.cancel_requested:
            self.settle_cancelled(job)
        elif kind == "complete":
            self.move(job, "none")
            job.status = "completed"
        elif kind == "fail":
            self.dead_letter(job)
        elif kind == "release":
            self.move(job, "ready")
            job.status, job.attempt = "waiting", job.attempt - 1
        elif job.attempt < job.max_attempts:
            self.move(job, "scheduled")
            job.due = not later
            job.status = "scheduled" if later else "waiting"
        else:
            self.dead_letter(job)
        raw = "scheduled" if job.where == "scheduled" else job.status  # a due retry too
        assert [int(reply[0]), reply[1].decode()] == [0, raw]

    @precondition(lambda self: self.has(lambda j: j.held))
    @rule(index=st.integers(0, 50))
    def lease_expires(self, index: int) -> None:
        job = self.pick_job(index, lambda j: j.held)
        self.run(self.calls.expire_lease(job.id))
        self.lease_reclaimed(job)

    def lease_reclaimed(self, job: Model) -> None:
        reply = self.run(self.calls.reclaim(job.id))
        assert int(reply[0]) == 1
        job.stale.append(job.token or "")
        job.token = None
        if job.cancel_requested:
            self.settle_cancelled(job)
        elif job.attempt >= job.max_attempts:
            self.dead_letter(job)
        else:
            self.move(job, "ready")
            job.status = "waiting"
        assert reply[1].decode() == job.status

    @precondition(lambda self: self.has(lambda j: j.stale))
    @rule(index=st.integers(0, 50), settle=st.booleans())
    def stale_holder_writes(self, index: int, settle: bool) -> None:
        job = self.pick_job(index, lambda j: bool(j.stale))
        token = job.stale[-1]
        if settle:
            reply = self.run(self.calls.settle(job.id, token, "complete", '"zombie"'))
            assert int(reply[0]) == 4  # refused: the lease is gone
        else:
            assert self.run(self.calls.emit(job.id, token, 1000, '"zombie"')) == 4

    # -- controlling ---------------------------------------------------------------------------

    @precondition(lambda self: self.jobs)
    @rule(index=st.integers(0, 50))
    def cancel(self, index: int) -> None:
        job = self.pick_job(index)
        answer = self.run(self.queue.cancel(job.id))
        if job.status in ("completed", "failed"):
            assert answer is False
        elif job.status == "cancelled":
            assert answer is True
        elif job.held:
            assert answer is True
            job.cancel_requested = True
        else:
            assert answer is True
            job.cancel_requested = True
            self.settle_cancelled(job)

    @precondition(lambda self: self.jobs)
    @rule(index=st.integers(0, 50))
    def retry_dead(self, index: int) -> None:
        job = self.pick_job(index)
        answer = self.run(self.queue.retry_dead(job.id))
        assert answer is (job.status == "failed")
        if answer:
            self.move(job, "ready")
            job.status, job.attempt = "waiting", 0
            job.cancel_requested, job.output, job.seq, job.token = False, False, 0, None
            if job.key and job.key not in self.keys:
                self.keys[job.key] = job.id

    @precondition(lambda self: self.jobs)
    @rule(index=st.integers(0, 50))
    def purge_dead(self, index: int) -> None:
        job = self.pick_job(index)
        purged = self.run(self.queue.purge_dead([job.id]))
        assert purged == (1 if job.status == "failed" else 0)
        if purged:
            del self.jobs[job.id]

    # -- invariants ----------------------------------------------------------------------------

    @invariant()
    def agrees_with_the_model(self) -> None:
        self.run(self._compare())

    async def _compare(self) -> None:
        q, k = self.queue, self.queue.keys
        ids = list(self.jobs)
        async with self.redis.pipeline(transaction=False) as pipe:
            for name in ("ready", "scheduled", "leases", "dead"):
                pipe.zrange(getattr(k, name), 0, -1)
            pipe.lrange(k.intake, 0, -1)
            pipe.zrange(k.waits, 0, -1)
            for key in KEYS:
                pipe.get(k.idempotency(key))
            for job_id in ids:
                pipe.xrange(k.events(job_id))
            replies = await pipe.execute()
        names = ("ready", "scheduled", "leases", "dead")
        sets = {
            name: {m.decode() for m in members}
            for name, members in zip(names, replies[:4], strict=True)
        }
        intake = [entry.decode().rsplit("\0", 1)[1] for entry in replies[4]]
        assert intake == self.intake, (intake, self.intake)
        sets["intake"] = set(intake)
        waits = {m.decode() for m in replies[5]}
        assert waits == sets["ready"], (waits, sets["ready"])
        bound = {key: v.decode() for key, v in zip(KEYS, replies[6:9], strict=True) if v}
        streams = dict(zip(ids, replies[9:], strict=True))
        for job in self.jobs.values():
            record = await q.get(job.id)
            assert record is not None, f"{job.id} vanished"
            got = (record.status.value, record.attempt, record.cancel_requested)
            assert got == (job.status, job.attempt, job.cancel_requested), (got, job)
            inside = {name for name, members in sets.items() if job.id in members}
            assert inside == ({job.where} - {"none"}), (inside, job)
            terminal = [f[b"type"].decode() for _, f in streams[job.id]]
            terminal = [t for t in terminal if t in ("completed", "failed", "cancelled")]
            assert terminal == ([job.status] if job.finished else []), (terminal, job)
        every = set().union(*sets.values())
        assert every <= set(self.jobs), every - set(self.jobs)
        assert bound == self.keys, (bound, self.keys)
        stats = await q.stats()
        count = {w: sum(1 for j in self.jobs.values() if j.where == w) for w in sets}
        assert (stats.waiting, stats.scheduled, stats.active, stats.dead) == (
            count["ready"] + count["intake"], count["scheduled"], count["leases"], count["dead"]
        )  # fmt: skip
        await self._compare_books()

    async def _compare_books(self) -> None:
        k = self.queue.keys
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.zrange(k.turns, 0, -1, withscores=True)
            pipe.zrange(k.parked, 0, -1, withscores=True)
            pipe.hgetall(k.passes)
            pipe.get(k.vtime)
            pipe.hgetall(k.holders)
            turns, parked, passes, vtime, holders = await pipe.execute()
        assert {t.decode(): int(s) for t, s in turns} == self.turns
        assert {t.decode(): int(s) for t, s in parked} == self.parked
        assert {t.decode(): int(p) for t, p in passes.items()} == self.passes
        assert int(vtime or 0) == self.vtime
        filed = {j.id: j.holder for j in self.jobs.values() if j.holder is not None}
        assert {j.decode(): h.decode() for j, h in holders.items()} == filed


def test_queue_state_machine_agrees_with_its_model(redis_url: str) -> None:
    run_state_machine_as_test(
        lambda: QueueMachine(redis_url),
        settings=settings(
            max_examples=100,
            stateful_step_count=40,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
