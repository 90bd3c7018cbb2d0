import asyncio
import json

import pytest

from genq import JobFailedError, JobStatus, Queue, TerminalJobError, decode_entry


async def _dead_job(queue, payload="p", key=None):
    e = await queue.enqueue(payload, max_attempts=1, idempotency_key=key)

    async def handler(job):
        await job.emit("doomed text")
        raise TerminalJobError("provider said 400")

    async with queue.worker(handler):
        with pytest.raises(JobFailedError):
            await queue.wait(e.id, timeout=5)
    return e.id


async def _retained(queue, job_id):
    """The stream as it is now (watch() would wait for a job that is not finished)."""
    entries = await queue.redis.xrange(queue.keys.events(job_id))
    return [decode_entry(i, f, queue.result_codec) for i, f in entries]


async def test_dead_letters_listed_with_reason_and_stats(queue):
    job_id = await _dead_job(queue)
    assert await queue.dead() == [job_id]
    [entry] = await queue.dead_entries()
    assert entry.reason == "terminal" and entry.error == "provider said 400"
    assert entry.attempts == 1 and entry.died_at > 0
    assert (await queue.stats()).dead == 1


async def test_dead_letters_retry_clears_output_and_resets_attempts(queue):
    job_id = await _dead_job(queue, key="dk")
    assert await queue.retry_dead(job_id)
    job = await queue.get(job_id)
    assert job.status is JobStatus.WAITING and job.attempt == 0
    assert await queue.dead() == []
    assert [ev.type for ev in await _retained(queue, job_id)] == ["restarted"]
    assert (await queue.enqueue("p", idempotency_key="dk")).id == job_id  # key bound again

    async def handler(job):
        assert job.attempt == 1
        await job.emit("fresh text")
        return "ok"

    async with queue.worker(handler):
        assert await queue.wait(job_id, timeout=5) == "ok"
    events = [(ev.type, ev.data) async for ev in queue.watch(job_id)]
    assert events == [("restarted", None), ("chunk", "fresh text"), ("completed", "ok")]
    assert await queue.retry_dead(job_id) is False


async def test_dead_letters_purge_some_or_all(queue):
    ids = [await _dead_job(queue, payload=i) for i in range(3)]
    assert await queue.purge_dead([ids[0]]) == 1
    assert await queue.get(ids[0]) is None
    assert not await queue.redis.exists(queue.keys.events(ids[0]))
    assert await queue.purge_dead() == 2
    assert await queue.dead() == [] and (await queue.stats()).dead == 0
    assert await queue.purge_dead(["unknown"]) == 0


async def test_dead_letters_keep_their_own_retention(redis, prefix):
    queue = Queue(redis, prefix, result_ttl=30, dead_ttl=3600)
    job_id = await _dead_job(queue)
    ttl = await redis.pttl(queue.keys.job(job_id))
    assert 3_500_000 < ttl <= 3_600_000
    assert await redis.pttl(queue.keys.events(job_id)) == pytest.approx(ttl, abs=1000)


async def test_dead_letters_expired_entries_leave_the_listing(redis, prefix):
    queue = Queue(redis, prefix, dead_ttl=0.3)
    first = await _dead_job(queue, payload=1)
    await asyncio.sleep(0.5)
    assert [e.id for e in await queue.dead_entries()] == []  # record expired
    second = await _dead_job(queue, payload=2)
    assert await queue.dead() == [second]  # the next death trimmed the stale entry
    assert first not in await queue.dead()


async def test_dead_letters_are_announced_on_the_channel(queue, redis):
    pubsub = redis.pubsub()
    await pubsub.subscribe(queue.keys.dead_letters)
    await pubsub.get_message(timeout=1)  # the subscribe confirmation
    job_id = await _dead_job(queue)
    message = None
    for _ in range(50):
        message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=0.1)
        if message:
            break
    await pubsub.aclose()
    notice = json.loads(message["data"])
    assert notice["id"] == job_id and notice["reason"] == "terminal"
    assert notice["error"] == "provider said 400" and notice["attempts"] == 1


async def _page_through(queue, count, between=None):
    """Every page of the listing in order; ``between(seen)`` runs before each next page."""
    seen, cursor = [], None
    while True:
        page = await queue.dead_page(count=count, cursor=cursor)
        seen.extend(page.entries)
        if page.next_cursor is None:
            return seen
        if between is not None:
            await between(seen)
        cursor = page.next_cursor


async def test_dead_letters_pages_survive_entries_added_and_removed_meanwhile(queue, redis):
    async def handler(job):
        raise TerminalJobError("provider said 400")

    async def die(n):
        ids = [(await queue.enqueue(i, max_attempts=1)).id for i in range(n)]
        for job_id in ids:
            with pytest.raises(JobFailedError):
                await queue.wait(job_id, timeout=5)
        return ids

    async with queue.worker(handler, concurrency=8):
        ids = await die(12)
        # Threes die in the same millisecond, so pages end in the middle of a tie.
        base = int(await redis.zscore(queue.keys.dead, ids[0]))
        await redis.zadd(queue.keys.dead, {job_id: base + i // 3 for i, job_id in enumerate(ids)})
        removed: set[str] = set()

        async def churn(seen):
            unseen = [i for i in ids if i not in removed and i not in {e.id for e in seen}]
            await die(1)  # newer than every cursor
            assert await queue.purge_dead([seen[-1].id]) == 1  # the cursor's own entry
            removed.add(seen[-1].id)
            if len(unseen) > 3:
                assert await queue.retry_dead(unseen[-1])  # after the cursor
                removed.add(unseen[-1])

        listed = await _page_through(queue, count=2, between=churn)

    listed_ids = [e.id for e in listed]
    assert len(listed_ids) == len(set(listed_ids))  # none twice
    assert set(ids) - removed <= set(listed_ids)  # none skipped that stayed dead
    assert set(listed_ids) <= set(ids)  # the ones that died meanwhile are newer than the cursor
    order = [(e.died_at, e.id) for e in listed]
    assert order == sorted(order, reverse=True)  # newest first, ties by id, as Redis orders


async def test_dead_letters_page_past_entries_whose_record_expired(queue, redis):
    ids = [await _dead_job(queue, payload=i) for i in range(4)]
    newest_first = [i.decode() for i in await redis.zrevrange(queue.keys.dead, 0, -1)]
    for job_id in newest_first[:2]:
        await redis.delete(queue.keys.job(job_id))  # as if expired before the entry was trimmed
    first = await queue.dead_page(count=2)
    assert first.entries == [] and first.next_cursor is not None
    second = await queue.dead_page(count=2, cursor=first.next_cursor)
    assert [e.id for e in second.entries] == newest_first[2:]
    assert second.next_cursor is None
    assert sorted(newest_first) == sorted(ids)


async def test_dead_letters_page_refuses_a_bad_cursor_or_count(queue):
    for cursor in ("", "abc", "12", "x:job", "12:", "-5:job"):
        with pytest.raises(ValueError):
            await queue.dead_page(cursor=cursor)
    with pytest.raises(ValueError):
        await queue.dead_page(count=0)
