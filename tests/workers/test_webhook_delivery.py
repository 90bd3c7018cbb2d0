"""The webhook events' durable path, in process on a real Redis: the pending sweep turns a
generation's end into one event (and forgets generations that never came), publishing is
free for a tenant with no endpoint and idempotent per event, and a delivery checks the URL's
addresses again (a name that now resolves to a private address gets nothing) and connects to
the address it checked, not to a later answer of the resolver (DNS rebinding)."""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trustme

from genq import ActiveJob, Queue
from genq_contract.webhooks import WebhookKeys, deliveries_prefix
from genq_services import webhook_endpoints as store
from genq_services.webhook_endpoints import PendingGeneration, note_pending
from genq_services.webhook_events import RESPONSE_COMPLETED, events_stream, publish
from tests.openai.webhook_receiver import Receiver
from workers.settings import WorkerSettings
from workers.webhook_delivery import PendingSweeper, WebhookDeliveries

TENANT = "acme"


async def until(check: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


@pytest.fixture
def ns(prefix: str) -> str:
    return f"{prefix}-gen"


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    with Receiver() as running:
        yield running


async def deliveries(redis: Any, ns: str, allow_private: bool) -> WebhookDeliveries:
    queue = Queue(redis, deliveries_prefix(ns), backoff=0.01, max_backoff=0.05, max_attempts=3)
    made = WebhookDeliveries(
        redis, ns, queue, allow_private=allow_private, retry_base=0.01, sweep_every=0.05, block=0.1
    )
    await made.start()
    return made


async def test_publish_costs_nothing_for_a_tenant_without_endpoints(redis: Any, ns: str) -> None:
    await publish(redis, tenant=TENANT, type=RESPONSE_COMPLETED, object_id="resp_x", namespace=ns)
    assert await redis.xlen(events_stream(redis, ns)) == 0
    with pytest.raises(ValueError, match="unknown webhook event type"):
        await publish(redis, tenant=TENANT, type="response.done", object_id="x", namespace=ns)


async def test_the_sweep_publishes_each_end_once_and_drops_what_never_came(
    redis: Any, ns: str
) -> None:
    await store.create(redis, ns, TENANT, "n", "https://93.184.215.14/", [RESPONSE_COMPLETED])
    queue = Queue(redis, f"{ns}:demo")
    job = await queue.enqueue({"prompt": "x"}, tenant=TENANT)
    ended = PendingGeneration("response", TENANT, queue.prefix, job.id, "resp_" + job.id)
    assert await note_pending(redis, ns, ended)
    never = PendingGeneration("generation", TENANT, queue.prefix, "demo.never", "demo.never")
    await note_pending(redis, ns, never)
    late = PendingGeneration("generation", TENANT, queue.prefix, "demo.late", "demo.late")
    await note_pending(redis, ns, late)
    await redis.zadd(WebhookKeys(ns).pending, {never.member(): time.time() * 1000 - 120_000})

    sweeper = PendingSweeper(redis, ns, every=1, grace=60)
    assert await sweeper.sweep() == 0, "nothing ended yet"
    assert await redis.zcard(WebhookKeys(ns).pending) == 2, "the old unknown one is dropped"

    async def complete(active: ActiveJob) -> dict[str, Any]:
        return {"text": "done", "finish_reason": "stop"}

    async with queue.worker(complete, concurrency=1):
        await until(lambda: _status(queue, job.id, "completed"))
    assert await sweeper.sweep() == 1
    assert await sweeper.sweep() == 0, "published once, then forgotten"
    left = await redis.zrange(WebhookKeys(ns).pending, 0, -1)
    assert [PendingGeneration.from_member(m) for m in left] == [late], "still within its grace"
    (entry,) = await redis.xrange(events_stream(redis, ns))
    assert b"resp_" + job.id.encode() in entry[1][b"notice"]


async def _status(queue: Queue, job_id: str, status: str) -> bool:
    job = await queue.get(job_id)
    return job is not None and job.status.value == status


async def test_an_event_published_twice_is_delivered_once(
    redis: Any, ns: str, receiver: Receiver
) -> None:
    await store.create(redis, ns, TENANT, "n", receiver.url("/once"), [RESPONSE_COMPLETED])
    running = await deliveries(redis, ns, allow_private=True)
    try:
        for object_id in ("resp_a", "resp_a", "resp_b"):
            await publish(
                redis, tenant=TENANT, type=RESPONSE_COMPLETED, object_id=object_id, namespace=ns
            )
        await until(lambda: _arrived(receiver, "/once", "resp_b"))
        await until(lambda: _arrived(receiver, "/once", "resp_a"))
    finally:
        await running.stop()
    assert sorted(p.event["data"]["id"] for p in receiver.to("/once")) == ["resp_a", "resp_b"]


async def _arrived(receiver: Receiver, path: str, object_id: str) -> bool:
    return bool(receiver.about(path, object_id))


async def first_attempts(
    redis: Any, ns: str, url: str, object_id: str, allow_private: bool
) -> list[store.DeliveryAttempt]:
    """The attempts logged once an endpoint at ``url`` was sent an event about ``object_id``
    (deliveries running until one attempt is logged)."""
    made = await store.create(redis, ns, TENANT, "n", url, [RESPONSE_COMPLETED])
    running = await deliveries(redis, ns, allow_private=allow_private)
    try:
        await publish(
            redis, tenant=TENANT, type=RESPONSE_COMPLETED, object_id=object_id, namespace=ns
        )

        async def logged() -> bool:
            return bool(await store.recent_attempts(redis, ns, made.id, 5))

        await until(logged)
    finally:
        await running.stop()
    return await store.recent_attempts(redis, ns, made.id, 5)


async def test_a_delivery_checks_the_addresses_again(
    redis: Any, ns: str, receiver: Receiver
) -> None:
    """The endpoint was stored when its name was public; it now resolves to 127.0.0.1."""
    url = f"https://localhost:{receiver.server.server_port}/inside"
    (attempt,) = await first_attempts(redis, ns, url, "resp_c", allow_private=False)
    assert attempt.outcome == "given_up" and "loopback" in (attempt.error or "")
    assert receiver.to("/inside") == []


REBOUND = "hooks.rebound.test"


@pytest.fixture
def authority(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> trustme.CA:
    """A certificate authority the deliveries' client trusts (made after this fixture)."""
    made = trustme.CA()
    bundle = tmp_path / "ca.pem"
    made.cert_pem.write_to_path(str(bundle))
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    return made


async def test_a_delivery_connects_to_the_address_it_checked_in_the_names_tls(
    redis: Any, ns: str, authority: trustme.CA, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DNS rebinding: the name answers 127.0.0.2 (where nothing listens) and 127.0.0.1 to the
    first lookup, and only 127.0.0.2 to the next, as a resolver with a zero TTL can. The
    delivery looks it up once (its check) and connects to those addresses in turn, over TLS in
    the name: SNI, certificate, Host."""
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert(REBOUND).configure_cert(tls)
    lookups: list[str] = []
    loop = asyncio.get_running_loop()
    by_system = loop.getaddrinfo

    async def rebinding(host: str | bytes, port: int, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host  # anyio passes bytes
        if name != REBOUND:
            return await by_system(host, port, *args, **kwargs)
        lookups.append(name)
        addresses = ["127.0.0.2", "127.0.0.1"] if len(lookups) == 1 else ["127.0.0.2"]
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in addresses]

    monkeypatch.setattr(loop, "getaddrinfo", rebinding)
    with Receiver(tls=tls) as receiver:
        port = receiver.server.server_port
        url = f"https://{REBOUND}:{port}/pinned"
        # private addresses allowed: 127.0.0.1 is the receiver's
        attempts = await first_attempts(redis, ns, url, "resp_p", allow_private=True)
        assert [a.outcome for a in attempts] == ["delivered"], attempts
        (post,) = receiver.to("/pinned")
        assert post.headers["host"] == f"{REBOUND}:{port}"
        assert post.event["data"]["id"] == "resp_p"
        assert receiver.server_names == [REBOUND]
        assert lookups == [REBOUND]


def test_the_default_retries_span_about_a_day() -> None:
    """GENQ_WEBHOOK_MAX_ATTEMPTS and GENQ_WEBHOOK_RETRY_BASE's defaults: the waits between the
    attempts double from 5 s up to 6 h and add up to about a day."""
    settings = WorkerSettings(_env_file=None)
    delay = WebhookDeliveries._delay_after
    waits = [
        delay(settings.webhook_retry_base, attempt)
        for attempt in range(1, settings.webhook_max_attempts)
    ]
    assert waits[:3] == [5.0, 10.0, 20.0] and max(waits) == 6 * 3600
    assert 20 * 3600 < sum(waits) < 26 * 3600
