"""Files and batches through the official ``openai`` SDK against a live gateway and worker:
the whole life of a batch (upload, create, poll, output and error files by ``custom_id``),
tenant isolation, cancel, malformed files, and interactive chat during a batch."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from genq_contract.api_keys import hash_key
from tests.e2e.browser import DEV_ADMIN_KEY, DEV_KEY, Stack, running_stack
from tests.openai.conftest import STACK_ENV, sdk_client
from tests.openai.webhook_receiver import Receiver

OTHER_KEY = "other-tenant-key"
QUOTA_KEY = "quota-tenant-key"
QUOTA = 3


@pytest.fixture(scope="module")
def stack(redis_url: str, request: pytest.FixtureRequest) -> Iterator[Stack]:
    env = {
        **STACK_ENV,
        "GENQ_API_KEYS": json.dumps(
            {f"sha256:{hash_key(OTHER_KEY)}": "other", f"sha256:{hash_key(QUOTA_KEY)}": "quota"}
        ),
        "GENQ_TENANT_LIMITS": json.dumps({"quota": {"daily_quota": QUOTA}}),
        "GENQ_PROVIDER_CONCURRENCY": json.dumps({"demo": 4}),
        "GENQ_BATCH_POLL": "0.1",
        "GENQ_WEBHOOK_ALLOW_PRIVATE": "1",
    }
    with running_stack(redis_url, f"openai-{request.module.__name__}", **env) as running:
        yield running


def jsonl(lines: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def chat_line(custom_id: str, model: str = "demo/instant", text: str = "hi") -> dict[str, Any]:
    return {
        "custom_id": custom_id,
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {
            "model": model,
            "messages": [{"role": "user", "content": text}],
            "demo_tokens": 4,
        },
    }


def upload(client: openai.OpenAI, content: bytes) -> str:
    return client.files.create(file=("batch.jsonl", io.BytesIO(content)), purpose="batch").id


def poll(client: openai.OpenAI, batch_id: str, until: set[str], timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        batch = client.batches.retrieve(batch_id)
        if batch.status in until:
            return batch
        assert time.monotonic() < deadline, f"batch still {batch.status}: {batch}"
        time.sleep(0.1)


def file_lines(client: openai.OpenAI, file_id: str) -> dict[str, dict[str, Any]]:
    content = client.files.content(file_id).content
    rows = [json.loads(row) for row in content.splitlines() if row.strip()]
    return {row["custom_id"]: row for row in rows}


def test_batch_runs_every_line_and_sorts_answers_into_output_and_error_files(
    client: openai.OpenAI, stack: Stack
) -> None:
    lines = [chat_line(f"req-{n}", text=f"line {n}") for n in range(20)]
    lines.append(chat_line("bad-model", model="demo/nope"))
    file_id = upload(client, jsonl(lines))
    created = client.batches.create(
        input_file_id=file_id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        metadata={"purpose": "test"},
    )
    assert created.status == "validating"
    assert created.metadata == {"purpose": "test"}

    batch = poll(client, created.id, {"completed", "failed"})
    assert batch.status == "completed", batch
    counts = batch.request_counts
    assert counts is not None
    assert (counts.total, counts.completed, counts.failed) == (21, 20, 1)
    assert batch.in_progress_at and batch.finalizing_at and batch.completed_at
    assert batch.output_file_id and batch.error_file_id

    output = file_lines(client, batch.output_file_id)
    assert sorted(output) == sorted(f"req-{n}" for n in range(20))
    for n in range(20):
        row = output[f"req-{n}"]
        assert row["error"] is None
        assert row["response"]["status_code"] == 200
        body = row["response"]["body"]
        assert body["object"] == "chat.completion"
        assert body["choices"][0]["message"]["content"].startswith(f"Echo: line {n}")
        # the body is what the chat route answers for the same generation
        assert body["id"] == f"chatcmpl-{row['response']['request_id']}"
        native = stack.result(row["response"]["request_id"])
        assert native["status"] == "completed"
        assert body["choices"][0]["message"]["content"] == native["text"]

    errors = file_lines(client, batch.error_file_id)
    assert list(errors) == ["bad-model"]
    refused = errors["bad-model"]
    assert refused["response"]["status_code"] == 404
    assert refused["response"]["body"]["error"]["code"] == "model_not_found"
    assert refused["error"]["code"] == "model_not_found"

    listed = [b.id for b in client.batches.list(limit=100)]
    assert created.id in listed
    assert file_id in [f.id for f in client.files.list()]
    assert client.files.retrieve(batch.output_file_id).purpose == "batch_output"

    with sdk_client(stack, OTHER_KEY) as other:
        with pytest.raises(openai.NotFoundError):
            other.batches.retrieve(created.id)
        with pytest.raises(openai.NotFoundError):
            other.batches.cancel(created.id)
        for fid in (file_id, batch.output_file_id, batch.error_file_id):
            with pytest.raises(openai.NotFoundError):
                other.files.retrieve(fid)
            with pytest.raises(openai.NotFoundError):
                other.files.content(fid)
        assert created.id not in [b.id for b in other.batches.list()]
        assert file_id not in [f.id for f in other.files.list()]


def test_batch_lines_count_against_the_daily_quota(stack: Stack) -> None:
    with sdk_client(stack, QUOTA_KEY) as client:
        lines = [chat_line(f"q-{n}") for n in range(QUOTA + 2)]
        batch = client.batches.create(
            input_file_id=upload(client, jsonl(lines)),
            endpoint="/v1/chat/completions",
            completion_window="24h",
        )
        done = poll(client, batch.id, {"completed", "failed"})
        assert done.status == "completed"
        counts = done.request_counts
        assert counts is not None
        assert (counts.total, counts.completed, counts.failed) == (QUOTA + 2, QUOTA, 2)
        assert done.error_file_id is not None
        errors = file_lines(client, done.error_file_id)
        assert len(errors) == 2
        for row in errors.values():
            assert row["response"]["status_code"] == 429
            assert "daily quota" in row["response"]["body"]["error"]["message"]
        # The quota is spent: a single request is refused too.
        with pytest.raises(openai.RateLimitError):
            client.chat.completions.create(
                model="demo/instant", messages=[{"role": "user", "content": "one more"}]
            )


def test_responses_batch_answers_response_objects(client: openai.OpenAI) -> None:
    line = {
        "custom_id": "r1",
        "method": "POST",
        "url": "/v1/responses",
        "body": {"model": "demo/instant", "input": "respond", "demo_tokens": 3},
    }
    batch = client.batches.create(
        input_file_id=upload(client, jsonl([line])),
        endpoint="/v1/responses",
        completion_window="24h",
    )
    batch = poll(client, batch.id, {"completed", "failed"})
    assert batch.status == "completed"
    assert batch.output_file_id
    body = file_lines(client, batch.output_file_id)["r1"]["response"]["body"]
    assert body["object"] == "response"
    assert body["status"] == "completed"
    retrieved = client.responses.retrieve(body["id"])
    assert retrieved.output_text == body["output"][0]["content"][0]["text"]


@pytest.mark.parametrize(
    ("content", "code"),
    [
        (b'{"custom_id": "a"\n', "invalid_json_line"),
        (jsonl([chat_line("a"), chat_line("a")]), "duplicate_custom_id"),
        (jsonl([{**chat_line("a"), "url": "/v1/embeddings"}]), "mismatched_endpoint"),
    ],
)
def test_malformed_file_fails_the_batch_at_validation(
    client: openai.OpenAI, content: bytes, code: str
) -> None:
    batch = client.batches.create(
        input_file_id=upload(client, content),
        endpoint="/v1/chat/completions",
        completion_window="24h",
    )
    batch = poll(client, batch.id, {"failed", "completed", "in_progress"})
    assert batch.status == "failed"
    assert batch.errors is not None and batch.errors.data
    assert batch.errors.data[0].code == code
    assert batch.output_file_id is None


def test_upload_over_the_line_cap_is_413_and_stores_nothing(client: openai.OpenAI) -> None:
    before = {f.id for f in client.files.list()}
    with pytest.raises(openai.APIStatusError) as refused:
        upload(client, b"{}\n" * 50_001)
    assert refused.value.status_code == 413
    assert {f.id for f in client.files.list()} == before


def test_cancel_stops_a_running_batch(client: openai.OpenAI, stack: Stack) -> None:
    lines = [chat_line(f"c{n}", model="demo/slow") for n in range(40)]
    batch = client.batches.create(
        input_file_id=upload(client, jsonl(lines)),
        endpoint="/v1/chat/completions",
        completion_window="24h",
    )
    poll(client, batch.id, {"in_progress"})
    deadline = time.monotonic() + 30
    while client.batches.retrieve(batch.id).request_counts.completed < 1:  # type: ignore[union-attr]
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert client.batches.cancel(batch.id).status == "cancelling"
    ended = poll(client, batch.id, {"cancelled"}, timeout=20)
    counts = ended.request_counts
    assert counts is not None and counts.total == 40
    assert 1 <= counts.completed < 40
    assert counts.completed + counts.failed == 40
    assert ended.cancelled_at and ended.cancelling_at
    done = file_lines(client, ended.output_file_id) if ended.output_file_id else {}
    assert len(done) == counts.completed
    assert ended.error_file_id
    errors = file_lines(client, ended.error_file_id)
    assert len(errors) == 40 - counts.completed
    assert set(done) | set(errors) == {f"c{n}" for n in range(40)}


def test_interactive_chat_gets_its_first_token_during_a_big_batch(
    client: openai.OpenAI,
) -> None:
    lines = [chat_line(f"big{n}", model="demo/slow") for n in range(200)]
    batch = client.batches.create(
        input_file_id=upload(client, jsonl(lines)),
        endpoint="/v1/chat/completions",
        completion_window="24h",
    )
    deadline = time.monotonic() + 30
    while client.batches.retrieve(batch.id).request_counts.completed < 2:  # type: ignore[union-attr]
        assert time.monotonic() < deadline
        time.sleep(0.1)
    waits = []
    for _ in range(3):
        started = time.monotonic()
        stream = client.chat.completions.create(
            model="demo/fast",
            messages=[{"role": "user", "content": "now"}],
            stream=True,
            extra_body={"demo_tokens": 3},
        )
        first = None
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                first = time.monotonic() - started
                break
        stream.close()
        assert first is not None
        waits.append(first)
    assert client.batches.retrieve(batch.id).status == "in_progress"
    assert max(waits) < 1.0, waits
    client.batches.cancel(batch.id)
    poll(client, batch.id, {"cancelled"}, timeout=30)


def genq(stack: Stack, key: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The ``genq`` command, as a process (what the console script runs)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GENQ_")}
    env.update(GENQ_URL=stack.base_url, GENQ_API_KEY=key)
    return subprocess.run(
        [sys.executable, "-m", "genq_cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_cli_lists_gets_and_cancels_batches(client: openai.OpenAI, stack: Stack) -> None:
    lines = [chat_line(f"cli{n}", model="demo/slow") for n in range(30)]
    batch = client.batches.create(
        input_file_id=upload(client, jsonl(lines)),
        endpoint="/v1/chat/completions",
        completion_window="24h",
    )
    poll(client, batch.id, {"in_progress"})

    got = genq(stack, DEV_KEY, "batches", "get", batch.id, "--json")
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout)["request_counts"]["total"] == 30

    mine = genq(stack, DEV_KEY, "batches", "list", "--json")
    assert mine.returncode == 0, mine.stderr
    assert batch.id in [b["id"] for b in json.loads(mine.stdout)]
    every = genq(stack, DEV_ADMIN_KEY, "batches", "list", "--all", "--json")
    assert every.returncode == 0, every.stderr
    (row,) = [b for b in json.loads(every.stdout) if b["id"] == batch.id]
    assert row["tenant"] == "dev"
    refused = genq(stack, OTHER_KEY, "batches", "list", "--all")
    assert refused.returncode == 4 and "403" in refused.stderr
    unknown = genq(stack, OTHER_KEY, "batches", "get", batch.id)  # another tenant's
    assert unknown.returncode == 4 and "404" in unknown.stderr

    cancelled = genq(stack, DEV_ADMIN_KEY, "batches", "cancel", batch.id, "--all")
    assert cancelled.returncode == 0, cancelled.stderr
    assert "cancelling" in cancelled.stdout
    assert poll(client, batch.id, {"cancelled"}, timeout=30).status == "cancelled"
    table = genq(stack, DEV_KEY, "batches", "list")
    assert table.returncode == 0 and batch.id in table.stdout and "cancelled" in table.stdout


def test_batch_ends_with_a_signed_webhook_event(client: openai.OpenAI) -> None:
    with Receiver() as receiver:
        endpoint = client.webhooks.create(
            name="batches",
            url=receiver.url("/batches"),
            event_types=["batch.completed", "batch.cancelled"],
        )
        try:
            batch = client.batches.create(
                input_file_id=upload(client, jsonl([chat_line("w1"), chat_line("w2")])),
                endpoint="/v1/chat/completions",
                completion_window="24h",
            )
            assert poll(client, batch.id, {"completed", "failed"}).status == "completed"
            deadline = time.monotonic() + 30
            while not receiver.about("/batches", batch.id):
                assert time.monotonic() < deadline, "no batch.completed was delivered"
                time.sleep(0.1)
            (delivered,) = receiver.about("/batches", batch.id)
            event = client.webhooks.unwrap(
                delivered.body, delivered.headers, secret=endpoint.signing_secret
            )
            assert event.type == "batch.completed"
            assert event.data.id == batch.id
        finally:
            client.webhooks.delete(endpoint.id)
