"""Every part of redis-py genq replaces for speed, behind one guard on redis-py's version.

- :class:`LeanConnectionPool`: the pool :func:`genq.connect` gives a single node checks
  connections out and back in without the bookkeeping redis-py wraps around each (its
  deprecated-arguments check, its lock, its connection counts while its metrics are off);
  :class:`LeanBlockingConnectionPool`, the bounded one (``pool_timeout``), as well while no
  checkout has to wait.
- :func:`hiredis_packing`: connection classes that pack commands with hiredis, write without
  the task redis-py makes for each write, and raise a write on a torn-down connection as the
  ``ConnectionError`` it is.
- Script calls written straight to a pooled connection (:func:`evalsha`,
  :func:`evalsha_streamed`; :mod:`genq._streamed` takes them where :func:`pooled` says so):
  ``pack_command``, ``send_packed_command`` and ``read_response`` under the client's retry
  policy, without ``execute_command``'s and the pipeline's per-command Python.

All three lean on redis-py's private or undocumented parts, so they are on only with the
release they were tested on (:data:`TESTED_VERSIONS`: the one pyproject.toml pins, read from
genq's installed metadata by :func:`genq.pinned`). With any
other release :func:`check` logs one warning and genq takes redis-py's public path: its own
pool and connection classes, script calls through ``AsyncScript`` and its pipeline
(:func:`genq._cluster.run_pipelined`). tests/genq/test_redis_patches.py runs both paths on the
same calls and compares the outputs; ``bench/queue.py --only patches`` shows what they buy.
Upgrading redis-py: change the pin, reinstall, run those tests (they run on the new release).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, Sequence
from functools import cache
from typing import Any, TypeGuard, TypeVar

import hiredis
from redis.asyncio import BlockingConnectionPool, ConnectionPool, Redis
from redis.asyncio.client import Pipeline
from redis.asyncio.connection import AbstractConnection
from redis.commands.core import AsyncScript
from redis.event import AsyncAfterConnectionReleasedEvent
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.observability.providers import get_observability_instance

from ._patch_guard import PatchGuard, pinned

GUARD = PatchGuard(
    tested=pinned("redis"),
    off_warning="genq's redis-py patches are off; it uses redis-py's own pool, connections "
    "and pipeline (slower)",
    logger="genq.patches",
)
"""On with the release the patches were written and tested against, the one pyproject.toml
pins; clients made from then on, and every script call, ask it."""

TESTED_VERSIONS = GUARD.tested
version_mismatch = GUARD.version_mismatch
check = GUARD.check
set_patched = GUARD.set_patched
patched = GUARD.patched

T = TypeVar("T")


def _metrics_on() -> bool:
    """Whether the application turned on redis-py's OpenTelemetry metrics (off by default)."""
    manager = get_observability_instance().get_provider_manager()
    return manager is not None and bool(manager.config.enabled_telemetry)


class LeanConnectionPool(ConnectionPool):
    """redis-py's pool, each checkout and return without what redis-py wraps around them: its
    check for deprecated arguments, its lock (nothing awaits between taking a connection off
    the list and marking it in use, and an event loop runs one task at a time) and, while
    redis-py's OpenTelemetry metrics are off, its connection counts (when they are on, redis-py's
    own methods run). What the pool is for stays: redis-py's own check runs before use
    (``ensure_connection``), a connection marked for reconnection is closed on its return, the
    released-connection event fires."""

    async def get_connection(self, *args: Any, **kwargs: Any) -> AbstractConnection:
        if _metrics_on():
            return await super().get_connection()  # type: ignore[no-untyped-call,no-any-return]
        return await _checkout(self)

    async def release(self, connection: AbstractConnection) -> None:
        if _metrics_on():
            await super().release(connection)
            return
        await _release(self, connection)


async def _checkout(pool: ConnectionPool) -> AbstractConnection:
    """redis-py's checkout of a free connection from ``pool``, without its lock and counts."""
    connection: AbstractConnection = pool.get_available_connection()  # type: ignore[no-untyped-call]
    try:
        await pool.ensure_connection(connection)
    except BaseException:
        await pool.release(connection)
        raise
    return connection


