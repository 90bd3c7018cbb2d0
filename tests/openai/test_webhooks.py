"""Webhooks with the official ``openai`` SDK against live processes (a gateway, a demo worker,
a receiver on 127.0.0.1): ``client.webhooks`` creates and manages endpoints, background
responses and native generations end as events the SDK's ``webhooks.unwrap`` verifies, a
failing receiver is retried with the same ``webhook-id``, another tenant hears nothing, a
deleted endpoint gets nothing, and a worker killed after a settle loses no event."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from openai.types.webhooks import ResponseCompletedWebhookEvent

from genq_contract.api_keys import hash_key
from tests.e2e.browser import DEV_ADMIN_KEY, DEV_KEY, Stack, running_stack, wait_until
from tests.openai.webhook_receiver import Receiver

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

NODE_DIR = Path(__file__).resolve().parents[1] / "node"
OTHER_KEY = "genq-other-tenant-key-41c9"
STACK_ENV: dict[str, Any] = {
    "GENQ_DEMO_FAULTS": "1",
    "GENQ_LEASE": "2",
    "GENQ_BACKOFF": "0.05",
    "GENQ_MAX_BACKOFF": "0.2",
    "GENQ_MODELS": "demo/fast,demo/slow,demo/instant",
    "GENQ_API_KEYS": json.dumps({f"sha256:{hash_key(OTHER_KEY)}": "other"}),
    "GENQ_WEBHOOK_ALLOW_PRIVATE": "1",
    "GENQ_WEBHOOK_RETRY_BASE": "0.2",
}
RESPONSE_EVENTS: Any = [
    "response.completed",
    "response.failed",
    "response.cancelled",
    "response.incomplete",
]


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    with Receiver() as running:
        yield running


@pytest.fixture(scope="module")
def stack(redis_url: str, request: pytest.FixtureRequest) -> Iterator[Stack]:
    with running_stack(redis_url, f"openai-{request.module.__name__}", **STACK_ENV) as running:
        yield running


def sdk(stack: Stack, key: str = DEV_KEY) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{stack.base_url}/v1", api_key=key, max_retries=0, timeout=60)


@pytest.fixture
def client(stack: Stack) -> Iterator[openai.OpenAI]:
    with sdk(stack) as made:
        yield made


@pytest.fixture
def other(stack: Stack) -> Iterator[openai.OpenAI]:
    with sdk(stack, OTHER_KEY) as made:
        yield made


@pytest.fixture(autouse=True)
def no_endpoints_left(stack: Stack) -> Iterator[None]:
    """Every test starts with no endpoint of either tenant (the cap is per tenant)."""
    yield
    for key in (DEV_KEY, OTHER_KEY):
        with sdk(stack, key) as made:
            for endpoint in made.webhooks.list():
                made.webhooks.delete(endpoint.id)


def background(client: openai.OpenAI, text: str = "hi", **kwargs: object) -> str:
    response = client.responses.create(model="demo/instant", input=text, background=True, **kwargs)  # type: ignore[call-overload]
    return str(response.id)


def wait_for(receiver: Receiver, path: str, object_id: str, count: int = 1) -> None:
    wait_until(
        lambda: len(receiver.about(path, object_id)) >= count,
        120,  # a worker just started may take half a minute to import LiteLLM under load
        f"{count} POST(s) about {object_id} did not reach {path}: {receiver.to(path)}",
    )


def deliveries(client: openai.OpenAI, endpoint_id: str) -> list[dict[str, Any]]:
    """genq's delivery log of an endpoint (``GET /v1/webhook_endpoints/{id}/deliveries``)."""
    answer: Any = client.get(f"/webhook_endpoints/{endpoint_id}/deliveries", cast_to=object)
    return list(answer["data"])


def data_id(event: Any) -> str:
    return str(event.data.id)


# -- the endpoint objects ------------------------------------------------------------------------


