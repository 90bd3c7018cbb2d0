"""The local cluster harness itself: slot split, both ways of creating it, clean teardown."""

from __future__ import annotations

import itertools
import os
import shutil
import socket

import pytest

from tests.cluster.local_cluster import (
    SLOTS,
    ClusterSetupError,
    LocalCluster,
    server_binary,
    slot_ranges,
)
from tests.cluster.support import running_cluster

pytestmark = pytest.mark.timeout(60)


def test_slot_ranges_cover_every_slot_once() -> None:
    for masters in (3, 4, 5, 7):
        ranges = slot_ranges(masters)
        assert ranges[0][0] == 0 and ranges[-1][1] == SLOTS - 1
        assert all(low <= high for low, high in ranges)
        assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(ranges))


def test_server_binary_honours_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    found = server_binary()
    assert os.access(found, os.X_OK)
    monkeypatch.setenv("GENQ_TEST_REDIS_SERVER", found)
    assert server_binary() == found
    monkeypatch.setenv("GENQ_TEST_REDIS_SERVER", "/nonexistent/redis-server")
    with pytest.raises(ClusterSetupError, match="GENQ_TEST_REDIS_SERVER"):
        server_binary()
    with pytest.raises(ValueError, match="at least 3 masters"):
        LocalCluster(masters=2)


def node_states(cluster: LocalCluster) -> list[str]:
    states = []
    for node in cluster.nodes:
        with node.client() as client:
            info = client.execute_command("CLUSTER", "INFO").decode()
        states.append(info.split("cluster_state:")[1].split()[0])
    return states


@pytest.mark.skipif(shutil.which("redis-cli") is None, reason="redis-cli is not installed")
def test_local_cluster_made_by_redis_cli_is_ready_and_torn_down() -> None:
    with running_cluster(masters=4, create_with="redis-cli") as cluster:
        assert node_states(cluster) == ["ok"] * 4
        covered = sorted(node.slots for node in cluster.nodes)
        assert covered[0][0] == 0 and covered[-1][1] == SLOTS - 1
        pids = [node.server.pid for node in cluster.nodes]
        ports = [node.port for node in cluster.nodes]
    for pid in pids:  # every server is gone, none orphaned
        assert pid is not None
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    for port in ports:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
