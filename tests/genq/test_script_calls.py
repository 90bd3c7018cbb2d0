"""genq's script calls (``genq._scripts.Script``). On a single node's pooled client they go out
through :func:`genq._streamed.run_one` (batches through :func:`genq.run_streamed`), written to
the connection by ``genq._redis_patches``, instead of redis-py's ``execute_command``; they must
keep what that path gives: a NOSCRIPT reload, the client's retry on a dropped connection, error
replies raised, a connection left in step when a call is cancelled, and redis-py's own path
where genq's does not apply."""

from __future__ import annotations

import asyncio

import pytest
import redis as redis_sync
from redis.asyncio import Connection
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ResponseError

import genq._scripts
from genq import Queue
from genq._redis_patches import pooled
from genq._scripts import Script
from genq._streamed import run_streamed
from genq.connection import connect, hiredis_packing
from tests.polling import waited_for


async def test_a_script_call_goes_out_through_genqs_path_on_a_pooled_client(queue, monkeypatch):
    calls: list[str] = []
    real = genq._scripts.run_one

    async def counted(*args, **kwargs):
        calls.append(args[1].sha)
        return await real(*args, **kwargs)

    await queue.enqueue({"n": 0})  # loads the script
    monkeypatch.setattr(genq._scripts, "run_one", counted)
    done = await queue.enqueue({"n": 1})
    assert calls == [queue.scripts.enqueue.sha]
    assert (await queue.get(done.id)).payload == {"n": 1}


async def test_a_script_call_after_a_script_flush_loads_it_and_runs_once(queue):
    await queue.enqueue({"n": 0})
    await queue.redis.script_flush()
    done = await queue.enqueue({"n": 1})
    assert (await queue.get(done.id)).payload == {"n": 1}
    assert int(await queue.redis.get(queue.keys.seq)) == 2  # the second body ran once


async def test_a_script_call_whose_connection_dies_is_sent_again_and_runs_once(redis_url, prefix):
    # The call's connection is killed while the server holds the call (CLIENT PAUSE WRITE):
    # the client's retry (one, as genq gives a Sentinel client) sends it again on a new one.
    client = connect(redis_url, retry=Retry(NoBackoff(), 1))
    queue = Queue(client, prefix)
    admin = redis_sync.Redis.from_url(redis_url)

    def held() -> bool:
        return any(int(c["id"]) == pooled and c["cmd"] == "evalsha" for c in admin.client_list())

    try:
        await queue.enqueue({"n": 0})  # loads the script; the pool keeps its one connection
        pooled = await client.client_id()
        admin.execute_command("CLIENT", "PAUSE", 5000, "WRITE")
        try:
            call = asyncio.create_task(queue.enqueue({"n": 1}))
            assert await asyncio.to_thread(waited_for, held)
            assert admin.client_kill_filter(_id=pooled) == 1
        finally:
            admin.execute_command("CLIENT", "UNPAUSE")
        done = await asyncio.wait_for(call, 10)
        assert (await queue.get(done.id)).payload == {"n": 1}
        assert int(await client.get(queue.keys.seq)) == 2
        assert await client.llen(queue.keys.intake) == 2
    finally:
        admin.close()
        await client.aclose()


async def test_a_call_cancelled_before_its_reply_leaves_no_reply_behind(redis_url, prefix):
    # The server holds the reply (CLIENT PAUSE WRITE) while the call is cancelled: its
    # connection is dropped, so the next call on the pool reads its own reply, not that one.
    client = connect(redis_url)
    echo = Script(client, "return ARGV[1]")
    admin = redis_sync.Redis.from_url(redis_url)

    def held() -> bool:
        return any(int(c["id"]) == pooled_id and c["cmd"] == "evalsha" for c in admin.client_list())

    try:
        assert await echo(args=["warm"]) == b"warm"
        pooled_id = await client.client_id()
        admin.execute_command("CLIENT", "PAUSE", 5000, "WRITE")
        try:
            call = asyncio.create_task(echo(args=["first"]))
            assert await asyncio.to_thread(waited_for, held)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
        finally:
            admin.execute_command("CLIENT", "UNPAUSE")
        assert await echo(args=["second"]) == b"second"
        assert await client.client_id() != pooled_id  # the cancelled call's connection was dropped
    finally:
        admin.close()
        await client.aclose()


async def test_only_a_single_nodes_pooled_client_takes_genqs_path(redis_url):
    client = connect(redis_url)
    single = connect(redis_url, single_connection_client=True)
    try:
        async with client.pipeline(transaction=False) as pipe:
            assert [pooled(c) for c in (client, pipe, single, object())] == [
                True,
                False,
                False,
                False,
            ]
            assert pooled(client) and not pooled(pipe)  # the same again, from the class cache
    finally:
        await client.aclose()
        await single.aclose()


async def test_an_error_reply_is_raised_as_redis_py_raises_it(queue):
    with pytest.raises(ResponseError):
        await queue.scripts.cooldown(keys=[queue.keys.cooldown], args=["not a number"])


async def test_a_client_holding_one_connection_takes_redis_pys_path(redis_url, prefix):
    client = connect(redis_url, single_connection_client=True)
    queue = Queue(client, prefix)
    try:
        done = await queue.enqueue({"n": 1})
        await client.script_flush()
        again = await queue.enqueue({"n": 2})
        assert [(await queue.get(e.id)).payload for e in (done, again)] == [{"n": 1}, {"n": 2}]
    finally:
        await client.aclose()


async def test_a_batch_already_made_is_one_write_and_one_made_call_by_call_is_one_each(
    redis_url,
):
    writes: list[int] = []

    class Counted(hiredis_packing(Connection)):  # type: ignore[misc]
        async def send_packed_command(self, command, check_health=True):
            writes.append(len(command))  # hiredis packs each command into one piece
            await super().send_packed_command(command, check_health)

    client = connect(redis_url)
    client.connection_pool.connection_class = Counted
    echo = Script(client, "return ARGV[1]")
    try:
        await client.script_load(echo.script)
        writes.clear()
        made = [((), (n,)) for n in range(8)]
        assert await run_streamed(client, echo, made) == [str(n).encode() for n in range(8)]
        assert writes == [8]
        writes.clear()
        one_by_one = (((), (n,)) for n in range(8))
        assert await run_streamed(client, echo, one_by_one) == [str(n).encode() for n in range(8)]
        assert writes == [1] * 8
    finally:
        await client.aclose()
