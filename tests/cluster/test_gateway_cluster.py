"""The gateway on a 3-master Redis Cluster (``GENQ_REDIS_URL=redis+cluster://...``).

Each provider queue lives in its own slot; the gateway's shared tail for a queue must read from
(and be unblocked on) the node serving that slot. The two provider queues here are placed on
different masters.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid

import pytest

from genq import Queue
from genq.connection import connect
from tests.cluster.local_cluster import LocalCluster
from tests.cluster.support import node_client, slot_of
from tests.gateway.conftest import (
    KEY_ADMIN,
    KEY_ALPHA,
    PROVIDERS,
    LiveGateway,
    Script,
    client_for,
    create,
    make_settings,
    read_stream,
)

pytestmark = pytest.mark.timeout(60)


def namespace_across_nodes(cluster: LocalCluster) -> tuple[str, list[int]]:
    """A namespace whose provider queues are served by different masters."""
    while True:
        namespace = f"gw-{uuid.uuid4().hex[:8]}"
        ports = [cluster.node_for_slot(slot_of(f"{namespace}:{p}")).port for p in PROVIDERS]
        if len(set(ports)) == len(ports):
            return namespace, ports


async def reader_blocked(cluster: LocalCluster, namespace: str, port: int) -> None:
    """Waits until the node at ``port`` shows the gateway's tail reader blocked in XREAD."""
    index = next(i for i, node in enumerate(cluster.nodes) if node.port == port)
    client = await node_client(cluster, index)
    try:
        async with asyncio.timeout(10):
            while True:
                clients = await client.client_list()
                if any(
                    c.get("name") == f"genq-tail:{namespace}" and "b" in c.get("flags", "")
                    for c in clients
                ):
                    return
                await asyncio.sleep(0.02)
    finally:
        await client.aclose()


async def tail_readers(cluster: LocalCluster, namespace: str) -> dict[int, int]:
    """Per node port: the gateway's tail reader connections on that node."""
    counts = {}
    for index, node in enumerate(cluster.nodes):
        client = await node_client(cluster, index)
        try:
            clients = await client.client_list()
        finally:
            await client.aclose()
        counts[node.port] = sum(1 for c in clients if c.get("name") == f"genq-tail:{namespace}")
    return counts


async def test_gateway_on_cluster_streams_cancels_and_waits_on_every_node(
    cluster: LocalCluster, cluster_url: str
) -> None:
    namespace, ports = namespace_across_nodes(cluster)
    client = connect(cluster_url)
    script = Script()
    try:
        async with contextlib.AsyncExitStack() as stack:
            for provider in PROVIDERS:
                queue = Queue(client, prefix=f"{namespace}:{provider}")
                await stack.enter_async_context(queue.worker(script.handle, concurrency=8))
            settings = make_settings(cluster_url, namespace, tail_block=30)
            with LiveGateway(settings) as live:
                async with client_for(live, KEY_ALPHA) as alpha:
                    for model, port in zip(("demo/fast", "other/model"), ports, strict=True):
                        # A quiet stream keeps the queue's reader in a 30 s XREAD on its node...
                        gated = await create(alpha, model=model, metadata={"gate": model})
                        watching = asyncio.create_task(read_stream(alpha, gated["id"]))
                        await asyncio.wait_for(script.started_event(gated["id"]).wait(), 10)
                        await reader_blocked(cluster, namespace, port)

                        # ...that a new stream must join at once (CLIENT UNBLOCK on that node).
                        created = await create(alpha, model=model, metadata={"chunks": 3})
                        stream = await read_stream(alpha, created["id"], timeout=10)
                        kinds = [e.event for e in stream.events]
                        assert kinds == ["chunk", "chunk", "chunk", "completed"], model

                        cancel = await alpha.post(f"/v1/generations/{gated['id']}/cancel")
                        assert cancel.json()["cancelled"] is True
                        watched = await asyncio.wait_for(watching, 10)
                        assert [e.event for e in watched.events] == ["cancelled"]

                        waited = await alpha.get(
                            f"/v1/generations/{created['id']}/result", params={"timeout": 5}
                        )
                        assert waited.json()["text"] == "t0 t1 t2 "

                    readers = await tail_readers(cluster, namespace)
                    assert {port: readers[port] for port in ports} == dict.fromkeys(ports, 1)
                    assert sum(readers.values()) == len(ports)
            script.open_all_gates()
    finally:
        await client.aclose()


