import asyncio

import pytest

from genq import EnqueueItem, JobExistsError, JobStatus, Queue
from genq._enqueue import enqueue_call
from tests.faults.support import intake_ids


async def test_enqueue_creates_waiting_record(queue):
    e = await queue.enqueue({"prompt": "hi"}, priority=3)
    job = await queue.get(e.id)
    assert not e.deduplicated
    assert job.status is JobStatus.WAITING
    assert job.payload == {"prompt": "hi"}
    assert (job.priority, job.attempt, job.max_attempts) == (3, 0, 3)
    assert job.created_at > 0 and job.result is None and not job.cancel_requested


async def test_enqueue_get_unknown_is_none(queue):
    assert await queue.get("nope") is None


async def test_enqueue_idempotency_key_returns_same_job(queue):
    first = await queue.enqueue({"n": 1}, idempotency_key="req-1")
    again = await queue.enqueue({"n": 1}, idempotency_key="req-1")
    assert again.id == first.id and again.deduplicated
    assert (await queue.stats()).waiting == 1


async def test_enqueue_50_concurrent_same_key_make_one_job_and_one_run(queue):
    results = await asyncio.gather(
        *[queue.enqueue({"n": 1}, idempotency_key="burst") for _ in range(50)]
    )
    assert len({r.id for r in results}) == 1
    assert sum(not r.deduplicated for r in results) == 1
    runs = []

    async def handler(job):
        runs.append(job.id)
        return "ok"

    async with queue.worker(handler, concurrency=4):
        assert await queue.wait(results[0].id, timeout=10) == "ok"
    assert runs == [results[0].id]


async def test_job_without_key_has_no_key_fields_and_keeps_the_result_ttl(queue):
    # A record without a key leaves idempotency_key and idem_ttl out (each field costs the
    # server an HSET pair); every script reads the missing key as '' and the missing ttl as
    # the result's, so the job runs, completes and expires as one with a key does.
    e = await queue.enqueue("p", idempotency_ttl=0)
    keyed = await queue.enqueue("p", idempotency_key="k", idempotency_ttl=0)
    key_fields = {b"idempotency_key", b"idem_ttl"}
    assert not key_fields & set(await queue.redis.hkeys(queue.keys.job(e.id)))
    assert key_fields <= set(await queue.redis.hkeys(queue.keys.job(keyed.id)))

    async def handler(job):
        return "answer"

    async with queue.worker(handler):
        assert await queue.wait(e.id, timeout=10) == "answer"
        assert await queue.wait(keyed.id, timeout=10) == "answer"
    # result_ttl is 60 s: a ttl without a key means nothing, so it cannot keep the job forever;
    # a key kept forever keeps its job too.
    assert 50_000 < await queue.redis.pttl(queue.keys.job(e.id)) <= 60_000
    assert await queue.redis.pttl(queue.keys.job(keyed.id)) == -1
    assert (await queue.get(e.id)).idempotency_key is None


async def test_enqueue_key_held_after_completion_for_idempotency_ttl(queue):
    e = await queue.enqueue("p", idempotency_key="k", idempotency_ttl=0.5)

    async def handler(job):
        return "answer"

    async with queue.worker(handler):
        await queue.wait(e.id, timeout=10)
        late = await queue.enqueue("p", idempotency_key="k")
        assert late.id == e.id and late.deduplicated
        await asyncio.sleep(0.7)
    fresh = await queue.enqueue("p", idempotency_key="k")
    assert fresh.id != e.id and not fresh.deduplicated


async def test_enqueue_failed_job_releases_its_key(queue):
    from genq import TerminalJobError

    e = await queue.enqueue("p", idempotency_key="k")

    async def handler(job):
        raise TerminalJobError("bad request")

    async with queue.worker(handler):
        with pytest.raises(Exception, match="bad request"):
            await queue.wait(e.id, timeout=10)
    again = await queue.enqueue("p", idempotency_key="k")
    assert again.id != e.id and not again.deduplicated


async def test_enqueue_cancelled_job_releases_its_key(queue):
    e = await queue.enqueue("p", idempotency_key="k")
    assert await queue.cancel(e.id)
    again = await queue.enqueue("p", idempotency_key="k")
    assert again.id != e.id


async def test_enqueue_live_custom_id_raises(queue):
    await queue.enqueue("a", job_id="custom-1")
    with pytest.raises(JobExistsError):
        await queue.enqueue("b", job_id="custom-1")


async def test_enqueue_finished_custom_id_starts_clean(queue):
    await queue.enqueue("first", job_id="custom-2", max_attempts=1)

    async def failing(job):
        await job.emit("old text")
        raise RuntimeError("boom")

    async with queue.worker(failing):
        with pytest.raises(Exception, match="boom"):
            await queue.wait("custom-2", timeout=10)
    assert await queue.dead() == ["custom-2"]

    again = await queue.enqueue("second", job_id="custom-2")
    assert again.id == "custom-2" and not again.deduplicated
    job = await queue.get("custom-2")
    assert job.status is JobStatus.WAITING and job.payload == "second" and job.error is None
    assert await queue.dead() == []

    async def fine(job):
        await job.emit("new text")
        return "done"

    async with queue.worker(fine):
        assert await queue.wait("custom-2", timeout=10) == "done"
    events = [ev async for ev in queue.watch("custom-2")]
    assert [(ev.type, ev.data) for ev in events] == [("chunk", "new text"), ("completed", "done")]


