"""Fallback models: a failing primary hands the generation to a healthy second provider."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from genq import Event, JobCancelledError, JobFailedError, Queue, visible_text
from genq_contract.routing import RoutingSettings
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.gateway.conftest import KEY_ALPHA, LiveGateway, client_for, make_settings
from tests.workers.conftest import events_of
from workers.fallback import fallback_key

PRIMARY = "openai/gpt-4o-mini"
BACKUP = "openai/gpt-4o"  # served by the provider "backup": its own queue and server
OTHER = "openai/o3"  # a second fallback, also on "backup"


@pytest.fixture
def backup_openai() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(default_tokens=5) as server:
        yield server


@pytest.fixture
def two_providers(fake_openai: FakeOpenAI, backup_openai: FakeOpenAI) -> dict[str, Any]:
    """Worker settings: PRIMARY on provider openai, BACKUP and OTHER on provider backup."""
    return {
        "models": [PRIMARY, BACKUP, OTHER, "demo/*"],
        "model_providers": {BACKUP: "backup", OTHER: "backup"},
        "provider_api_bases": {"openai": fake_openai.base_url, "backup": backup_openai.base_url},
        "provider_api_key_envs": {
            "openai": "GENQ_TEST_OPENAI_KEY",
            "backup": "GENQ_TEST_OPENAI_KEY",
        },
        "fallbacks": {PRIMARY: [BACKUP]},
    }


def restarts(events: list[Event]) -> list[Any]:
    return [e.data for e in events if e.type == "restarted"]


async def child_of(queue: Queue, parent_id: str) -> Any:
    child = await queue.find(fallback_key(parent_id))
    assert child is not None, "no fallback generation on the backup queue"
    return child


async def test_fallback_after_server_errors_streams_the_second_provider(
    start_workers, two_providers, fake_openai: FakeOpenAI, backup_openai: FakeOpenAI
) -> None:
    fake_openai.plan(Reply.error(500, "primary is down"), times=2)
    backup_openai.plan(Reply.stream(["Hello", " from", " backup"], delay=0.005))
    workers = await start_workers(**two_providers)
    openai, backup = workers.queues["openai"], workers.queues["backup"]
    job = await openai.enqueue(
        {"model": PRIMARY, "prompt": "hi there", "tenant": "acme"}, max_attempts=2, tenant="acme"
    )
    events = await events_of(openai, job.id)

    assert [e.type for e in events].count("completed") == 1
    (restart,) = restarts(events)  # both primary attempts failed before writing any text
    assert restart["model"] == BACKUP
    assert "primary is down" in restart["reason"]
    assert visible_text(events) == "Hello from backup" == events[-1].data["text"]
    assert events[-1].data["model"] == BACKUP  # which model answered
    assert fake_openai.count() == 2  # the attempts meant for the primary, no more
    assert [r.model for r in backup_openai.requests] == ["gpt-4o"]

    # The child ran through the backup provider's queue, as the same tenant, at the chain's end.
    child = await child_of(backup, job.id)
    assert (child.status.value, child.tenant) == ("completed", "acme")
    assert child.id.startswith("backup.")
    assert (child.payload["model"], child.payload["fallbacks"]) == (BACKUP, [])
    assert child.result["text"] == "Hello from backup"

    # The parent's record: each attempt and what it cost; the relay's usage is the child's.
    parent = await openai.get(job.id)
    assert [a.outcome for a in parent.history] == ["retry", "completed"]
    relay = parent.history[-1]
    assert relay.label == BACKUP
    assert relay.usage is not None and child.usage is not None
    assert relay.usage["completion_tokens"] == child.usage["completion_tokens"] == 3
    assert relay.usage["prompt_tokens"] == child.usage["prompt_tokens"] > 0
    assert parent.usage is not None
    assert parent.usage["completion_tokens"] >= 3
    # Counted once: by the child on its own queue, never again by the relay.
    backup_rows = {r.label: r.counts for r in await backup.usage_totals()}
    assert backup_rows[BACKUP]["completion_tokens"] == 3
    assert backup_rows[BACKUP]["attempts"] == 1
    assert BACKUP not in {r.label for r in await openai.usage_totals()}


async def test_long_retry_after_falls_back_on_the_first_attempt(
    start_workers, two_providers, fake_openai: FakeOpenAI, backup_openai: FakeOpenAI
) -> None:
    fake_openai.plan(Reply.error(429, "Rate limit reached", retry_after="120"))
    backup_openai.plan(Reply.stream(["no", " waiting"]))
    workers = await start_workers(**two_providers, fallback_max_wait=5)
    openai = workers.queues["openai"]
    job = await openai.enqueue({"model": PRIMARY, "prompt": "x"}, max_attempts=3)
    result = await openai.wait(job.id, timeout=15)
    assert (result["text"], result["model"]) == ("no waiting", BACKUP)
    parent = await openai.get(job.id)
    assert (parent.attempt, fake_openai.count()) == (1, 1)  # no 120 s wait, no second try
    events = await events_of(openai, job.id)
    assert "rate limited (retry after 120s)" in restarts(events)[0]["reason"]
    assert await openai.cooldown_remaining() > 0  # the primary's 429 still paused its queue


async def test_short_retry_after_retries_the_primary(
    start_workers, two_providers, fake_openai: FakeOpenAI, backup_openai: FakeOpenAI
) -> None:
    fake_openai.plan(Reply.error(429, "Rate limit reached", retry_after="0.2"))
    fake_openai.plan(Reply.stream(["primary", " again"]))
    workers = await start_workers(**two_providers, max_cooldown=0.2)
    openai = workers.queues["openai"]
    job = await openai.enqueue({"model": PRIMARY, "prompt": "x"}, max_attempts=3)
    result = await openai.wait(job.id, timeout=15)
    assert (result["text"], result["model"]) == ("primary again", PRIMARY)
    assert backup_openai.count() == 0
    assert await workers.queues["backup"].find(fallback_key(job.id)) is None


async def test_bad_request_never_falls_back(
    start_workers, two_providers, fake_openai: FakeOpenAI, backup_openai: FakeOpenAI
) -> None:
    fake_openai.plan(Reply.error(400, "Invalid value for 'temperature'"))
    workers = await start_workers(**two_providers)
    openai = workers.queues["openai"]
    job = await openai.enqueue({"model": PRIMARY, "prompt": "x"}, max_attempts=1)
    with pytest.raises(JobFailedError) as info:
        await openai.wait(job.id, timeout=10)
    assert "Invalid value for 'temperature'" in (info.value.error or "")
    assert "restarted" not in [e.type for e in await events_of(openai, job.id)]
    assert backup_openai.count() == 0
    assert await workers.queues["backup"].find(fallback_key(job.id)) is None


async def test_chain_continues_and_a_failed_chain_fails_the_parent(
    start_workers, two_providers, fake_openai: FakeOpenAI, backup_openai: FakeOpenAI
) -> None:
    fake_openai.plan(Reply.error(503, "primary overloaded"))
    backup_openai.plan(Reply.error(500, "backup down too"), model="gpt-4o")
    backup_openai.plan(Reply.error(500, "o3 down as well"), model="o3")
    workers = await start_workers(**two_providers, max_attempts=1)
    openai, backup = workers.queues["openai"], workers.queues["backup"]
    payload = {"model": PRIMARY, "prompt": "x", "fallbacks": [BACKUP, OTHER]}
    job = await openai.enqueue(payload)
    with pytest.raises(JobFailedError) as info:
        await openai.wait(job.id, timeout=15)
    assert "o3 down as well" in (info.value.error or "")  # the last model's error
    child = await backup.get((await backup.jobs(status="failed")).jobs[-1].id)
    grandchild = await backup.get((await backup.jobs(status="failed")).jobs[0].id)
    assert child is not None and grandchild is not None
    assert (child.payload["model"], child.payload["fallbacks"]) == (BACKUP, [OTHER])
    assert (grandchild.payload["model"], grandchild.payload["fallbacks"]) == (OTHER, [])
    models = [r["model"] for r in restarts(await events_of(openai, job.id))]
    assert models == [OTHER]  # the child's own fallback, relayed: a restart in place of BACKUP's
    assert [r.model for r in backup_openai.requests] == ["gpt-4o", "o3"]


async def test_an_empty_request_list_means_no_fallback(
    start_workers, two_providers, fake_openai: FakeOpenAI, backup_openai: FakeOpenAI
) -> None:
    fake_openai.plan(Reply.error(500, "primary is down"))
    workers = await start_workers(**two_providers)
    openai = workers.queues["openai"]
    job = await openai.enqueue({"model": PRIMARY, "prompt": "x", "fallbacks": []}, max_attempts=1)
    with pytest.raises(JobFailedError) as info:
        await openai.wait(job.id, timeout=10)
    assert "primary is down" in (info.value.error or "")
    assert backup_openai.count() == 0


def test_fallbacks_setting_is_json_and_names_allowed_models(monkeypatch) -> None:
    monkeypatch.setenv("GENQ_MODELS", f"{PRIMARY},{BACKUP},demo/*")
    monkeypatch.setenv("GENQ_FALLBACKS", f'{{"{PRIMARY}": ["{BACKUP}", "demo/fast"]}}')
    routing = RoutingSettings().routing()
    assert routing.fallbacks_of(PRIMARY) == (BACKUP, "demo/fast")
    assert routing.fallbacks_of(BACKUP) == ()
    assert routing.fallbacks_of(PRIMARY, [OTHER]) == (OTHER,)  # a request's list wins
    monkeypatch.setenv("GENQ_FALLBACKS", f'{{"{PRIMARY}": ["anthropic/claude"]}}')
    with pytest.raises(ValueError, match="not available"):
        RoutingSettings().routing()
    monkeypatch.setenv("GENQ_FALLBACKS", f'{{"{PRIMARY}": ["{PRIMARY}"]}}')
    with pytest.raises(ValueError, match="differ"):
        RoutingSettings().routing()


async def test_stop_of_the_parent_cancels_its_fallback(
    start_workers, two_providers, fake_openai: FakeOpenAI, backup_openai: FakeOpenAI
) -> None:
    fake_openai.plan(Reply.error(500, "primary is down"))
    backup_openai.plan(Reply.stream([f"w{i} " for i in range(500)], delay=0.02))
    workers = await start_workers(**two_providers)
    openai, backup = workers.queues["openai"], workers.queues["backup"]
    job = await openai.enqueue({"model": PRIMARY, "prompt": "long story"}, max_attempts=1)
    async for event in openai.watch(job.id):
        if event.type == "chunk":  # the child's text reached the parent's watchers
            break
    child = await child_of(backup, job.id)
    assert await openai.cancel(job.id)
    with pytest.raises(JobCancelledError):
        await openai.wait(job.id, timeout=10)
    with pytest.raises(JobCancelledError):
        await backup.wait(child.id, timeout=10)
    assert await asyncio.to_thread(backup_openai.requests[0].wait_disconnected, 5)


async def test_a_new_attempt_relays_the_same_fallback_from_its_start(
    start_workers, two_providers, fake_openai: FakeOpenAI, backup_openai: FakeOpenAI
) -> None:
    fake_openai.plan(Reply.error(429, "Rate limit reached", retry_after="600"))
    backup_openai.plan(Reply.stream([f"w{i} " for i in range(60)], delay=0.02))
    first = await start_workers(**two_providers, fallback_max_wait=1, max_cooldown=0)
    openai, backup = first.queues["openai"], first.queues["backup"]
    job = await openai.enqueue({"model": PRIMARY, "prompt": "x"}, max_attempts=3)
    async for event in openai.watch(job.id):
        if event.type == "chunk":
            break
    await first.workers["openai"].stop(deadline=0)  # the relaying worker goes away mid-relay

    await start_workers(**two_providers, max_cooldown=0, worker_providers=["openai"])
    events = await events_of(openai, job.id)
    text = "".join(f"w{i} " for i in range(60))
    assert visible_text(events) == text == events[-1].data["text"]
    assert restarts(events)[-1]["model"] == BACKUP
    assert (fake_openai.count(), backup_openai.count()) == (1, 1)  # one child, relayed twice
    child = await child_of(backup, job.id)
    assert (child.status.value, child.attempt) == ("completed", 1)


async def test_request_fallbacks_are_checked_by_the_gateway(
    redis_url: str, prefix: str, start_workers, two_providers, fake_openai, backup_openai
) -> None:
    settings = make_settings(
        redis_url,
        f"{prefix}-gen",
        models=two_providers["models"],
        model_providers=two_providers["model_providers"],
    )
    fake_openai.plan(Reply.error(500, "primary is down"))
    backup_openai.plan(Reply.stream(["via", " o3"]), model="o3")
    workers = await start_workers(**two_providers)
    with LiveGateway(settings) as live:
        async with client_for(live, KEY_ALPHA) as alpha:
            body = {"model": PRIMARY, "prompt": "x", "max_attempts": 1}
            cases = [
                ({"fallbacks": ["nope/model"]}, "not available"),
                ({"fallbacks": [PRIMARY]}, "differ"),
                ({"fallbacks": [BACKUP, BACKUP]}, "differ"),
                ({"fallbacks": [BACKUP, OTHER, "demo/fast", "demo/slow"]}, "at most 3"),
                ({"fallbacks": [""]}, "at least 1"),
            ]
            demo = {"model": "demo/fast", "prompt": "x", "params": {"demo_tokens": 3}}
            cases.append(({**demo, "fallbacks": [BACKUP]}, "unsupported params"))
            for extra, detail in cases:
                response = await alpha.post("/v1/generations", json={**body, **extra})
                assert response.status_code == 422, extra
                assert detail in str(response.json()["detail"]), response.json()

            created = await alpha.post("/v1/generations", json={**body, "fallbacks": [OTHER]})
            assert created.status_code == 202, created.text
            job_id = created.json()["id"]
            openai = workers.queues["openai"]
            assert (await openai.get(job_id)).payload["fallbacks"] == [OTHER]  # not BACKUP
            result = await openai.wait(job_id, timeout=15)
            assert (result["text"], result["model"]) == ("via o3", OTHER)