def test_sdk_creates_lists_updates_rotates_and_deletes_endpoints(
    client: openai.OpenAI, other: openai.OpenAI, receiver: Receiver
) -> None:
    made = client.webhooks.create(
        name="orders", url=receiver.url("/crud"), event_types=["response.completed"]
    )
    assert made.object == "webhook_endpoint" and made.id.startswith("we_")
    assert made.signing_secret.startswith("whsec_")
    assert len(base64.b64decode(made.signing_secret.removeprefix("whsec_"))) == 32
    assert made.signing_secret_hint == "whsec_..." + made.signing_secret[-4:]

    got = client.webhooks.retrieve(made.id)
    assert got.url == receiver.url("/crud") and got.event_types == ["response.completed"]
    raw = client.webhooks.with_raw_response.retrieve(made.id).http_response.json()
    assert "signing_secret" not in raw, "the secret is answered once, at create"

    updated = client.webhooks.update(made.id, name="orders-2", event_types=RESPONSE_EVENTS)
    assert updated.name == "orders-2" and updated.event_types == RESPONSE_EVENTS
    assert updated.url == made.url and (updated.updated_at or 0) >= made.created_at

    more = [
        client.webhooks.create(
            name=f"n{i}", url=receiver.url(f"/n{i}"), event_types=["batch.completed"]
        )
        for i in range(3)
    ]
    first = client.webhooks.list(limit=2)
    assert [e.id for e in first.data] == [more[2].id, more[1].id], "newest first"
    assert first.has_more
    assert [e.id for e in client.webhooks.list(limit=2)] == [e.id for e in [*reversed(more), made]]
    second = client.webhooks.list(limit=2, after=more[1].id)
    assert [e.id for e in second.data] == [more[0].id, made.id] and not second.has_more

    rotated = client.webhooks.rotate_secret(made.id)
    assert rotated.signing_secret.startswith("whsec_")
    assert rotated.signing_secret != made.signing_secret

    # another tenant sees none of it
    with pytest.raises(openai.NotFoundError) as missing:
        other.webhooks.retrieve(made.id)
    assert missing.value.body["code"] is None or isinstance(missing.value.body, dict)  # type: ignore[index]
    assert "webhook endpoint" in str(missing.value)
    with pytest.raises(openai.NotFoundError):
        other.webhooks.update(made.id, name="mine")
    with pytest.raises(openai.NotFoundError):
        other.webhooks.delete(made.id)
    assert list(other.webhooks.list()) == []

    deleted = client.webhooks.delete(made.id)
    assert deleted.deleted and deleted.id == made.id
    assert deleted.object == "webhook_endpoint.deleted"
    with pytest.raises(openai.NotFoundError):
        client.webhooks.retrieve(made.id)
    assert client.webhooks.event_types.list().data[:4] == RESPONSE_EVENTS


def test_bad_input_is_openais_400(client: openai.OpenAI, receiver: Receiver) -> None:
    with pytest.raises(openai.BadRequestError) as bad:
        client.webhooks.create(name="x", url=receiver.url("/x"), event_types=["eval.run.failed"])
    assert bad.value.body["param"] == "event_types.0"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as bad:
        client.webhooks.create(name="x", url="ftp://example.com/x", event_types=["batch.failed"])
    assert bad.value.body["param"] == "url" and "http" in bad.value.body["message"]  # type: ignore[index]
    with pytest.raises(openai.BadRequestError):
        client.webhooks.create(
            name="x", url="https://e.com/" + "a" * 2100, event_types=["batch.failed"]
        )
    for i in range(20):
        client.webhooks.create(
            name=f"cap{i}", url=receiver.url("/cap"), event_types=["batch.failed"]
        )
    with pytest.raises(openai.BadRequestError) as bad:
        client.webhooks.create(
            name="one too many", url=receiver.url("/cap"), event_types=["batch.failed"]
        )
    assert "at most 20" in bad.value.body["message"]  # type: ignore[index]
    assert len(list(client.webhooks.list())) == 20


# -- events ----------------------------------------------------------------------------------------


