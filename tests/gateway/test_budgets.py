"""Budgets at the gateway: reservations at enqueue that hold under concurrency, 402 answers,
releases (cancel before running, the sweep), and the admin and tenant budget routes."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis

from gateway.access.auth import ApiKeyStore, new_api_key
from gateway.admission.schemas import GenerationRequest
from gateway.settings import Settings
from genq import ActiveJob, Queue, TerminalJobError
from genq_contract.api_keys import KeyGrant
from genq_contract.budget_limits import BudgetExceeded, Limits
from genq_contract.keys import GatewayKeys
from genq_contract.payload import GenerationPayload
from genq_contract.settings import CommonSettings
from genq_contract.spend import DEMO_PRICE, max_cost_nanos, prices_key
from genq_services import budget
from genq_services.prices import publish_prices, read_prices
from tests.gateway.conftest import (
    KEY_ALPHA,
    LiveGateway,
    client_for,
    make_settings,
    queue_for,
)

PROMPT = "how much?"
PARAMS = {"max_tokens": 20}
FITS = 7
"""Generations alpha's daily budget fits."""
REAL = (5, 3)
"""Prompt and completion tokens a test attempt really uses (far below its reservation)."""


def most_cost(prompt: str = PROMPT, params: dict[str, Any] = PARAMS) -> int:
    """What the gateway reserves for one generation: the same payload, the same price."""
    request = GenerationRequest(model="demo/fast", prompt=prompt, params=params)
    payload = GenerationPayload(model="demo/fast", messages=request.conversation(), params=params)
    return max_cost_nanos(payload, DEMO_PRICE)


DAILY_NANOS = FITS * most_cost() + most_cost() // 2


@pytest.fixture
def settings(redis_url: str, prefix: str) -> Settings:
    return make_settings(
        redis_url,
        prefix,
        tenant_budgets={"alpha": {"daily_usd": DAILY_NANOS / 1e9, "monthly_usd": 1000}},
        budget_sweep_interval=0.1,
        budget_sweep_grace=0.5,
    )


@pytest.fixture(autouse=True)
async def prices(redis: aioredis.Redis, prefix: str) -> None:
    """What a worker serving demo/fast publishes when it starts."""
    await publish_prices(redis, prefix, {"demo/fast": DEMO_PRICE})


async def post(client: httpx.AsyncClient, **fields: Any) -> httpx.Response:
    body = {"model": "demo/fast", "prompt": PROMPT, "params": PARAMS, **fields}
    return await client.post("/v1/generations", json=body)


async def account(redis: aioredis.Redis, prefix: str, tenant: str = "alpha") -> budget.Account:
    return await budget.read_account(redis, prefix, tenant)


class BudgetedWorker:
    """A handler that keeps the workers' side of a budget: hold before the attempt, meter and
    charge its real cost after it. ``crash`` ids end their attempt without a charge, as a
    worker killed between the two would leave them."""

    def __init__(self, redis: aioredis.Redis, settings: CommonSettings) -> None:
        self.redis = redis
        self.settings = settings  # workers read GENQ_TENANT_BUDGETS as the gateway does
        self.prefix = settings.queue_namespace
        self.crash: set[str] = set()
        self.refused: list[str] = []

    async def handle(self, job: ActiveJob) -> dict[str, Any]:
        payload = GenerationPayload.parse(job.payload)
        tenant = payload.tenant or ""
        limits = await budget.limits_for(self.redis, self.settings, tenant)
        assert limits is not None
        most = max_cost_nanos(payload, DEMO_PRICE)
        try:
            await budget.hold(self.redis, self.prefix, tenant, job.id, most, limits)
        except BudgetExceeded as exc:
            self.refused.append(job.id)
            raise TerminalJobError(str(exc)) from None
        await job.emit("spent ")
        cost = DEMO_PRICE.cost_nanos(*REAL)
        counts = {"prompt_tokens": REAL[0], "completion_tokens": REAL[1], "cost_nanos": cost}
        job.meter(payload.model, counts)
        if job.id in self.crash:
            raise TerminalJobError("worker lost before its charge")
        await budget.charge(self.redis, self.prefix, tenant, job.id, cost)
        return {"text": "spent ", "model": payload.model, "finish_reason": "stop"}


@contextlib.asynccontextmanager
async def running(worker: BudgetedWorker, queue: Queue) -> AsyncIterator[None]:
    async with queue.worker(worker.handle, concurrency=16):
        yield


async def finished(queue: Queue, ids: list[str]) -> None:
    async def all_done() -> bool:
        jobs = [await queue.get(i) for i in ids]
        return all(j is not None and j.finished_at is not None for j in jobs)

    async with asyncio.timeout(20):
        while not await all_done():
            await asyncio.sleep(0.05)