async def _release(pool: ConnectionPool, connection: AbstractConnection) -> None:
    """redis-py's return of ``connection`` to ``pool``, without its lock and counts."""
    pool._in_use_connections.remove(connection)
    if connection.should_reconnect():  # type: ignore[no-untyped-call]
        await connection.disconnect()
    pool._available_connections.append(connection)
    released = AsyncAfterConnectionReleasedEvent(connection)  # type: ignore[no-untyped-call]
    await pool._event_dispatcher.dispatch_async(released)  # type: ignore[union-attr]


class LeanBlockingConnectionPool(BlockingConnectionPool):
    """redis-py's bounded pool (a checkout waits for a free connection, up to its timeout),
    each checkout that need not wait and each return no checkout waits for without the
    condition's lock and timeout redis-py takes around them, as :class:`LeanConnectionPool`.
    A checkout finding every connection in use, and any checkout or return while one waits,
    while the pool is in maintenance or redis-py's metrics are on, goes redis-py's way."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._waiting = 0
        """Checkouts in redis-py's path (which may wait on the condition for a return)."""

    async def get_connection(self, *args: Any, **kwargs: Any) -> AbstractConnection:
        if self._waiting or self._in_maintenance or not self.can_get_connection() or _metrics_on():
            self._waiting += 1
            try:
                return await super().get_connection()  # type: ignore[no-untyped-call,no-any-return]
            finally:
                self._waiting -= 1
        return await _checkout(self)

    async def release(self, connection: AbstractConnection) -> None:
        if self._waiting or self._in_maintenance or _metrics_on():
            await super().release(connection)  # notifies a waiting checkout
            return
        await _release(self, connection)


class _HiredisPacking:
    """Packs each command with hiredis (C) instead of redis-py's asyncio packer (pure Python;
    redis-py's sync client already uses hiredis). Like redis-py, a command name with a space
    ("SCRIPT LOAD") is two words.

    It also turns a write on a connection torn down under it (the peer reset it, or another
    task disconnected it) into the ``ConnectionError`` it is: redis-py lets asyncio's
    ``AttributeError``/``TypeError`` through there (redis/redis-py#4287), and uvloop's
    ``RuntimeError`` ("the handler is closed": a gateway answered 500 with it while a Sentinel
    failover reset a fresh connection), and those escape every retry that expects a
    connection error. redis-py has already dropped the connection.

    And it writes without the task redis-py makes for each write (``_write``)."""

    def pack_command(self, *args: Any) -> list[bytes]:
        first = args[0]
        if isinstance(first, str) and " " in first:
            args = (*first.split(), *args[1:])
        return [hiredis.pack_command(args)]

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        try:
            if not (self.is_connected and isinstance(command, list)):  # type: ignore[attr-defined]
                await super().send_packed_command(command, check_health)  # type: ignore[misc]
                return
            if check_health:
                await self.check_health()  # type: ignore[attr-defined]
            await self._write(command)
        except (AttributeError, TypeError, RuntimeError) as exc:
            if isinstance(exc, RuntimeError) and "closed" not in str(exc):
                raise
            raise RedisConnectionError(f"connection closed while writing ({exc})") from exc

    async def _write(self, command: list[bytes]) -> None:
        """redis-py's write, without the ``asyncio.wait_for`` it wraps every write in: that
        makes a task per command. The socket timeout still bounds the one wait a write can
        have, a drain of what the socket did not take; errors drop the connection and raise
        what redis-py raises."""
        writer = self._writer  # type: ignore[attr-defined]
        try:
            if writer.transport.is_closing():  # a reset one takes writes silently
                raise ConnectionResetError("the connection is closing")
            writer.writelines(command)
            if writer.transport.get_write_buffer_size():
                async with asyncio.timeout(self.socket_timeout):  # type: ignore[attr-defined]
                    await writer.drain()
        except TimeoutError:
            await self.disconnect(nowait=True)  # type: ignore[attr-defined]
            raise RedisTimeoutError("Timeout writing to socket") from None
        except OSError as exc:
            await self.disconnect(nowait=True)  # type: ignore[attr-defined]
            raise RedisConnectionError(f"connection closed while writing ({exc})") from exc
        except BaseException:
            await self.disconnect(nowait=True)  # type: ignore[attr-defined]
            raise


_PACKING: dict[type, type] = {}


def hiredis_packing(connection_class: type) -> type:
    """``connection_class`` (TCP, TLS or unix socket) packing its commands with hiredis."""
    if connection_class not in _PACKING:
        name = f"Hiredis{connection_class.__name__}"
        _PACKING[connection_class] = type(name, (_HiredisPacking, connection_class), {})
    return _PACKING[connection_class]