def test_background_response_completed_is_retried_and_verified_by_unwrap(
    client: openai.OpenAI, other: openai.OpenAI, stack: Stack, receiver: Receiver
) -> None:
    receiver.fail["/mine"] = 1
    mine = client.webhooks.create(
        name="mine", url=receiver.url("/mine"), event_types=RESPONSE_EVENTS
    )
    theirs = other.webhooks.create(
        name="theirs", url=receiver.url("/theirs"), event_types=RESPONSE_EVENTS
    )

    response_id = background(client)
    wait_for(receiver, "/mine", response_id, count=2)
    failed, delivered = receiver.about("/mine", response_id)
    assert (failed.status, delivered.status) == (500, 200)
    assert failed.webhook_id == delivered.webhook_id, "a retry keeps its webhook-id"
    assert failed.body == delivered.body

    event = client.webhooks.unwrap(delivered.body, delivered.headers, secret=mine.signing_secret)
    assert isinstance(event, ResponseCompletedWebhookEvent)
    assert event.data.id == response_id and event.object == "event"
    assert event.id.startswith("evt_")
    assert client.responses.retrieve(response_id).status == "completed"
    with pytest.raises(openai.InvalidWebhookSignatureError):
        client.webhooks.unwrap(delivered.body, delivered.headers, secret=theirs.signing_secret)

    # the other tenant's endpoint hears its own tenant's event, and nothing of ours
    their_response = background(other)
    wait_for(receiver, "/theirs", their_response)
    assert receiver.about("/theirs", response_id) == []
    assert receiver.about("/mine", their_response) == []
    assert [p.event["data"]["id"] for p in receiver.to("/theirs")] == [their_response]

    entries = deliveries(client, mine.id)
    assert [(e["attempt"], e["outcome"], e["status"]) for e in reversed(entries)] == [
        (1, "retrying", 500),
        (2, "delivered", 200),
    ]
    assert {e["webhook_id"] for e in entries} == {delivered.webhook_id}
    with pytest.raises(openai.NotFoundError):
        deliveries(other, mine.id)


def test_native_generations_and_every_response_outcome_become_events(
    client: openai.OpenAI, stack: Stack, receiver: Receiver
) -> None:
    endpoint = client.webhooks.create(
        name="all", url=receiver.url("/all"), event_types=RESPONSE_EVENTS
    )
    native = stack.submit(
        {"model": "demo/instant", "messages": [{"role": "user", "content": "x"}]}
    )["id"]
    failed = background(client, "[demo:400]")
    short = background(client, "long please", max_output_tokens=16)
    slow = client.responses.create(model="demo/slow", input="slowly", background=True).id
    client.responses.cancel(slow)
    expected = {
        native: "response.completed",
        failed: "response.failed",
        short: "response.incomplete",
        slow: "response.cancelled",
    }
    for object_id in expected:
        wait_for(receiver, "/all", object_id)
    for object_id, kind in expected.items():
        (post,) = receiver.about("/all", object_id)
        event = client.webhooks.unwrap(post.body, post.headers, secret=endpoint.signing_secret)
        assert (event.type, data_id(event)) == (kind, object_id)


def test_only_subscribed_types_and_nothing_after_delete(
    client: openai.OpenAI, receiver: Receiver
) -> None:
    gone = client.webhooks.create(
        name="gone", url=receiver.url("/gone"), event_types=RESPONSE_EVENTS
    )
    failures = client.webhooks.create(
        name="f", url=receiver.url("/failures"), event_types=["response.failed"]
    )
    client.webhooks.create(name="stays", url=receiver.url("/stays"), event_types=RESPONSE_EVENTS)
    before = background(client)
    wait_for(receiver, "/gone", before)
    client.webhooks.delete(gone.id)
    after = background(client)
    wait_for(receiver, "/stays", after)  # delivered to the endpoint that stays: the barrier
    assert receiver.about("/gone", after) == []
    assert [p.event["data"]["id"] for p in receiver.to("/gone")] == [before]
    assert receiver.to("/failures") == [], "a completed response is not a subscribed type"
    assert failures.event_types == ["response.failed"]


