"""Script calls written to one connection as they are made; their replies read after the last.

Every batch of script calls genq sends goes this way (``Queue.enqueue_many``, a worker's
activations, settles and emits, a puller's events, the gateway's limit scripts), and a single
call (``genq._scripts.Script``) through :func:`run_one`, the same steps for one. On a single
node's pooled client the calls are written straight to a pooled connection by genq's redis-py
patches (:func:`genq._redis_patches.evalsha_streamed` and ``evalsha``), without
``execute_command``'s and the pipeline's per-command Python (docs/KNOWN_LIMITS.md has what that
saves). Calls already made (a list) go out in one write, as a pipeline's do: written one by one,
each would cost the server a read and a reply write of its own. A batch made item by item
(``Queue.enqueue_many``) overlaps instead: each call is written as soon as it is made, so the
server runs one call while the producer makes the next. One connection: the server runs the
calls in the order they were made.

On a Cluster client, one holding a single connection of its own, or with genq's redis-py patches
off (another redis-py than the tested one), the calls are made first and sent with
:func:`genq._cluster.run_pipelined`.
A lost connection (or a reply that never came) is handled by the client's own retry policy, as
for a pipeline: the connection is dropped and every call made so far is sent again before the
rest. A NOSCRIPT loads the script and sends every call again. Both are safe: every genq script
is safe to run twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import Any

from redis.asyncio import Redis
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError

from ._cluster import Call, run_pipelined
from ._redis_patches import evalsha, evalsha_streamed, pooled
from .connection import RedisClient


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
    its reply loop), which a script called alone would pay on every call."""
    try:
        return await evalsha(redis, script, keys, args)
    except NoScriptError:
        pass  # the reply was read: load the script and send the call again below
    (reply,) = await _reloaded(redis, script, [(keys, args)])
    return reply


async def _streamed(
    redis: Redis, script: AsyncScript, made: list[Call], pending: Iterator[Call]
) -> list[Any]:
    """``made``: the calls already made, and then every call taken from ``pending``: what is
    written at once on each attempt (a retry sends them all again), before the rest."""
    try:
        return await evalsha_streamed(redis, script, made, pending)
    except NoScriptError:
        pass  # every reply was read: load the script and send every call again below
    return await _reloaded(redis, script, [*made, *pending])


async def _reloaded(redis: Redis, script: AsyncScript, calls: list[Call]) -> list[Any]:
    """After a NOSCRIPT (a server restart or ``SCRIPT FLUSH``): loads ``script`` and runs every
    call again, pipelined."""
    script.sha = await redis.script_load(script.script)
    return await run_pipelined(redis, script, calls)