async def test_enqueue_rerun_of_same_call_does_not_duplicate(queue):
    """redis-py may resend a script whose reply was lost: the re-run must not make a 2nd job."""
    keys, args = enqueue_call(queue, EnqueueItem("p", job_id="x1"))
    first = await queue.scripts.enqueue(keys=keys, args=args)
    second = await queue.scripts.enqueue(keys=keys, args=args)
    assert first[0] == 0 and second[0] == 0
    assert (await queue.stats()).waiting == 1


@pytest.mark.parametrize("key", [None, "req-9"])
async def test_enqueue_rerun_of_a_new_jobs_call_does_not_duplicate(queue, key):
    """The same for the call of one new job (a generated id, no delay), which goes out in the
    script's own shape for that: its id is its nonce, so a record or a key bound to that id can
    only be the call's own."""
    queue.offers_seen = False
    keys, args = enqueue_call(queue, EnqueueItem("p", idempotency_key=key))
    assert len(args) == (7 if key else 3)  # the shape for one new job
    first = await queue.scripts.enqueue(keys=keys, args=args)
    second = await queue.scripts.enqueue(keys=keys, args=args)
    assert first == second == [0, args[0].encode(), 0]  # 0: no idle worker's offer listed
    assert await intake_ids(queue) == [args[0]]
    assert int(await queue.redis.get(queue.keys.seq)) == 1
    if key:  # another call with the same key gets the bound job
        again = await queue.enqueue("q", idempotency_key=key)
        assert (again.id, again.deduplicated) == (args[0], True)


@pytest.mark.parametrize(
    ("options", "shape"),
    [
        # with no idle worker's offer seen, each sends the offers list (a key) too
        ({}, 7 + 1),  # the values holding their defaults are left off the end
        ({"priority": -4}, 8 + 1),
        ({"tenant": "acme"}, 9 + 1),
        ({"idempotency_key": "k"}, 12 + 1),
        ({"idempotency_key": "k", "priority": 4, "tenant": "acme", "max_attempts": 5}, 12 + 1),
        ({"job_id": "mine"}, 21 + 1),  # a custom id may name a finished job: the items' shape
        ({"delay": 5}, 21 + 1),
    ],
)
async def test_enqueue_sends_one_new_job_in_its_own_shape_and_any_other_as_an_item(
    queue, options, shape
):
    queue.offers_seen = False  # (with one seen, a job ready at once goes as an item to hand
    # off: tests/genq/test_hand_off.py)
    keys, args = enqueue_call(queue, EnqueueItem("p", **options))
    assert len(keys) + len(args) == shape
    code, job_id, offers = await queue.scripts.enqueue(keys=keys, args=args)
    assert (code, offers) == (0, 0)
    job = await queue.get(job_id.decode())
    assert job.payload == "p" and job.tenant == options.get("tenant", "")
    assert job.priority == options.get("priority", 0)
    assert job.max_attempts == options.get("max_attempts", queue.max_attempts)
    assert job.idempotency_key == options.get("idempotency_key")
    assert job.status is (JobStatus.SCHEDULED if "delay" in options else JobStatus.WAITING)


async def test_a_new_job_and_the_same_item_in_a_batch_write_the_same_record(queue):
    """One new job takes its own path through enqueue.lua; a batch item takes the items' path.
    Both write the same record and intake entry, but for the id, the clock and the sequence."""
    variants = [
        {},
        {"priority": -7},
        {"tenant": "acme", "priority": 12},
        {"idempotency_key": "one", "idempotency_ttl": 90, "max_attempts": 9},
    ]
    for n, options in enumerate(variants):
        alone = await queue.enqueue({"n": n}, **options)
        if "idempotency_key" in options:
            options = {**options, "idempotency_key": "two"}
        (batched,) = await queue.enqueue_many([EnqueueItem({"n": n}, **options)])
        entries = await queue.redis.lrange(queue.keys.intake, -2, -1)
        records, lines = [], []
        for job_id, entry in zip((alone.id, batched.id), entries, strict=True):
            raw = await queue.redis.hgetall(queue.keys.job(job_id))
            assert raw.pop(b"id") == job_id.encode()
            assert int(raw.pop(b"created_at")) > 0
            rank = raw.pop(b"rank")
            assert raw.pop(b"idempotency_key", b"") in (b"", b"one", b"two")
            records.append({**raw, b"band": rank[:4]})
            created, tenant, line_rank, entry_id = entry.split(b"\0")
            assert (line_rank, entry_id) == (rank, job_id.encode()) and len(created) == 15
            lines.append(tenant)
        assert records[0] == records[1], options
        assert lines[0] == lines[1] == options.get("tenant", "").encode()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"priority": 5000},
        {"priority": 1.5},
        {"delay": -1},
        {"delay": float("inf")},
        {"max_attempts": 0},
        {"idempotency_key": ""},
        {"job_id": "a{b}"},
        {"job_id": ""},
        {"idempotency_ttl": -1},
        {"tenant": "a{b}"},
    ],
)
async def test_enqueue_rejects_bad_input_and_writes_nothing(queue, kwargs):
    with pytest.raises(ValueError):
        await queue.enqueue("p", **kwargs)
    assert await queue.stats() == (await queue.stats()).__class__(0, 0, 0, 0, 0.0)


def test_queue_rejects_bad_prefix(redis):
    with pytest.raises(ValueError):
        Queue(redis, "a{b")
