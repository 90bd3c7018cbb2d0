"""Script calls written to one connection as they are made; their replies read after the last.

Every batch of script calls genq sends goes this way (``Queue.enqueue_many``, a worker's
activations, settles and emits, a puller's events, the gateway's limit scripts), and a single
call (``genq._scripts.Script``) through :func:`run_one`, the same steps for one. On a single
node's pooled client that is redis-py's ``execute_command`` and pipeline without their
per-command Python: a batch of 8 calls in 235-257 µs against a redis-py pipeline's 293-350 on
this 2-core machine, one call in 136-170 against 176-192. Calls already made (a list) go out
in one write, as a pipeline's do: written one by one, 8 calls cost the server 20% more CPU (a
read and a reply write each). A batch made item by item (``Queue.enqueue_many``) overlaps
instead: each call is written as soon as it is made, so the server runs one call while the
producer makes the next. One connection: the server runs the calls in the order they were
made.

On a Cluster client, one holding a single connection of its own, or with genq's redis-py patches
off (another redis-py than the tested one: :mod:`genq._redis_patches`), the calls are made first
and sent with :func:`genq._cluster.run_pipelined`.
A lost connection (or a reply that never came) is handled by the client's own retry policy, as
for a pipeline: the connection is dropped and every call made so far is sent again before the
rest. A NOSCRIPT loads the script and sends every call again. Both are safe: every genq script
is safe to run twice.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from functools import cache
from itertools import islice
from typing import Any, TypeGuard, TypeVar

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.asyncio.connection import AbstractConnection
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError, ResponseError

from ._cluster import Call, run_pipelined
from ._redis_patches import patched
from .connection import RedisClient

T = TypeVar("T")


async def run_streamed(redis: RedisClient, script: AsyncScript, calls: Iterable[Call]) -> list[Any]:
    """Runs ``script`` once per call, in order, writing each call as ``calls`` yields it (a
    list or tuple, already made, in one write); returns the replies. The first error reply is
    raised once every reply was read."""
    pending = iter(calls)
    made = list(pending) if isinstance(calls, list | tuple) else list(islice(pending, 1))
    if not made:
        return []  # nothing to send: no connection taken
    if pooled(redis):
        return await _streamed(redis, script, made, pending)
    return await run_pipelined(redis, script, [*made, *pending])


async def run_one(
    redis: Redis, script: AsyncScript, keys: Sequence[Any], args: Sequence[Any]
) -> Any:
    """One call of ``script`` on a single node's pooled client (:func:`pooled`): what
    :func:`run_streamed` does for a list of one, without what a batch needs (its generator,
    its reply loop): 1.5-8 µs less per call on this 2-core machine, in each of eight
    interleaved rounds (`return 1`: medians 111.3 µs against 112.9 for a list of one)."""

    async def attempt(conn: AbstractConnection) -> Any:
        await conn.send_packed_command(_evalsha(conn, script, keys, args))
        return await conn.read_response()

    try:
        return await _on_pooled_connection(redis, attempt)
    except NoScriptError:
        pass  # the reply was read: load the script and send the call again below
    (reply,) = await _reloaded(redis, script, [(keys, args)])
    return reply


def pooled(redis: Any) -> TypeGuard[Redis]:
    """Whether ``redis`` is a single node's client drawing on its pool (not a Cluster client,
    a pipeline, or a client holding one connection of its own) and genq's redis-py patches
    are on (:mod:`genq._redis_patches`): what :func:`run_streamed` writes to directly."""
    return patched() and _single_node_client(redis.__class__) and not redis.single_connection_client


@cache
def _single_node_client(kind: type) -> bool:
    """Whether ``kind`` is a single node's client and not a pipeline, once per class: redis-py's
    ``Pipeline`` is a typing Protocol, whose ``isinstance`` costs 0.4 µs when it says no."""
    return issubclass(kind, Redis) and not issubclass(kind, Pipeline)


async def _streamed(
    redis: Redis, script: AsyncScript, made: list[Call], pending: Iterator[Call]
) -> list[Any]:
    """``made``: the calls already made, and then every call taken from ``pending``: what is
    written at once on each attempt (a retry sends them all again), before the rest."""

    def kept() -> Iterator[Call]:
        for call in pending:
            made.append(call)
            yield call

    async def attempt(conn: AbstractConnection) -> list[Any]:
        count = len(made)  # written in one write: one syscall here, one read for the server
        await conn.send_packed_command([b for k, a in made for b in _evalsha(conn, script, k, a)])
        for keys, args in kept():
            await conn.send_packed_command(_evalsha(conn, script, keys, args), check_health=False)
            count += 1
        replies: list[Any] = []
        error: ResponseError | None = None
        for _ in range(count):
            try:
                replies.append(await conn.read_response())
            except ResponseError as exc:  # the reply was read whole: the connection is in step
                error = error or exc
        if error is not None:
            raise error
        return replies

    try:
        return await _on_pooled_connection(redis, attempt)
    except NoScriptError:
        pass  # every reply was read: load the script and send every call again below
    return await _reloaded(redis, script, [*made, *pending])


def _evalsha(
    conn: AbstractConnection, script: AsyncScript, keys: Sequence[Any], args: Sequence[Any]
) -> list[bytes]:
    """One call of ``script``, packed for ``conn``."""
    return conn.pack_command("EVALSHA", script.sha, len(keys), *keys, *args)


async def _reloaded(redis: Redis, script: AsyncScript, calls: list[Call]) -> list[Any]:
    """After a NOSCRIPT (a server restart or ``SCRIPT FLUSH``): loads ``script`` and runs every
    call again, pipelined."""
    script.sha = await redis.script_load(script.script)
    return await run_pipelined(redis, script, calls)


async def _on_pooled_connection(
    redis: Redis, attempt: Callable[[AbstractConnection], Awaitable[T]]
) -> T:
    """Runs ``attempt`` on a connection of ``redis``'s pool under the client's retry policy (a
    lost connection is dropped and the attempt runs again on a new one). An error reply (a
    NOSCRIPT too) is raised as it is: the attempt read every reply, so the connection is in
    step. Any other failure, a cancellation included, drops the connection: replies may be
    unread on it."""
    pool = redis.connection_pool
    conn: AbstractConnection = await pool.get_connection()  # type: ignore[no-untyped-call]

    async def drop(error: Exception) -> None:
        await conn.disconnect()

    try:
        return await conn.retry.call_with_retry(lambda: attempt(conn), drop)
    except ResponseError:
        raise
    except BaseException:
        await conn.disconnect()
        raise
    finally:
        await pool.release(conn)
