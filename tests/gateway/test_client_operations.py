"""The client's operator methods (admin key) and a tenant's listing, against a live gateway."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis

from genq_client import APIError, AsyncClient, BulkOutcome, CancelOutcome, Client
from tests.gateway.conftest import KEY_ADMIN, KEY_ALPHA, KEY_BETA, LiveGateway, queue_for

LATER = 600_000


async def _scheduled(client: AsyncClient, n: int, **fields: object) -> list[str]:
    return [
        (await client.generate("demo/fast", f"p{i}", delay_ms=LATER, **fields)).id  # type: ignore[arg-type]
        for i in range(n)
    ]


async def test_client_list_jobs_filters_counts_pages_and_searches(live: LiveGateway) -> None:
    async with (
        AsyncClient(live.url, KEY_ALPHA) as alpha,
        AsyncClient(live.url, KEY_BETA) as beta,
        AsyncClient(live.url, KEY_ADMIN) as ops,
    ):
        alphas = await _scheduled(alpha, 3)
        keyed = (await alpha.generate("demo/fast", "k", delay_ms=LATER, idempotency_key="ik")).id
        betas = await _scheduled(beta, 1)
        newest_first = [*reversed([*alphas, keyed, *betas])]

        page = await ops.list_jobs("demo", limit=3)
        assert [row["id"] for row in page.jobs] == newest_first[:3]
        assert page.queue == "demo" and page.next_cursor is not None
        assert page.counts["scheduled"] == 5 and page.counts["waiting"] == 0
        rest = await ops.list_jobs("demo", limit=3, cursor=page.next_cursor)
        assert [row["id"] for row in rest.jobs] == newest_first[3:]
        assert rest.next_cursor is None
        walked = [row["id"] async for row in ops.iter_jobs("demo", page_size=2)]
        assert walked == newest_first

        theirs = await ops.list_jobs("demo", tenant="beta", status="scheduled")
        assert [(r["id"], r["tenant"]) for r in theirs.jobs] == [(betas[0], "beta")]
        assert theirs.counts["scheduled"] == 1
        assert (await ops.list_jobs("demo", model="x/y")).jobs == []
        found = await ops.list_jobs("demo", q="ik", tenant="alpha")
        assert [row["id"] for row in found.jobs] == [keyed]
        assert [r["id"] for r in (await ops.list_jobs("demo", q=alphas[0])).jobs] == alphas[:1]
        assert (await ops.get_job("demo", keyed))["tenant"] == "alpha"

        with pytest.raises(APIError) as bad:
            await ops.list_jobs("demo", status="nope")
        assert bad.value.status == 400
        with pytest.raises(APIError) as user:
            await alpha.list_jobs("demo")
        assert user.value.status == 403


async def test_client_cancel_retry_delete_one_job(
    live: LiveGateway, redis: aioredis.Redis, prefix: str
) -> None:
    queue = queue_for(redis, prefix)
    async with AsyncClient(live.url, KEY_ALPHA) as alpha, AsyncClient(live.url, KEY_ADMIN) as ops:
        job, other = await _scheduled(alpha, 2)
        with pytest.raises(APIError) as unfinished:
            await ops.delete_job("demo", job)
        assert unfinished.value.status == 409
        with pytest.raises(APIError) as not_failed:
            await ops.retry_job("demo", job)
        assert not_failed.value.status == 409

        assert await ops.cancel_job("demo", job, reason="why") == CancelOutcome(True, "cancelled")
        assert await ops.cancel_job("demo", job) == CancelOutcome(False, "cancelled")
        await ops.retry_job("demo", job, reason="again")
        assert (await queue.get(job)).status.value == "waiting"  # type: ignore[union-attr]
        await ops.cancel_job("demo", job)
        await ops.delete_job("demo", job, reason="cleanup")
        assert await queue.get(job) is None
        with pytest.raises(APIError) as gone:
            await ops.cancel_job("demo", job)
        assert gone.value.status == 404
        assert (await queue.get(other)).status.value == "scheduled"  # type: ignore[union-attr]

        entries = (await ops._http.get("/v1/audit")).json()["entries"]
        assert [(e["action"], e["reason"]) for e in entries[:4]] == [
            ("delete", "cleanup"),
            ("cancel", None),
            ("retry", "again"),
            ("cancel", None),
        ]


async def test_client_bulk_by_ids_and_by_status(
    live: LiveGateway, redis: aioredis.Redis, prefix: str
) -> None:
    queue = queue_for(redis, prefix)
    async with (
        AsyncClient(live.url, KEY_ALPHA) as alpha,
        AsyncClient(live.url, KEY_BETA) as beta,
        AsyncClient(live.url, KEY_ADMIN) as ops,
    ):
        alphas = await _scheduled(alpha, 3)
        betas = await _scheduled(beta, 2)
        unknown = "demo." + "0" * 32
        done = await ops.cancel_jobs("demo", [alphas[0], unknown], reason="r")
        assert done == BulkOutcome(count=1, matched=1)
        done = await ops.cancel_jobs("demo", status="scheduled", tenant="alpha")
        assert done == BulkOutcome(count=2, matched=2)
        assert {(await queue.get(j)).status.value for j in alphas} == {"cancelled"}  # type: ignore[union-attr]
        assert await ops.retry_jobs("demo", status="cancelled") == BulkOutcome(3, 3)
        assert await ops.cancel_jobs("demo", alphas) == BulkOutcome(3, 3)
        assert await ops.delete_jobs("demo", [*alphas, betas[0]]) == BulkOutcome(
            3, 4
        )  # the scheduled one is left
        assert [await queue.get(j) for j in alphas] == [None] * 3
        assert (await queue.get(betas[0])).status.value == "scheduled"  # type: ignore[union-attr]

        with pytest.raises(ValueError):
            await ops.bulk("cancel", "demo")
        with pytest.raises(APIError) as wrong_status:
            await ops.delete_jobs("demo", status="waiting")
        assert wrong_status.value.status == 400


async def test_client_enqueue_for_a_tenant_and_list_generations(live: LiveGateway) -> None:
    async with (
        AsyncClient(live.url, KEY_ALPHA) as alpha,
        AsyncClient(live.url, KEY_BETA) as beta,
        AsyncClient(live.url, KEY_ADMIN) as ops,
    ):
        made = await ops.enqueue_for(
            "demo",
            "alpha",
            "demo/fast",
            "hi",
            delay_ms=LATER,
            reason="support",
            idempotency_key="e",
        )
        assert made.status == "scheduled" and not made.deduplicated
        assert made.warnings == ()  # a key acts as alpha
        typo = await ops.enqueue_for("demo", "alpah", "demo/fast", "hi", delay_ms=LATER)
        [warning] = typo.warnings
        assert "no API key acts as tenant 'alpah'" in warning
        await ops.cancel_job("demo", typo.id)
        await ops.delete_job("demo", typo.id)
        replay = await ops.enqueue_for(
            "demo", "alpha", "demo/fast", "hi", delay_ms=LATER, idempotency_key="e"
        )
        assert replay.id == made.id and replay.deduplicated
        with pytest.raises(APIError) as elsewhere:
            await ops.enqueue_for("demo", "alpha", "other/model", "hi")
        assert elsewhere.value.status == 400

        other_queue = (await alpha.generate("other/model", "x", delay_ms=LATER)).id
        mine = await _scheduled(alpha, 2)
        await _scheduled(beta, 2)
        newest_first = [*reversed([made.id, other_queue, *mine])]
        page = await alpha.list_generations(limit=3)
        assert [g["id"] for g in page.generations] == newest_first[:3]
        rest = await alpha.list_generations(limit=3, cursor=page.next_cursor)
        assert [g["id"] for g in rest.generations] == newest_first[3:]
        assert rest.next_cursor is None
        assert (await alpha.list_generations("completed")).generations == []
        assert len((await beta.list_generations()).generations) == 2


async def test_client_blocking_twin_operates_too(live: LiveGateway) -> None:
    def run() -> None:
        with Client(live.url, KEY_ADMIN) as ops:
            made = ops.enqueue_for("demo", "beta", "demo/fast", "hi", delay_ms=LATER)
            page = ops.list_jobs("demo", tenant="beta")
            assert [row["id"] for row in page.jobs] == [made.id]
            assert ops.cancel_jobs("demo", [made.id]) == BulkOutcome(1, 1)
            ops.delete_job("demo", made.id)
            assert ops.list_jobs("demo").jobs == []

    await asyncio.to_thread(run)