def test_rotation_keeping_the_old_secret_signs_with_both(
    client: openai.OpenAI, receiver: Receiver
) -> None:
    made = client.webhooks.create(name="rot", url=receiver.url("/rot"), event_types=RESPONSE_EVENTS)
    kept = client.webhooks.rotate_secret(made.id, keep_old_secret_active_for_24_hours=True)
    first = background(client)
    wait_for(receiver, "/rot", first)
    (post,) = receiver.about("/rot", first)
    assert len(post.headers["webhook-signature"].split()) == 2
    for secret in (made.signing_secret, kept.signing_secret):
        assert data_id(client.webhooks.unwrap(post.body, post.headers, secret=secret)) == first

    fresh = client.webhooks.rotate_secret(made.id)  # the old one stops at once
    second = background(client)
    wait_for(receiver, "/rot", second)
    (post,) = receiver.about("/rot", second)
    assert len(post.headers["webhook-signature"].split()) == 1
    client.webhooks.verify_signature(post.body, post.headers, secret=fresh.signing_secret)
    with pytest.raises(openai.InvalidWebhookSignatureError):
        client.webhooks.verify_signature(post.body, post.headers, secret=kept.signing_secret)


def test_test_sends_a_signed_sample_now(client: openai.OpenAI, receiver: Receiver) -> None:
    receiver.fail["/probe"] = 1
    made = client.webhooks.create(
        name="probe", url=receiver.url("/probe"), event_types=["batch.completed"]
    )
    failed = client.webhooks.test(made.id, event_type="batch.completed")
    assert (failed.status_code, failed.success, failed.object) == (
        500,
        True,
        "webhook_endpoint.test",
    )
    answered = client.webhooks.test(made.id, event_type="batch.completed")
    assert answered.status_code == 200 and answered.webhook_endpoint_id == made.id
    post = receiver.to("/probe")[-1]
    event = client.webhooks.unwrap(post.body, post.headers, secret=made.signing_secret)
    assert event.type == "batch.completed" and data_id(event) == "batch_test"
    log = deliveries(client, made.id)
    assert [(e["outcome"], e["status"]) for e in log] == [("delivered", 200), ("given_up", 500)]


def test_a_worker_killed_after_the_settle_loses_no_event(
    client: openai.OpenAI, stack: Stack, receiver: Receiver
) -> None:
    """The worker that settles the generation never sweeps (its sweep interval is an hour)
    and is killed at once: the event still comes, from the next worker's sweep."""
    made = client.webhooks.create(
        name="k", url=receiver.url("/killed"), event_types=RESPONSE_EVENTS
    )
    for worker in stack.workers:
        worker.stop()
    settler = stack.start_worker(GENQ_WEBHOOK_SWEEP_EVERY="60")
    try:
        # its one sweep so far ran at its start, before the response exists
        wait_until(lambda: "serving provider" in settler.log_tail(), 60, settler.log_tail())
        response_id = background(client)
        wait_until(
            lambda: client.responses.retrieve(response_id).status == "completed",
            60,
            f"the response did not complete:\n{stack.logs()}",
        )
        settler.kill()
        assert receiver.about("/killed", response_id) == []
    finally:
        stack.start_worker()
    wait_for(receiver, "/killed", response_id)
    (post,) = receiver.about("/killed", response_id)
    assert client.webhooks.unwrap(post.body, post.headers, secret=made.signing_secret).type == (
        "response.completed"
    )


def test_npm_openai_unwrap_verifies_a_delivery(client: openai.OpenAI, receiver: Receiver) -> None:
    made = client.webhooks.create(
        name="node", url=receiver.url("/node"), event_types=RESPONSE_EVENTS
    )
    response_id = background(client, "from python, checked by node")
    wait_for(receiver, "/node", response_id)
    (post,) = receiver.about("/node", response_id)
    wrong = client.webhooks.rotate_secret(made.id).signing_secret  # no longer signs it
    out = run_node_with_input(
        "webhook_unwrap.mjs",
        {
            "body": post.body.decode(),
            "headers": post.headers,
            "secret": made.signing_secret,
            "wrong_secret": wrong,
        },
    )
    assert out["event"]["type"] == "response.completed"
    assert out["event"]["data"]["id"] == response_id
    assert out["event"]["id"] == post.event["id"]
    assert out["wrong_rejected"] and out["wrong_error"] == "InvalidWebhookSignatureError"


