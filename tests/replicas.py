"""A primary with real replicas on loopback, for the durable acceptance tests and bench.

``ReplicatedRedis(replicas=1)`` starts one embedded server as the primary and N more as its
replicas (``REPLICAOF``), and waits until the primary counts each of them online. A replica can
be stopped (SIGKILL, as a crash) and started again on the same port, where it resyncs.
"""

from __future__ import annotations

import time

import redis

from genq_cli.embedded_redis import EmbeddedRedis

READY = 15.0


class ReplicatedRedis:
    """A context manager: ``primary`` and ``replicas`` are started :class:`EmbeddedRedis`."""

    def __init__(self, replicas: int = 1) -> None:
        self.count = replicas
        # No 5 s pause before a full sync (diskless sync waits for more replicas by default).
        self.primary = EmbeddedRedis(enable_debug_command="yes", repl_diskless_sync_delay="0")
        self.replicas: list[EmbeddedRedis] = []

    @property
    def url(self) -> str:
        return self.primary.url

    def start(self) -> ReplicatedRedis:
        self.primary.start()
        try:
            for _ in range(self.count):
                self.replicas.append(self._start_replica(EmbeddedRedis(enable_debug_command="yes")))
            self.wait_online(self.count)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_replica(self, server: EmbeddedRedis) -> EmbeddedRedis:
        server.start()
        with redis.Redis(port=server.port, socket_timeout=5) as client:
            client.execute_command("REPLICAOF", "127.0.0.1", self.primary.port)
        return server

    def stop_replica(self, index: int = 0) -> None:
        """SIGKILLs a replica, as a crash would (:meth:`restart_replica` brings it back)."""
        self.replicas[index].kill()

    def restart_replica(self, index: int = 0) -> None:
        """Starts the replica again on its port, empty: it resyncs from the primary."""
        old = self.replicas[index]
        old.stop()  # already dead: removes its data dir
        server = EmbeddedRedis(binary=old.binary, port=old.port, enable_debug_command="yes")
        self.replicas[index] = self._start_replica(server)
        self.wait_online(len([r for r in self.replicas if r.process is not None]))

    def wait_online(self, count: int) -> None:
        """Until ``count`` replicas confirm a write (a replica reported online may still be
        loading what it was sent, and confirms nothing for a while)."""
        deadline = time.monotonic() + READY
        with redis.Redis(port=self.primary.port, socket_timeout=5) as client:
            while time.monotonic() < deadline:
                client.set("replicas-test:ready", 1)
                if int(client.execute_command("WAIT", count, 100)) >= count:
                    return
        raise TimeoutError(f"{count} replicas not online after {READY}s")

    def replica_client(self, index: int = 0) -> redis.Redis:
        return redis.Redis(port=self.replicas[index].port, socket_timeout=5)

    def stop(self) -> None:
        for server in self.replicas:
            server.stop()
        self.primary.stop()

    def __enter__(self) -> ReplicatedRedis:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