async def test_budget_race_accepts_exactly_what_fits_and_settles_within_it(
    alpha: httpx.AsyncClient, redis: aioredis.Redis, prefix: str, settings: Settings
) -> None:
    answers = await asyncio.gather(*(post(alpha) for _ in range(200)))
    accepted = [a.json()["id"] for a in answers if a.status_code == 202]
    refused = [a for a in answers if a.status_code == 402]
    assert len(accepted) == FITS
    assert len(refused) == 200 - FITS
    detail = refused[0].json()["detail"]
    assert detail["limit"] == "daily"
    assert detail["remaining_usd"] == pytest.approx((DAILY_NANOS - FITS * most_cost()) / 1e9)
    tomorrow = datetime.datetime.now(datetime.UTC).date() + datetime.timedelta(days=1)
    assert datetime.datetime.fromisoformat(detail["resets_at"]) == datetime.datetime.combine(
        tomorrow, datetime.time(), datetime.UTC
    )
    assert "daily budget" in detail["message"]
    before = await account(redis, prefix)
    assert (before.reserved_nanos, before.reservations) == (FITS * most_cost(), FITS)

    # One is cancelled before it ever ran: its reservation comes back at once.
    stopped = await alpha.post(f"/v1/generations/{accepted[0]}/cancel")
    assert stopped.json()["status"] == "cancelled"
    assert (await account(redis, prefix)).reservations == FITS - 1

    worker = BudgetedWorker(redis, settings)
    queue = queue_for(redis, prefix)
    async with running(worker, queue):
        await finished(queue, accepted)
    after = await account(redis, prefix)
    assert (after.reserved_nanos, after.reservations) == (0, 0)
    assert after.spent_day_nanos == (FITS - 1) * DEMO_PRICE.cost_nanos(*REAL)
    assert after.spent_day_nanos <= DAILY_NANOS
    assert worker.refused == []
    # What the real costs left free is accepted again.
    assert (await post(alpha)).status_code == 202


async def test_sweep_releases_what_a_lost_worker_never_charged(
    alpha: httpx.AsyncClient, redis: aioredis.Redis, prefix: str, settings: Settings
) -> None:
    ids = [(await post(alpha)).json()["id"] for _ in range(2)]
    worker = BudgetedWorker(redis, settings)
    worker.crash.add(ids[0])
    queue = queue_for(redis, prefix)
    async with running(worker, queue):
        await finished(queue, ids)
    left = await account(redis, prefix)
    assert left.reservations <= 1  # the crashed one, until the sweep's grace has passed
    async with asyncio.timeout(5):
        while (await account(redis, prefix)).reservations:
            await asyncio.sleep(0.05)
    swept = await account(redis, prefix)
    assert swept.reserved_nanos == 0
    assert swept.spent_day_nanos == DEMO_PRICE.cost_nanos(*REAL)  # the lost one: 0


async def test_replay_reserves_once_and_unbudgeted_tenants_reserve_nothing(
    alpha: httpx.AsyncClient, beta: httpx.AsyncClient, redis: aioredis.Redis, prefix: str
) -> None:
    headers = {"Idempotency-Key": "once"}
    body = {"model": "demo/fast", "prompt": PROMPT, "params": PARAMS}
    first = await alpha.post("/v1/generations", json=body, headers=headers)
    again = await alpha.post("/v1/generations", json=body, headers=headers)
    assert (first.status_code, again.status_code) == (202, 200)
    assert (await account(redis, prefix)).reservations == 1
    assert (await post(beta)).status_code == 202
    assert (await account(redis, prefix, "beta")).reservations == 0


async def test_no_published_price_is_503_for_budgeted_tenants_only(
    alpha: httpx.AsyncClient, beta: httpx.AsyncClient, redis: aioredis.Redis, prefix: str
) -> None:
    body = {"model": "other/model", "prompt": PROMPT}
    refused = await alpha.post("/v1/generations", json=body)
    assert refused.status_code == 503
    assert "no price is known yet for model 'other/model'" in refused.json()["detail"]
    assert (await beta.post("/v1/generations", json=body)).status_code == 202
    assert (await account(redis, prefix)).reservations == 0
    # Nothing else was taken either: the in-flight slot came back.
    assert await redis.zcard(f"{prefix}:gateway:inflight:alpha") == 0


