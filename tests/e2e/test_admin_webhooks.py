"""The /admin Webhook endpoints panel in Chromium, against real processes: it lists every
tenant's endpoints, shows an endpoint's delivery log (a receiver that failed once: retried with
the same webhook-id), and its "Send test" button sends a signed event the SDK verifies and the
server logs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from playwright.sync_api import Page, expect

from genq_contract.api_keys import hash_key
from tests.e2e.browser import DEV_KEY, SCREENSHOTS, Stack, running_stack, wait_until
from tests.e2e.test_admin_page import cell
from tests.openai.webhook_receiver import Receiver

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(120)]

OTHER_KEY = "genq-admin-webhooks-other-key"


@pytest.fixture
def stack(redis_url: str, request: pytest.FixtureRequest) -> Iterator[Stack]:
    with running_stack(
        redis_url,
        request.node.name,
        GENQ_MODELS="demo/instant",
        GENQ_API_KEYS=json.dumps({f"sha256:{hash_key(OTHER_KEY)}": "other"}),
        GENQ_WEBHOOK_ALLOW_PRIVATE="1",
        GENQ_WEBHOOK_RETRY_BASE="0.2",
    ) as running:
        yield running


def test_admin_webhooks_panel_shows_deliveries_and_sends_a_test(stack: Stack, page: Page) -> None:
    with (
        Receiver(fail={"/mine": 1}) as receiver,
        openai.OpenAI(base_url=f"{stack.base_url}/v1", api_key=DEV_KEY, max_retries=0) as client,
        openai.OpenAI(base_url=f"{stack.base_url}/v1", api_key=OTHER_KEY, max_retries=0) as other,
    ):
        mine = client.webhooks.create(
            name="mine", url=receiver.url("/mine"), event_types=["response.completed"]
        )
        theirs = other.webhooks.create(
            name="theirs", url=receiver.url("/theirs"), event_types=["batch.completed"]
        )
        response = client.responses.create(model="demo/instant", input="hi", background=True)
        wait_until(
            lambda: len(receiver.to("/mine")) == 2,
            60,
            f"the event was not delivered twice:\n{stack.logs()}",
        )

        page.goto(f"{stack.base_url}/admin")
        rows = page.locator("#webhooks tbody tr[data-endpoint]")
        expect(rows).to_have_count(2)
        their_row = rows.filter(has_text=theirs.id)
        expect(cell(their_row, "Tenant")).to_have_text("other")
        my_row = page.locator(f'#webhooks tbody tr[data-endpoint="{mine.id}"]')
        expect(cell(my_row, "Tenant")).to_have_text("dev")
        expect(cell(my_row, "URL")).to_have_text(receiver.url("/mine"))

        with page.expect_request(f"**/v1/webhooks/{mine.id}/deliveries?limit=50"):
            my_row.get_by_role("button", name="Deliveries").click()
        log = page.locator("#webhook-deliveries tbody tr[data-webhook-id]")
        expect(log).to_have_count(2)
        webhook_id = receiver.to("/mine")[0].webhook_id
        expect(
            page.locator(f'#webhook-deliveries tbody tr[data-webhook-id="{webhook_id}"]')
        ).to_have_count(2)
        expect(cell(log.nth(0), "Outcome")).to_have_text("delivered")
        expect(cell(log.nth(1), "Outcome")).to_have_text("retrying")
        expect(cell(log.nth(1), "Result")).to_have_text("500")
        expect(cell(log.nth(0), "Type")).to_have_text("response.completed")

        with page.expect_response(f"**/v1/webhooks/{mine.id}/test") as sent:
            my_row.get_by_role("button", name="Send test").click()
        assert sent.value.json()["status_code"] == 200
        expect(page.locator("#webhooks-status")).to_contain_text(
            f"Test event sent to {mine.id}: HTTP 200"
        )
        expect(log).to_have_count(3)
        expect(cell(log.first, "Outcome")).to_have_text("delivered")

        # the server's state: the receiver got a test event the SDK verifies, and it is logged
        test_post = receiver.to("/mine")[-1]
        event = client.webhooks.unwrap(
            test_post.body, test_post.headers, secret=mine.signing_secret
        )
        assert (
            event.type == "response.completed" and event.model_dump()["data"]["id"] == "resp_test"
        )
        answer: Any = client.get(f"/webhook_endpoints/{mine.id}/deliveries", cast_to=object)
        logged = answer["data"]
        assert logged[0]["webhook_id"] == test_post.webhook_id
        assert [e["event_id"] for e in logged[1:]] == [receiver.to("/mine")[0].event["id"]] * 2
        assert receiver.to("/mine")[1].event["data"]["id"] == response.id
        expect(cell(log.first, "webhook-id")).to_have_text(test_post.webhook_id)
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.locator("#webhooks-section").screenshot(
            path=str(SCREENSHOTS / "admin-webhooks-panel.png")
        )

        # Refresh reads the server again: an endpoint deleted meanwhile is gone from the table.
        other.webhooks.delete(theirs.id)
        with page.expect_response("**/v1/webhooks"):
            page.locator("#webhooks-refresh").click()
        expect(rows).to_have_count(1)
        expect(rows.filter(has_text=theirs.id)).to_have_count(0)