def connection_class(base: type) -> type:
    """The connection class genq gives a client built on ``base``: hiredis packing while the
    patches are on, ``base`` itself otherwise."""
    return hiredis_packing(base) if patched() else base


def pool_class() -> type[ConnectionPool]:
    """The pool genq gives a single node without a wait for a free connection."""
    return LeanConnectionPool if patched() else ConnectionPool


def blocking_pool_class() -> type[BlockingConnectionPool]:
    """The pool genq gives a single node whose checkouts wait for a free connection."""
    return LeanBlockingConnectionPool if patched() else BlockingConnectionPool


def pooled(redis: Any) -> TypeGuard[Redis]:
    """Whether ``redis`` is a single node's client drawing on its pool (not a Cluster client,
    a pipeline, or a client holding one connection of its own) and the patches are on: where
    :func:`evalsha` and :func:`evalsha_streamed` may write."""
    return patched() and _single_node_client(redis.__class__) and not redis.single_connection_client


@cache
def _single_node_client(kind: type) -> bool:
    """Whether ``kind`` is a single node's client and not a pipeline, once per class: redis-py's
    ``Pipeline`` is a typing Protocol, whose ``isinstance`` is slow when it says no."""
    return issubclass(kind, Redis) and not issubclass(kind, Pipeline)


async def evalsha(
    redis: Redis, script: AsyncScript, keys: Sequence[Any], args: Sequence[Any]
) -> Any:
    """One call of ``script`` on a connection of ``redis``'s pool (:func:`pooled`), without
    what a batch needs (its generator, its reply loop). A NOSCRIPT is raised as redis-py's
    ``NoScriptError``, its reply read: the caller loads the script and calls again."""

    async def attempt(conn: AbstractConnection) -> Any:
        await conn.send_packed_command(_packed(conn, script, keys, args))
        return await conn.read_response()

    return await _on_pooled_connection(redis, attempt)


async def evalsha_streamed(
    redis: Redis,
    script: AsyncScript,
    made: list[tuple[Sequence[Any], Sequence[Any]]],
    pending: Iterator[tuple[Sequence[Any], Sequence[Any]]],
) -> list[Any]:
    """One call of ``script`` per (keys, args) on one connection of ``redis``'s pool
    (:func:`pooled`): ``made`` in one write, then each call taken from ``pending`` as soon as it
    is made; the replies read after the last. Each call taken is appended to ``made``, so a
    retry (a lost connection) sends every call made so far again before the rest, and after a
    NOSCRIPT (redis-py's ``NoScriptError``, raised once every reply was read) ``made`` holds
    every call sent. The first other error reply is raised once every reply was read."""

    def kept() -> Iterator[tuple[Sequence[Any], Sequence[Any]]]:
        for call in pending:
            made.append(call)
            yield call

    async def attempt(conn: AbstractConnection) -> list[Any]:
        count = len(made)  # written in one write: one syscall here, one read for the server
        await conn.send_packed_command([b for k, a in made for b in _packed(conn, script, k, a)])
        for keys, args in kept():
            await conn.send_packed_command(_packed(conn, script, keys, args), check_health=False)
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

    return await _on_pooled_connection(redis, attempt)


def _packed(
    conn: AbstractConnection, script: AsyncScript, keys: Sequence[Any], args: Sequence[Any]
) -> list[bytes]:
    """One ``EVALSHA`` of ``script``, packed for ``conn``: by hiredis also where the connection
    packs with redis-py's own asyncio packer (a plain ``redis.asyncio.Redis``) and encodes
    text as UTF-8, strictly (redis-py's default). A script call carries every key it touches
    (the books alone are 13), and that packer, pure Python, took about a third of a plain
    client's worker time (``bench/queue.py --only apart``). A connection class with a packer
    of its own (genq's, or one that counts) keeps it."""
    encoder = conn.encoder
    if (
        type(conn).pack_command is _REDIS_PY_PACKER
        and encoder.encoding in _UTF8
        and encoder.encoding_errors == "strict"
    ):
        return [hiredis.pack_command(("EVALSHA", script.sha, len(keys), *keys, *args))]
    return conn.pack_command("EVALSHA", script.sha, len(keys), *keys, *args)


_REDIS_PY_PACKER = AbstractConnection.pack_command


_UTF8 = frozenset({"utf-8", "utf8", "UTF-8", "UTF8"})


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


check()
