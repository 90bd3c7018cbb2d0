"""A layer's script run with a key's bindings (``genq.run_with_bindings``) and behind an
enqueue on one connection (``genq.enqueue_then``)."""

from __future__ import annotations

from genq import EnqueueItem, Queue, as_text, enqueue_then, run_with_bindings

READ = "return {KEYS[1], redis.call('GET', KEYS[2]), redis.call('GET', KEYS[3])}"
TAKE = "return redis.call('DEL', KEYS[1])"


async def test_guarded_script_sees_the_binding_in_each_queue(redis, prefix) -> None:
    first, second = Queue(redis, f"{prefix}:a"), Queue(redis, f"{prefix}:b")
    bound = await second.enqueue({"n": 1}, idempotency_key="k-1")
    script = redis.register_script(READ)
    reply = await run_with_bindings([first, second], "k-1", script, [f"{prefix}:mine"], [])
    assert [as_text(reply[0]), reply[1], as_text(reply[2])] == [f"{prefix}:mine", None, bound.id]
    unbound = await run_with_bindings([first, second], "k-2", script, [f"{prefix}:mine"], [])
    assert unbound[1:] == [None, None]


async def test_guarded_script_runs_behind_the_enqueue(redis, prefix) -> None:
    queue = Queue(redis, prefix)
    held = f"{prefix}:held"
    await redis.set(held, "1")
    script = redis.register_script(TAKE)
    await redis.script_flush()  # both scripts unknown to the server: loaded, sent again
    item = EnqueueItem({"n": 1}, idempotency_key="k-1", job_id="a-job")
    enqueued, reply = await enqueue_then(queue, item, script, [held], [])
    assert (enqueued.id, enqueued.deduplicated, reply) == ("a-job", False, 1)
    assert await redis.exists(held) == 0
    job = await queue.get("a-job")
    assert job is not None and job.idempotency_key == "k-1"
    again, reply = await enqueue_then(
        queue, EnqueueItem({"n": 1}, idempotency_key="k-1"), script, [held], []
    )
    assert (again.id, again.deduplicated, reply) == ("a-job", True, 0)