async def test_gateway_history_on_cluster_reports_sampled_buckets(
    cluster: LocalCluster, cluster_url: str
) -> None:
    namespace, _ = namespace_across_nodes(cluster)
    client = connect(cluster_url)
    try:
        queue = Queue(client, prefix=f"{namespace}:demo")
        for _ in range(3):
            await queue.enqueue({"prompt": "waits: no worker runs"})
        began = await queue.server_time()
        with LiveGateway(make_settings(cluster_url, namespace)) as live:  # samples every 0.1 s
            async with client_for(live, KEY_ADMIN) as admin:
                async with asyncio.timeout(10):
                    while True:
                        answer = await admin.get("/v1/queues/demo/history")
                        assert answer.status_code == 200, answer.text
                        history = answer.json()
                        if history["buckets"][-1]["peak_depth"] == 3:
                            break
                        await asyncio.sleep(0.1)
                other = (await admin.get("/v1/queues/other/history")).json()
        now = await queue.server_time()
        buckets = history["buckets"]
        assert (history["queue"], history["step"], len(buckets)) == ("demo", 1800, 48)
        # On the server's clock; the sampling may have crossed a half hour's boundary, and then
        # the bucket before the last was sampled too.
        spanned = {int(t) - int(t) % 1800 for t in (began, now)}
        assert buckets[-1]["start"] in spanned
        assert buckets[-1]["longest_wait"] is not None and buckets[-1]["longest_wait"] >= 0
        assert [b["start"] for b in buckets] == [buckets[0]["start"] + 1800 * i for i in range(48)]
        assert all(b["peak_depth"] == 0 for b in buckets[:-2])
        assert buckets[-2]["peak_depth"] == 0 or buckets[-2]["start"] in spanned
        assert [b["peak_depth"] for b in other["buckets"]] == [0] * 48
    finally:
        await client.aclose()


async def test_gateway_on_cluster_lists_and_acts_on_jobs_in_bulk(
    cluster: LocalCluster, cluster_url: str
) -> None:
    namespace, _ = namespace_across_nodes(cluster)
    client = connect(cluster_url)
    script = Script()
    try:
        async with contextlib.AsyncExitStack() as stack:
            with LiveGateway(make_settings(cluster_url, namespace)) as live:
                alpha = await stack.enter_async_context(client_for(live, KEY_ALPHA))
                admin = await stack.enter_async_context(client_for(live, KEY_ADMIN))
                made = [
                    (await create(alpha, model=model, delay_ms=60_000))["id"]
                    for model in ("demo/fast", "other/model") * 3
                ]
                # The caller's listing merges the queues, each on its own master.
                seen, cursor = [], None
                while True:
                    params = {"limit": 4, **({"cursor": cursor} if cursor else {})}
                    page = (await alpha.get("/v1/generations", params=params)).json()
                    seen += [g["id"] for g in page["generations"]]
                    if (cursor := page["next_cursor"]) is None:
                        break
                assert seen == list(reversed(made))

                on_demo = made[0::2]
                body = {"all": True, "status": "scheduled", "reason": "drill"}
                cancel = await admin.post("/v1/queues/demo/jobs/cancel", json=body)
                assert cancel.json() == {"count": 3, "matched": 3}
                listing = (await admin.get("/v1/queues/demo/jobs")).json()
                assert listing["counts"]["cancelled"] == 3
                assert {row["status"] for row in listing["jobs"]} == {"cancelled"}

                for provider in PROVIDERS:  # the workers start only now
                    queue = Queue(client, prefix=f"{namespace}:{provider}")
                    await stack.enter_async_context(queue.worker(script.handle, concurrency=8))
                retry = await admin.post("/v1/queues/demo/jobs/retry", json={"ids": on_demo[:2]})
                assert retry.json() == {"count": 2, "matched": 2}
                for job_id in on_demo[:2]:
                    result = await alpha.get(
                        f"/v1/generations/{job_id}/result", params={"timeout": 10}
                    )
                    assert result.json()["text"] == "t0 t1 t2 "

                finished = {"all": True, "status": "completed"}
                delete = await admin.post("/v1/queues/demo/jobs/delete", json=finished)
                assert delete.json() == {"count": 2, "matched": 2}
                left = (await admin.get("/v1/queues/demo/jobs")).json()
                assert [row["id"] for row in left["jobs"]] == [on_demo[2]]
                other = (await admin.get("/v1/queues/other/jobs")).json()
                assert other["counts"]["scheduled"] == 3  # the other queue untouched

                audit = (await admin.get("/v1/audit", params={"limit": 3})).json()["entries"]
                assert [(e["action"], e["count"], e["reason"]) for e in audit] == [
                    ("delete", 2, None), ("retry", 2, None), ("cancel", 3, "drill"),
                ]  # fmt: skip
                assert sorted(audit[2]["ids"]) == sorted(on_demo)
    finally:
        await client.aclose()