async def test_openai_routes_refuse_with_openai_shaped_402(
    alpha: httpx.AsyncClient, redis: aioredis.Redis, prefix: str
) -> None:
    await budget.set_limits(redis, prefix, "alpha", Limits(daily_nanos=1))
    chat = await alpha.post(
        "/v1/chat/completions",
        json={"model": "demo/fast", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert chat.status_code == 402
    error = chat.json()["error"]
    assert (error["type"], error["code"]) == ("insufficient_quota", "budget_exceeded")
    assert "daily budget" in error["message"]
    responses = await alpha.post("/v1/responses", json={"model": "demo/fast", "input": "hi"})
    assert responses.status_code == 402
    assert responses.json()["error"]["code"] == "budget_exceeded"
    batch = await alpha.post(
        "/v1/generations:batch", json={"items": [{"model": "demo/fast", "prompt": "hi"}]}
    )
    assert batch.status_code == 207
    item = batch.json()["items"][0]["error"]
    assert item["status"] == 402
    assert item["detail"]["limit"] == "daily"


# -- the budget routes ------------------------------------------------------------------------


async def test_admin_sets_reads_and_clears_a_budget_which_then_applies(
    admin: httpx.AsyncClient, beta: httpx.AsyncClient
) -> None:
    assert (await post(beta)).status_code == 202
    set_ = await admin.put(
        "/v1/budgets/beta", json={"daily_usd": None, "monthly_usd": 1e-6, "reason": "trial"}
    )
    assert set_.status_code == 200, set_.text
    body = set_.json()
    assert (body["source"], body["daily_usd"], body["monthly_usd"]) == ("admin", None, 1e-6)
    refused = await post(beta)
    assert refused.status_code == 402
    assert refused.json()["detail"]["limit"] == "monthly"
    listed = (await admin.get("/v1/budgets")).json()["budgets"]
    assert [b["tenant"] for b in listed] == ["alpha", "beta"]
    assert listed[0]["source"] == "settings"
    assert listed[0]["daily_usd"] == pytest.approx(DAILY_NANOS / 1e9)
    own = (await beta.get("/v1/budget")).json()
    assert (own["tenant"], own["monthly_usd"], own["reservations"]) == ("beta", 1e-6, 0)
    assert (await admin.delete("/v1/budgets/beta", params={"reason": "done"})).json()[
        "source"
    ] == "none"
    assert (await admin.delete("/v1/budgets/beta")).status_code == 404
    assert (await post(beta)).status_code == 202
    audit = (await admin.get("/v1/audit")).json()["entries"]
    actions = [(e["action"], e["ids"], e["reason"]) for e in audit[:2]]
    assert actions == [("clear_budget", ["beta"], "done"), ("set_budget", ["beta"], "trial")]


async def test_budget_routes_are_for_admins_and_each_tenant_reads_its_own(
    alpha: httpx.AsyncClient, beta: httpx.AsyncClient, admin: httpx.AsyncClient
) -> None:
    assert (await alpha.get("/v1/budgets")).status_code == 403
    assert (await alpha.get("/v1/budgets/beta")).status_code == 403
    assert (await alpha.put("/v1/budgets/alpha", json={"daily_usd": 100})).status_code == 403
    assert (await alpha.delete("/v1/budgets/alpha")).status_code == 403
    assert (await admin.put("/v1/budgets/x", json={"daily_usd": -1})).status_code == 422
    assert (await admin.put("/v1/budgets/bad{tag}", json={})).status_code == 422
    assert (await post(alpha)).status_code == 202
    own = (await alpha.get("/v1/budget")).json()
    assert own["source"] == "settings"
    assert own["reserved_usd"] == pytest.approx(most_cost() / 1e9)
    assert own["spent_today_usd"] == 0
    assert (await beta.get("/v1/budget")).json()["source"] == "none"


REFUSED_LIMITS = [
    ({"daily_usd": "1"}, "daily_usd"),
    ({"monthly_usd": "1e-3"}, "monthly_usd"),
    ({"daily_usd": True}, "daily_usd"),
    ({"daily_usd": 5, "monthly_usd": False}, "monthly_usd"),
]


async def test_budget_limits_take_json_numbers_only(admin: httpx.AsyncClient) -> None:
    for body, field in REFUSED_LIMITS:
        refused = await admin.put("/v1/budgets/alpha", json=body)
        assert refused.status_code == 422, (body, refused.text)
        assert [p["loc"] for p in refused.json()["detail"]] == [["body", field]], body
    whole = await admin.put(
        "/v1/budgets/alpha", content="null", headers={"Content-Type": "application/json"}
    )
    assert whole.status_code == 422  # null is for a limit (none of that kind), not the body
    unchanged = (await admin.get("/v1/budgets/alpha")).json()
    assert (unchanged["source"], unchanged["daily_usd"]) == ("settings", DAILY_NANOS / 1e9)
    taken = await admin.put("/v1/budgets/alpha", json={"daily_usd": 2, "monthly_usd": None})
    assert taken.status_code == 200, taken.text
    assert (taken.json()["daily_usd"], taken.json()["monthly_usd"]) == (2.0, None)


# -- warnings for a tenant no API key acts as ------------------------------------------------


async def test_budget_set_warns_when_no_api_key_acts_as_the_tenant(
    admin: httpx.AsyncClient, redis: aioredis.Redis, prefix: str
) -> None:
    typo = await admin.put("/v1/budgets/alhpa", json={"daily_usd": 1})
    assert typo.status_code == 200, typo.text
    [warning] = typo.json()["warnings"]
    assert "no API key acts as tenant 'alhpa'" in warning
    assert typo.json()["source"] == "admin"  # set all the same
    known = await admin.put("/v1/budgets/alpha", json={"daily_usd": 1})  # GENQ_API_KEYS
    assert known.json()["warnings"] == []
    # A key of the key store (`genq keys`) counts as well.
    store = ApiKeyStore(redis, GatewayKeys(prefix).api_keys)
    await store.add(new_api_key(), KeyGrant(tenant="alhpa"))
    again = await admin.put("/v1/budgets/alhpa", json={"daily_usd": 1})
    assert again.json()["warnings"] == []


async def test_admin_enqueue_warns_when_no_api_key_acts_as_the_tenant(
    admin: httpx.AsyncClient,
) -> None:
    body = {"model": "demo/fast", "prompt": PROMPT}
    typo = await admin.post("/v1/queues/demo/jobs", json={**body, "tenant": "btea"})
    assert typo.status_code == 202, typo.text
    [warning] = typo.json()["warnings"]
    assert "no API key acts as tenant 'btea'" in warning
    known = await admin.post("/v1/queues/demo/jobs", json={**body, "tenant": "beta"})
    assert known.status_code == 202
    assert known.json()["warnings"] == []


# -- the whole path: a real worker process ---------------------------------------------------

DEMO_PARAMS = {"max_tokens": 64, "demo_tokens": 5, "demo_delay_ms": 0}


@pytest.mark.timeout(120)
async def test_budget_race_through_a_real_demo_worker_settles_within_the_budget(
    redis_url: str, redis: aioredis.Redis, prefix: str
) -> None:
    """200 concurrent POSTs against a budget that fits 5; a `python -m workers` process runs
    the demo model through LiteLLM, holds and charges: exactly 5 accepted, the settled spend is
    the records' cost and within the budget, and no reservation is left."""
    from tests.workers.processes import WorkerChild

    fits = 5
    reserve = most_cost(params=DEMO_PARAMS)
    daily = fits * reserve + reserve // 3
    budgets = json.dumps({"alpha": {"daily_usd": daily / 1e9}})
    settings = make_settings(redis_url, prefix, tenant_budgets=json.loads(budgets))
    queue = queue_for(redis, prefix)
    with LiveGateway(settings) as live:
        async with client_for(live, KEY_ALPHA) as alpha:
            # No worker runs yet (one would charge and free budget mid-race): the price is
            # the one a demo worker publishes, as checked below once one runs.
            answers = await asyncio.gather(*(post(alpha, params=DEMO_PARAMS) for _ in range(200)))
            statuses = [a.status_code for a in answers]
            assert (statuses.count(202), statuses.count(402)) == (fits, 200 - fits)
            ids = [a.json()["id"] for a in answers if a.status_code == 202]
            await redis.delete(prices_key(prefix))
            worker = await WorkerChild.spawn(
                {
                    "GENQ_REDIS_URL": redis_url,
                    "GENQ_QUEUE_NAMESPACE": prefix,
                    "GENQ_MODELS": "demo/fast",
                    "GENQ_TENANT_BUDGETS": budgets,
                }
            )
            try:
                await worker.wait_for_log("serving provider demo")
                published = await read_prices(redis, prefix, ["demo/fast"])
                assert published["demo/fast"] == DEMO_PRICE
                await finished(queue, ids)
                jobs = [await queue.get(i) for i in ids]
                assert all(j is not None and j.status.value == "completed" for j in jobs), (
                    worker.log
                )
                recorded = sum(int(j.usage["cost_nanos"]) for j in jobs if j and j.usage)
                after = await account(redis, prefix)
                assert (after.reserved_nanos, after.reservations) == (0, 0)
                assert 0 < after.spent_day_nanos == recorded <= daily
                # What the real costs left free is accepted again.
                assert (await post(alpha, params=DEMO_PARAMS)).status_code == 202
            finally:
                await worker.close()
