"""A revoked key's or disabled tenant's generations end without reaching the provider.

Real workers (genq Worker + GenerationHandler + LiteLLM) stream from the fake OpenAI server,
which counts every request it gets: that count proves no provider call happened after the
revocation. The gateway and ``genq keys revoke`` run for real (uvicorn thread, subprocess).
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from typing import Any

import pytest
import redis.asyncio as aioredis

from gateway.access.auth import ApiKeyStore, new_api_key
from genq import JobCancelledError, JobFailedError, Queue
from genq_contract.api_keys import KeyGrant
from genq_contract.keys import GatewayKeys
from genq_services.access import Access
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.gateway.conftest import LiveGateway, client_for, make_settings
from tests.gateway.test_cli import GENQ, _env

pytestmark = pytest.mark.timeout(60)

OPENAI = "openai/gpt-4o-mini"
LONG_STORY = Reply.stream([f"w{i} " for i in range(1000)], delay=0.03)


def prompts(fake: FakeOpenAI) -> list[str]:
    return [r.body["messages"][-1]["content"] for r in fake.requests]


async def first_chunk(queue: Queue, job_id: str) -> None:
    async for event in queue.watch(job_id):
        if event.type == "chunk":
            return


async def outcome(queue: Queue, job_id: str) -> str:
    try:
        await queue.wait(job_id, timeout=20)
    except JobCancelledError:
        return "cancelled"
    except JobFailedError as exc:
        return f"failed: {exc.error}"
    return "completed"


async def test_revoke_stops_waiting_scheduled_and_running_jobs_without_provider_calls(
    redis: aioredis.Redis, redis_url: str, prefix: str, start_workers: Any, fake_openai: FakeOpenAI
) -> None:
    namespace = f"{prefix}-gen"
    store = ApiKeyStore(redis, GatewayKeys(namespace).api_keys)
    doomed, kept = new_api_key(), new_api_key()
    digest = await store.add(doomed, KeyGrant(tenant="acme"))
    await store.add(kept, KeyGrant(tenant="acme"))
    fake_openai.plan(LONG_STORY)  # the first generation streams until stopped
    workers = await start_workers(provider_concurrency={"openai": 1})
    queue = workers.queues["openai"]
    settings = make_settings(redis_url, namespace, models=["demo/*", OPENAI])

    with LiveGateway(settings) as live:
        async with client_for(live, doomed) as mine, client_for(live, kept) as other:

            async def submit(client: Any, prompt: str, **extra: Any) -> str:
                body = {"model": OPENAI, "prompt": prompt, **extra}
                answer = await client.post("/v1/generations", json=body)
                assert answer.status_code == 202, answer.text
                return str(answer.json()["id"])

            running = await submit(mine, "running")
            await asyncio.wait_for(first_chunk(queue, running), 20)
            waiting = [await submit(mine, f"waiting {i}") for i in range(2)]
            scheduled = await submit(mine, "scheduled", delay_ms=60_000)
            unrelated = await submit(other, "other key")  # same tenant, another key
            view = (await mine.get(f"/v1/generations/{running}")).json()
            assert (view["status"], view["key_id"]) == ("active", digest[:8])
            assert [(await queue.get(j)).status.value for j in waiting] == ["waiting"] * 2

            revoked_at = time.monotonic()
            done = await asyncio.to_thread(
                subprocess.run,
                [*GENQ, "keys", "revoke", digest[:12]],
                env=_env(redis_url, namespace) | {"GENQ_MODELS": f"demo/*,{OPENAI}"},
                capture_output=True,
                text=True,
                timeout=30,
            )
            assert done.returncode == 0, done.stderr
            assert done.stdout.splitlines() == [
                f"revoked 1 key(s), key id {digest[:8]}",
                "stopped 4 job(s)",
            ]
            stream = fake_openai.requests[0]
            assert await asyncio.to_thread(stream.wait_disconnected, 5)
            assert stream.disconnected_at is not None
            for job_id in (running, *waiting, scheduled):
                assert await outcome(queue, job_id) == "cancelled", job_id
            assert await outcome(queue, unrelated) == "completed"
            refused = await mine.post("/v1/generations", json={"model": OPENAI, "prompt": "x"})
            assert refused.status_code == 401

    # Two provider calls in all: the running one (closed at the revocation) and the other key's.
    assert prompts(fake_openai) == ["running", "other key"]
    assert fake_openai.requests[1].received_at > revoked_at


async def test_worker_refuses_a_refused_job_at_its_start_without_calling_the_provider(
    redis: aioredis.Redis, prefix: str, start_workers: Any, fake_openai: FakeOpenAI
) -> None:
    """A job the revocation sweep did not see (accepted by a gateway whose key cache still
    held the key): the worker fails it with the reason before any provider call."""
    access = Access(redis, f"{prefix}-gen")
    await access.revoke_key_ids(["deadbeef"])
    await access.disable_tenant("gone")
    workers = await start_workers(access_cache_seconds=0.2)
    queue = workers.queues["openai"]
    revoked = await queue.enqueue(
        {"model": OPENAI, "prompt": "a", "tenant": "acme", "key_id": "deadbeef"}, tenant="acme"
    )
    disabled = await queue.enqueue(
        {"model": OPENAI, "prompt": "b", "tenant": "gone", "key_id": "0badf00d"}, tenant="gone"
    )
    allowed = await queue.enqueue(
        {"model": OPENAI, "prompt": "c", "tenant": "acme", "key_id": "0badf00d"}, tenant="acme"
    )
    assert await outcome(queue, revoked.id) == (
        "failed: API key deadbeef was revoked; the generation was not run"
    )
    assert await outcome(queue, disabled.id) == (
        "failed: tenant 'gone' is disabled; the generation was not run"
    )
    assert (await queue.get(revoked.id)).attempt == 1  # terminal
    assert await outcome(queue, allowed.id) == "completed"
    assert prompts(fake_openai) == ["c"]

    assert await access.enable_tenant("gone")
    await asyncio.sleep(0.25)  # the worker's copy is at most 0.2 s old
    again = await queue.enqueue(
        {"model": OPENAI, "prompt": "d", "tenant": "gone", "key_id": "0badf00d"}, tenant="gone"
    )
    assert await outcome(queue, again.id) == "completed"
    assert prompts(fake_openai) == ["c", "d"]


@pytest.mark.parametrize("refuse", ["key", "tenant"])
async def test_worker_stops_a_running_generation_within_the_cache_time(
    redis: aioredis.Redis, prefix: str, start_workers: Any, fake_openai: FakeOpenAI, refuse: str
) -> None:
    """Without the sweep (access changed directly), the worker's own re-check stops the
    stream: failed with the reason, the provider connection closed."""
    access = Access(redis, f"{prefix}-gen")
    fake_openai.plan(LONG_STORY)
    cache = 0.5
    workers = await start_workers(access_cache_seconds=cache)
    workers.handlers["openai"].access_recheck = 0.2
    queue = workers.queues["openai"]
    job = await queue.enqueue(
        {"model": OPENAI, "prompt": "long", "tenant": "acme", "key_id": "cafef00d"}, tenant="acme"
    )
    await asyncio.wait_for(first_chunk(queue, job.id), 20)
    at = time.monotonic()
    if refuse == "key":
        await access.revoke_key_ids(["cafef00d"])
        reason = "API key cafef00d was revoked"
    else:
        await access.disable_tenant("acme")
        reason = "tenant 'acme' is disabled"
    stream = fake_openai.requests[0]
    assert await asyncio.to_thread(stream.wait_disconnected, 5)
    assert stream.disconnected_at is not None
    assert stream.disconnected_at - at < cache + 0.2 + 0.5
    assert await outcome(queue, job.id) == f"failed: {reason}; the generation was stopped"
    assert fake_openai.count() == 1


async def test_a_stop_while_the_access_is_watched_cancels_the_generation(
    redis: aioredis.Redis, prefix: str, start_workers: Any, fake_openai: FakeOpenAI
) -> None:
    """The access watcher runs beside the generation, which runs in the handler's own task: a
    Stop (the worker's cancel of that task) still ends it cancelled, not failed, and closes the
    provider stream; the key, never refused, does not turn it into a refusal."""
    fake_openai.plan(LONG_STORY)
    workers = await start_workers(access_cache_seconds=0.5)
    workers.handlers["openai"].access_recheck = 0.05
    queue = workers.queues["openai"]
    job = await queue.enqueue(
        {"model": OPENAI, "prompt": "stop me", "tenant": "acme", "key_id": "cafef00d"},
        tenant="acme",
    )
    await asyncio.wait_for(first_chunk(queue, job.id), 20)
    await asyncio.sleep(0.2)  # a few of the watcher's checks have passed
    await queue.cancel(job.id)
    stream = fake_openai.requests[0]
    assert await asyncio.to_thread(stream.wait_disconnected, 5)
    assert await outcome(queue, job.id) == "cancelled"
    assert fake_openai.count() == 1
