"""``/v1/webhook_endpoints`` on a gateway with the production rule for URLs (no
GENQ_WEBHOOK_ALLOW_PRIVATE): https to public addresses only, checked at create and update, in
OpenAI's error shape; tenant scoping and the admin view. (The SDK-driven tests, with events,
are tests/openai/test_webhooks.py.)"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from gateway.settings import Settings
from genq_contract.webhooks import WebhookKeys
from genq_services.webhook_endpoints import PendingGeneration
from tests.gateway.conftest import LiveGateway

pytestmark = pytest.mark.asyncio

PUBLIC = "https://93.184.215.14/hooks"
"""An https URL naming a public address (an IP literal: no DNS needed; nothing is sent)."""

REFUSED = [
    ("http://93.184.215.14/hooks", "https://"),
    ("https://127.0.0.1/hooks", "loopback"),
    ("https://localhost:8443/hooks", "loopback"),
    ("https://10.1.2.3/hooks", "private"),
    ("https://192.168.0.10/hooks", "private"),
    ("https://169.254.169.254/latest/meta-data", "link-local"),
    ("https://[::1]/hooks", "loopback"),
    ("https://[::ffff:127.0.0.1]/hooks", "loopback"),
    ("https://[fe80::1]/hooks", "link-local"),
    ("https://0.0.0.0/hooks", "unspecified"),
    ("https://100.64.0.1/hooks", "reserved"),
    ("https://224.0.0.1/hooks", "multicast"),
    ("https://user:pw@93.184.215.14/hooks", "user name"),
    ("https://93.184.215.14/" + "a" * 2048, "2048 characters"),
]


def create_body(url: str) -> dict[str, object]:
    return {"name": "n", "url": url, "event_types": ["response.completed"]}


@pytest.mark.parametrize(("url", "says"), REFUSED)
async def test_private_and_non_https_urls_are_refused_at_create(
    alpha: httpx.AsyncClient, url: str, says: str
) -> None:
    answer = await alpha.post("/v1/webhook_endpoints", json=create_body(url))
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["param"] == "url" and error["type"] == "invalid_request_error"
    assert says in error["message"]
    listed = await alpha.get("/v1/webhook_endpoints")
    assert listed.json()["data"] == [], "a refused endpoint is not stored"


async def test_update_checks_the_url_again_and_keeps_the_endpoint_on_refusal(
    alpha: httpx.AsyncClient,
) -> None:
    made = (await alpha.post("/v1/webhook_endpoints", json=create_body(PUBLIC))).json()
    assert made["signing_secret"].startswith("whsec_")
    refused = await alpha.post(
        f"/v1/webhook_endpoints/{made['id']}", json={"url": "https://127.0.0.1/x"}
    )
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "url"
    kept = (await alpha.get(f"/v1/webhook_endpoints/{made['id']}")).json()
    assert kept["url"] == PUBLIC and "signing_secret" not in kept
    unchanged = await alpha.post(f"/v1/webhook_endpoints/{made['id']}", json={"name": "n"})
    assert unchanged.json()["updated_at"] == made["updated_at"], "no change: no new updated_at"


async def test_another_tenant_gets_openais_404_on_every_route(
    alpha: httpx.AsyncClient, beta: httpx.AsyncClient
) -> None:
    made = (await alpha.post("/v1/webhook_endpoints", json=create_body(PUBLIC))).json()
    base = f"/v1/webhook_endpoints/{made['id']}"
    for method, path, body in [
        ("GET", base, None),
        ("POST", base, {"name": "x"}),
        ("DELETE", base, None),
        ("POST", f"{base}/rotate_secret", {}),
        ("POST", f"{base}/test", {"event_type": "batch.completed"}),
        ("GET", f"{base}/deliveries", None),
    ]:
        answer = await beta.request(method, path, json=body)
        assert answer.status_code == 404, (method, path, answer.text)
        assert answer.json()["error"]["type"] == "invalid_request_error"
    assert (await alpha.get(base)).status_code == 200


async def test_unknown_fields_and_types_are_400_naming_them(alpha: httpx.AsyncClient) -> None:
    answer = await alpha.post(
        "/v1/webhook_endpoints", json={**create_body(PUBLIC), "secret": "mine"}
    )
    assert answer.status_code == 400 and answer.json()["error"]["param"] == "secret"
    answer = await alpha.post(
        "/v1/webhook_endpoints", json={**create_body(PUBLIC), "event_types": []}
    )
    assert answer.status_code == 400 and answer.json()["error"]["param"] == "event_types"


async def test_the_admin_view_lists_every_tenant_and_needs_the_admin_key(
    alpha: httpx.AsyncClient, beta: httpx.AsyncClient, admin: httpx.AsyncClient
) -> None:
    a = (await alpha.post("/v1/webhook_endpoints", json=create_body(PUBLIC))).json()
    b = (await beta.post("/v1/webhook_endpoints", json=create_body(PUBLIC))).json()
    assert (await alpha.get("/v1/webhooks")).status_code == 403
    listed = (await admin.get("/v1/webhooks")).json()["endpoints"]
    assert {(e["id"], e["tenant"]) for e in listed} == {(a["id"], "alpha"), (b["id"], "beta")}
    assert all("signing_secret" not in e for e in listed)
    only = (await admin.get("/v1/webhooks", params={"tenant": "beta"})).json()["endpoints"]
    assert [e["id"] for e in only] == [b["id"]]
    log = await admin.get(f"/v1/webhooks/{a['id']}/deliveries")
    assert log.status_code == 200 and log.json()["data"] == []
    missing = await admin.get("/v1/webhooks/we_nope/deliveries")
    assert missing.status_code == 404 and "detail" in missing.json()


@pytest.mark.parametrize("at_once", [True, False], ids=["one-round-trip", "stepwise"])
async def test_admission_notes_the_ends_owed_an_event_and_only_those(
    live: LiveGateway,
    alpha: httpx.AsyncClient,
    beta: httpx.AsyncClient,
    redis: Any,
    settings: Settings,
    at_once: bool,
) -> None:
    """Both admission paths (one round trip on a single server, stepwise on a Cluster) note a
    native generation and a background response of a tenant with an endpoint, before the
    enqueue; not another tenant's generation (it has no endpoint)."""
    live.gateway.admission.at_once = at_once
    await alpha.post("/v1/webhook_endpoints", json=create_body(PUBLIC))
    body = {"model": "demo/fast", "prompt": "x"}
    native = (await alpha.post("/v1/generations", json=body)).json()["id"]
    response = await alpha.post(
        "/v1/responses", json={"model": "demo/fast", "input": "x", "background": True}
    )
    background = response.json()["id"]
    (await beta.post("/v1/generations", json=body)).raise_for_status()
    members = await redis.zrange(WebhookKeys(settings.queue_namespace).pending, 0, -1)
    noted = sorted(
        (p.kind, p.tenant, p.job_id, p.object_id)
        for p in map(PendingGeneration.from_member, members)
        if p is not None
    )
    assert noted == sorted(
        [
            ("generation", "alpha", native, native),
            ("response", "alpha", background.removeprefix("resp_"), background),
        ]
    )
