"""genq's patches of redis-py (``genq._redis_patches``) against redis-py's public path: the same
inputs through both give the same outputs, and another redis-py release turns the patches off
with one warning while genq keeps working."""

from __future__ import annotations

import asyncio
import functools
import logging
import tomllib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import BlockingConnectionPool, Connection, ConnectionPool, Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

import genq._redis_patches as patches
from genq import EnqueueItem, JobStatus, Queue
from genq._redis_patches import pooled
from genq._scripts import Script
from genq._streamed import run_streamed
from genq.connection import connect

# Replies of every RESP kind a script can give: integer, bulk string, status, nil, nested array.
ECHO = """
redis.call('RPUSH', KEYS[1], ARGV[1])
if ARGV[1] == 'fail' then return redis.error_reply('ERR asked to fail') end
if ARGV[1] == 'nil' then return false end
if ARGV[1] == 'status' then return redis.status_reply('FINE') end
return {redis.call('LLEN', KEYS[1]), ARGV[1], {ARGV[2], tonumber(ARGV[2]) or 0}, false}
"""

CALLS = [(["list"], [word, str(n)]) for n, word in enumerate(["a", "é", "nil", "status", "b"])]


@pytest.fixture
def untested_release(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Patches that name another release than the installed one, as after an upgrade."""
    monkeypatch.setitem(patches.TESTED_VERSIONS, "redis", "0.0.1")
    yield
    monkeypatch.undo()
    assert patches.check()


@pytest.fixture
async def clients(redis_url: str) -> AsyncIterator[tuple[Redis, Redis]]:
    """A client made with the patches on and one made with them off (redis-py's own pool)."""
    patched = connect(redis_url)
    patches.set_patched(False)
    try:
        public = connect(redis_url)
    finally:
        patches.check()
    try:
        yield patched, public  # type: ignore[misc]
    finally:
        await patched.aclose()
        await public.aclose()


async def _outputs(client: Redis, prefix: str) -> list[Any]:
    """Every output of the same script calls: single calls, a batch already made, one made
    call by call, an error reply among them; and what they left in Redis."""
    script = Script(client, ECHO)
    keyed = [([f"{prefix}:{k}" for k in keys], args) for keys, args in CALLS]
    out: list[Any] = [await script(keys, args) for keys, args in keyed]
    out.append(await run_streamed(client, script, keyed))
    out.append(await run_streamed(client, script, iter(keyed)))
    with pytest.raises(ResponseError) as failed:
        await run_streamed(client, script, [*keyed[:2], ([f"{prefix}:list"], ["fail", "x"])])
    # redis-py's pipeline prefixes the failed command's position to the server's message.
    out.append((type(failed.value), "asked to fail" in str(failed.value)))
    with pytest.raises(ResponseError) as failed_one:
        await script([f"{prefix}:list"], ["fail", "y"])
    out.append((type(failed_one.value), str(failed_one.value)))
    out.append(await client.lrange(f"{prefix}:list", 0, -1))
    return out


async def test_redis_patches_script_calls_give_what_redis_pys_public_path_gives(
    clients: tuple[Redis, Redis], prefix: str
) -> None:
    patched, public = clients
    assert patches.patched() and pooled(patched)
    mine = await _outputs(patched, f"{prefix}:patched")
    patches.set_patched(False)  # script calls take redis-py's AsyncScript and pipeline
    try:
        assert not pooled(public)
        theirs = await _outputs(public, f"{prefix}:public")
    finally:
        patches.check()
    assert mine == theirs
    assert mine[0] == [1, b"a", [b"0", 0], None]


@pytest.mark.parametrize(
    "args",
    [
        ("SET", "k", "v"),
        ("SCRIPT LOAD", "return 1"),
        ("EVALSHA", b"\x00\xffbytes", 2, "k1", "k2", 1.5, -7, "é", b""),
        ("CLIENT", "SETNAME", "x" * 70_000),
    ],
)
def test_redis_patches_pack_a_command_as_redis_py_does(args: tuple[Any, ...]) -> None:
    public = Connection()
    lean = patches.hiredis_packing(Connection)()
    assert b"".join(lean.pack_command(*args)) == b"".join(public.pack_command(*args))


def test_redis_patches_pack_a_script_call_on_a_plain_connection_as_redis_py_does() -> None:
    """A plain ``redis.asyncio.Redis`` (the README's first example) gets its script calls
    packed by hiredis too; a connection that encodes otherwise keeps redis-py's packer."""
    script = Script(Redis(), "return 1")
    keys, args = ["k1", b"k\xff2"], [1.5, -7, "é", b"", "x" * 70_000, 3]
    plain = Connection()
    assert type(plain).pack_command is Connection.pack_command  # redis-py's own packer
    packed = patches._packed(plain, script, keys, args)
    assert b"".join(packed) == b"".join(plain.pack_command("EVALSHA", script.sha, 2, *keys, *args))
    assert len(packed) == 1  # one buffer, by hiredis (redis-py's packer splits long ones)
    latin = Connection(encoding="latin-1")
    packed = patches._packed(latin, script, keys, args)
    assert packed == latin.pack_command("EVALSHA", script.sha, 2, *keys, *args)

    class Counting(Connection):
        packed = 0

        def pack_command(self, *args: Any) -> list[bytes]:
            Counting.packed += 1
            return super().pack_command(*args)  # type: ignore[no-any-return]

    patches._packed(Counting(), script, keys, args)  # a packer of its own is kept
    assert Counting.packed == 1


def pool_state(pool: ConnectionPool) -> tuple[int, int]:
    return len(pool._available_connections), len(pool._in_use_connections)


async def same_steps(
    pools: list[Callable[[], ConnectionPool]],
    steps: Callable[[ConnectionPool], Awaitable[list[Any]]],
) -> list[Any]:
    """What ``steps`` saw on each pool ``pools`` make, one after the other (each closed
    after): the same on both."""
    seen = []
    for make in pools:
        pool = make()
        try:
            seen.append(await steps(pool))
        finally:
            await pool.aclose()
    assert seen[0] == seen[1]
    return seen[0]


async def test_redis_patches_pool_checks_out_and_in_as_redis_pys_does(redis_url: str) -> None:
    async def steps(pool: ConnectionPool) -> list[Any]:
        seen: list[Any] = []
        first = await pool.get_connection()
        second = await pool.get_connection()
        seen.append(pool_state(pool))
        await pool.release(first)
        seen.append(pool_state(pool))
        again = await pool.get_connection()
        seen.append((*pool_state(pool), again is first))
        await again.send_command("PING")
        seen.append(await again.read_response())
        await pool.release(again)
        await pool.release(second)
        seen.append(pool_state(pool))
        return seen

    kinds = (patches.LeanConnectionPool, ConnectionPool)
    await same_steps([functools.partial(kind.from_url, redis_url) for kind in kinds], steps)


async def test_redis_patches_bounded_pool_waits_and_times_out_as_redis_pys_does(
    redis_url: str,
) -> None:
    """With every connection in use a checkout waits for a return (and gets that connection),
    and past the timeout it fails as redis-py's does; a checkout after the wait skips it."""

    async def steps(pool: ConnectionPool) -> list[Any]:
        seen: list[Any] = []
        first = await pool.get_connection()
        second = await pool.get_connection()
        waiting = asyncio.create_task(pool.get_connection())
        await asyncio.sleep(0.05)
        seen.append((waiting.done(), *pool_state(pool)))
        await pool.release(first)
        third = await asyncio.wait_for(waiting, 1)
        seen.append((third is first, *pool_state(pool)))
        with pytest.raises(RedisConnectionError, match="No connection available") as failed:
            await pool.get_connection()
        seen.append(type(failed.value).__name__)
        await pool.release(third)
        again = await pool.get_connection()
        await again.send_command("PING")
        seen.append((again is first, await again.read_response(), *pool_state(pool)))
        await pool.release(again)
        await pool.release(second)
        seen.append(pool_state(pool))
        return seen

    kinds = (patches.LeanBlockingConnectionPool, BlockingConnectionPool)
    pools = [
        functools.partial(kind.from_url, redis_url, max_connections=2, timeout=0.2)
        for kind in kinds
    ]
    seen = await same_steps(pools, steps)
    assert seen[0] == (False, 0, 2)  # the third checkout waited


def test_redis_patches_target_the_redis_py_the_project_pins() -> None:
    """An upgrade moves the pin and ``TESTED_VERSIONS`` together, once these tests pass."""
    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    pins = [d for d in pyproject["project"]["dependencies"] if d.startswith("redis")]
    assert pins == [f"redis[hiredis]=={patches.TESTED_VERSIONS['redis']}"]
    assert {"redis": version("redis")} == patches.TESTED_VERSIONS
    assert patches.patched()


async def test_redis_patches_another_redis_py_turns_them_off_with_one_warning_and_genq_works(
    redis_url: str,
    prefix: str,
    caplog: pytest.LogCaptureFixture,
    untested_release: None,
) -> None:
    with caplog.at_level(logging.WARNING, logger="genq.patches"):
        assert patches.check() is False
    assert [r.getMessage() for r in caplog.records] == [
        f"redis {version('redis')} is not the tested 0.0.1: genq's redis-py patches are off; "
        "it uses redis-py's own pool, connections and pipeline (slower)"
    ]
    assert patches.set_patched(True) is False  # no way on with an untested release
    client = connect(redis_url)
    try:
        assert type(client.connection_pool) is ConnectionPool
        assert client.connection_pool.connection_class is Connection
        assert not pooled(client)
        queue = Queue(client, prefix, lease=5.0)
        first = await queue.enqueue({"n": 1})
        more = await queue.enqueue_many([EnqueueItem({"n": 2}), EnqueueItem({"n": 3})])

        async def handler(job: Any) -> Any:
            await job.emit(f"chunk {job.payload['n']}")
            return job.payload["n"] * 10

        async with queue.worker(handler):
            results = [await queue.wait(e.id, timeout=10) for e in [first, *more]]
        assert results == [10, 20, 30]
        events = [(ev.type, ev.data) async for ev in queue.watch(first.id)]
        assert events == [("chunk", "chunk 1"), ("completed", 10)]
        job = await queue.get(first.id)
        assert job is not None and job.status is JobStatus.COMPLETED
    finally:
        await client.aclose()