def run_node_with_input(script: str, payload: dict[str, Any]) -> dict[str, Any]:
    node = shutil.which("node")
    assert node, "node is not installed (Node 20+ is needed for the npm SDK tests)"
    assert (NODE_DIR / "node_modules" / "openai").is_dir(), (
        "the npm SDK is not installed: run `npm ci --prefix tests/node` (make test does)"
    )
    done = subprocess.run(
        [node, str(NODE_DIR / script)],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"{script} failed:\n{done.stdout}\n{done.stderr}"
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def genq(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    """The ``genq`` command as a process, with the dev admin key."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GENQ_")}
    env.update(GENQ_URL=stack.base_url, GENQ_API_KEY=DEV_ADMIN_KEY)
    return subprocess.run(
        [sys.executable, "-m", "genq_cli", "webhooks", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_cli_lists_endpoints_shows_deliveries_and_sends_a_test(
    client: openai.OpenAI, other: openai.OpenAI, stack: Stack, receiver: Receiver
) -> None:
    receiver.fail["/cli"] = 1
    made = client.webhooks.create(name="cli", url=receiver.url("/cli"), event_types=RESPONSE_EVENTS)
    theirs = other.webhooks.create(name="o", url=receiver.url("/o"), event_types=["batch.failed"])
    response_id = background(client)
    wait_for(receiver, "/cli", response_id, count=2)

    listed = genq(stack, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {e["id"]: e for e in json.loads(listed.stdout)}
    assert rows[made.id]["tenant"] == "dev" and rows[theirs.id]["tenant"] == "other"
    only = json.loads(genq(stack, "list", "--tenant", "other", "--json").stdout)
    assert [e["id"] for e in only] == [theirs.id]

    shown = genq(stack, "deliveries", made.id, "--json")
    assert shown.returncode == 0, shown.stderr
    log = json.loads(shown.stdout)
    assert [(e["attempt"], e["outcome"], e["status"]) for e in log] == [
        (2, "delivered", 200),
        (1, "retrying", 500),
    ]
    table = genq(stack, "deliveries", made.id)
    assert table.returncode == 0 and "delivered" in table.stdout and "retrying" in table.stdout

    sent = genq(stack, "test", made.id, "--event-type", "batch.expired")
    assert sent.returncode == 0, sent.stderr
    assert "HTTP 200" in sent.stdout
    post = receiver.to("/cli")[-1]
    event = client.webhooks.unwrap(post.body, post.headers, secret=made.signing_secret)
    assert event.type == "batch.expired"
    assert len(json.loads(genq(stack, "deliveries", made.id, "--json").stdout)) == 3

    missing = genq(stack, "deliveries", "we_nope")
    assert missing.returncode == 4 and "not found" in missing.stderr


def test_a_batch_ending_is_a_batch_completed_event(
    client: openai.OpenAI, other: openai.OpenAI, receiver: Receiver
) -> None:
    made = client.webhooks.create(
        name="batches", url=receiver.url("/batches"), event_types=["batch.completed"]
    )
    other.webhooks.create(
        name="o", url=receiver.url("/other-batches"), event_types=["batch.completed"]
    )
    lines = [
        {
            "custom_id": f"line-{i}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {"model": "demo/instant", "messages": [{"role": "user", "content": f"{i}"}]},
        }
        for i in range(3)
    ]
    data = "\n".join(json.dumps(line) for line in lines).encode()
    uploaded = client.files.create(file=("lines.jsonl", data), purpose="batch")
    batch = client.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    wait_for(receiver, "/batches", batch.id)
    (post,) = receiver.about("/batches", batch.id)
    event = client.webhooks.unwrap(post.body, post.headers, secret=made.signing_secret)
    assert (event.type, data_id(event)) == ("batch.completed", batch.id)
    assert client.batches.retrieve(batch.id).status == "completed"
    assert receiver.about("/other-batches", batch.id) == []
