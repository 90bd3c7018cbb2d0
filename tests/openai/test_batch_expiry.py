"""A batch past its window (``GENQ_BATCH_WINDOW``, here a few seconds) is ``expired``: its
unfinished lines are cancelled, what finished is in its output file, the rest in its error
file as ``batch_expired``."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator

import pytest

from tests.e2e.browser import Stack, running_stack
from tests.openai.conftest import STACK_ENV, sdk_client

LINES = 30


@pytest.fixture(scope="module")
def stack(redis_url: str, request: pytest.FixtureRequest) -> Iterator[Stack]:
    env = {
        **STACK_ENV,
        "GENQ_BATCH_WINDOW": "4",
        "GENQ_BATCH_POLL": "0.1",
        "GENQ_PROVIDER_CONCURRENCY": json.dumps({"demo": 2}),
    }
    with running_stack(redis_url, f"openai-{request.module.__name__}", **env) as running:
        yield running


def test_batch_past_its_window_expires_with_what_finished(stack: Stack) -> None:
    client = sdk_client(stack)
    # the window runs from the create: first make sure a worker serves (a worker's start,
    # LiteLLM's import, can take longer than the window on a busy machine)
    assert stack.result(stack.submit({"model": "demo/fast", "prompt": "up?"})["id"])
    content = "".join(
        json.dumps(
            {
                "custom_id": f"e{n}",
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": {
                    "model": "demo/slow",
                    "messages": [{"role": "user", "content": "x"}],
                    "demo_tokens": 4,
                },
            }
        )
        + "\n"
        for n in range(LINES)
    ).encode()
    upload = client.files.create(file=("e.jsonl", io.BytesIO(content)), purpose="batch")
    batch = client.batches.create(
        input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    deadline = time.monotonic() + 30
    while (batch := client.batches.retrieve(batch.id)).status not in ("expired", "completed"):
        assert time.monotonic() < deadline, batch
        time.sleep(0.1)
    assert batch.status == "expired"
    assert batch.expired_at is not None and batch.expired_at >= batch.expires_at
    counts = batch.request_counts
    assert counts is not None and counts.total == LINES
    assert 1 <= counts.completed < LINES
    assert batch.output_file_id and batch.error_file_id
    done = client.files.content(batch.output_file_id).text.splitlines()
    assert len(done) == counts.completed
    errors = [
        json.loads(row) for row in client.files.content(batch.error_file_id).text.splitlines()
    ]
    assert len(errors) == LINES - counts.completed
    codes = {row["error"]["code"] for row in errors}
    assert codes <= {"batch_expired", "cancelled"}, codes
    assert "batch_expired" in codes  # lines that never ran
    never_ran = [row for row in errors if row["error"]["code"] == "batch_expired"]
    assert all(row["response"] is None for row in never_ran)
