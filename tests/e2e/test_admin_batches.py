"""The /admin Batches panel in Chromium, against real processes: a running batch shows with
its tenant and progress, its Cancel button cancels it on the server, and the panel follows
it to ``cancelled``."""

from __future__ import annotations

import io
import json

import openai
import pytest
from playwright.sync_api import Page, expect

from tests.e2e.browser import DEV_KEY, running_stack, wait_until
from tests.e2e.test_admin_page import cell, open_admin

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(120)]

LINES = 30


def test_admin_batches_panel_shows_progress_and_cancels_a_running_batch(
    redis_url: str, page: Page, request: pytest.FixtureRequest
) -> None:
    with running_stack(
        redis_url, request.node.name, GENQ_MODELS="demo/slow,demo/fast", GENQ_BATCH_POLL="0.1"
    ) as stack:
        client = openai.OpenAI(base_url=f"{stack.base_url}/v1", api_key=DEV_KEY, max_retries=0)
        content = "".join(
            json.dumps(
                {
                    "custom_id": f"line-{n}",
                    "method": "POST",
                    "url": "/v1/chat/completions",
                    "body": {"model": "demo/slow", "messages": [{"role": "user", "content": "x"}]},
                }
            )
            + "\n"
            for n in range(LINES)
        ).encode()
        upload = client.files.create(file=("b.jsonl", io.BytesIO(content)), purpose="batch")
        batch = client.batches.create(
            input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h"
        )

        open_admin(page, stack)
        row = page.locator(f'#batches tbody tr[data-batch="{batch.id}"]')
        expect(row).to_have_attribute("data-status", "in_progress")
        expect(cell(row, "Tenant")).to_have_text("dev")
        expect(cell(row, "Endpoint")).to_have_text("/v1/chat/completions")
        expect(cell(row, "Progress")).to_contain_text(f"/ {LINES}")

        with page.expect_response(f"**/v1/admin/batches/{batch.id}/cancel") as answer:
            row.locator("button[data-cancel]").click()
        assert answer.value.status == 200

        # what the click did, on the server: the batch ends cancelled, its lines stopped
        wait_until(
            lambda: client.batches.retrieve(batch.id).status == "cancelled",
            30,
            f"the batch was not cancelled:\n{stack.logs()}",
        )
        ended = client.batches.retrieve(batch.id)
        assert ended.request_counts is not None
        assert ended.request_counts.completed < LINES
        with page.expect_response("**/v1/admin/batches?limit=50"):
            page.locator("#batches-refresh").click()
        expect(row).to_have_attribute("data-status", "cancelled", timeout=15_000)
        expect(row.locator("button[data-cancel]")).to_have_count(0)
