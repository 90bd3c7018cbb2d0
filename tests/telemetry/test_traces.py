"""One trace per generation, from live processes (issue 36): a gateway and workers export
to a local OTLP/HTTP receiver, which decodes what they send with ``opentelemetry-proto``.
The provider is the fake OpenAI server."""

from __future__ import annotations

import json
import secrets
import time

import httpx
import pytest

from tests.e2e.browser import DEV_KEY, Stack, fake_openai_env, running_stack
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.telemetry.otlp_receiver import OtlpReceiver, Span

MODEL = "openai/gpt-4o-mini"
SERVER, CLIENT, CONSUMER, PRODUCER = 2, 3, 5, 4  # OTLP's SpanKind numbers


def otel_env(receiver: OtlpReceiver) -> dict[str, str]:
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "OTEL_METRIC_EXPORT_INTERVAL": "500",
    }


def client_traceparent() -> tuple[str, str, str]:
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return f"00-{trace_id}-{span_id}-01", trace_id, span_id


def post(stack: Stack, body: dict[str, object], traceparent: str) -> str:
    answer = httpx.post(
        f"{stack.base_url}/v1/generations",
        json=body,
        headers={"Authorization": f"Bearer {DEV_KEY}", "traceparent": traceparent},
        timeout=30,
    )
    assert answer.status_code == 202, answer.text
    return str(answer.json()["id"])


def named(spans: list[Span], name: str) -> list[Span]:
    return [s for s in spans if s.name == name]


def test_a_generation_is_one_trace_across_gateway_and_worker(
    redis_url: str, request: pytest.FixtureRequest
) -> None:
    with OtlpReceiver() as receiver, FakeOpenAI(default_tokens=6) as fake:
        env = {
            **fake_openai_env(fake.base_url),
            **otel_env(receiver),
            "GENQ_LOG_FORMAT": "json",
            "GENQ_LOG_LEVEL": "DEBUG",
        }
        stack_of = running_stack(redis_url, request.node.name, gateway_log_level="info", **env)
        with stack_of as stack:
            traceparent, trace_id, client_span = client_traceparent()
            job_id = post(stack, {"model": MODEL, "prompt": "hello"}, traceparent)
            assert stack.result(job_id)["status"] == "completed"

            def complete(spans: list[Span]) -> bool:
                mine = [s for s in spans if s.trace_id == trace_id]
                return bool(named(mine, "genq.attempt")) and bool(named(mine, f"chat {MODEL}"))

            receiver.wait_for(complete)
            spans = receiver.in_trace(trace_id)
            worker_log = stack.workers[0].log_path.read_text()
            assert stack.gateway is not None
            gateway_log = stack.gateway.log_path.read_text()

        assert {s.service for s in spans} >= {"genq-gateway", "genq-worker"}
        server = [s for s in spans if s.service == "genq-gateway" and s.kind == SERVER]
        assert [s.parent_span_id for s in server] == [client_span]
        (enqueue,) = [s for s in spans if s.kind == PRODUCER]
        assert enqueue.parent_span_id == server[0].span_id
        assert enqueue.attributes["genq.job.id"] == job_id
        (attempt,) = named(spans, "genq.attempt")
        assert attempt.kind == CONSUMER and attempt.parent_span_id == enqueue.span_id
        assert attempt.attributes["genq.attempt"] == 1
        assert attempt.attributes["genq.job.id"] == job_id
        assert attempt.attributes["genq.outcome"] == "completed"
        assert attempt.attributes["genq.tenant"] == "dev"
        assert attempt.attributes["genq.queue.wait"] >= 0
        (call,) = named(spans, f"chat {MODEL}")
        assert call.kind == CLIENT and call.parent_span_id == attempt.span_id
        attributes = call.attributes
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.provider.name"] == "openai"
        assert attributes["gen_ai.request.model"] == MODEL
        assert attributes["gen_ai.request.stream"] is True
        assert attributes["gen_ai.response.model"]
        assert attributes["gen_ai.response.id"]
        assert attributes["gen_ai.response.finish_reasons"] == ["stop"]
        assert attributes["gen_ai.usage.input_tokens"] > 0
        assert attributes["gen_ai.usage.output_tokens"] > 0
        assert 0 < attributes["gen_ai.response.time_to_first_chunk"] < 30
        assert "error.type" not in attributes
        # Content is never exported: no attribute anywhere holds the prompt.
        assert not any("hello" in json.dumps(s.attributes, default=str) for s in spans)

        lines = [json.loads(line) for line in worker_log.splitlines() if line.startswith("{")]
        joined = [line for line in lines if line.get("trace_id") == trace_id]
        assert joined, f"no worker log line of trace {trace_id}: {worker_log[-2000:]}"
        assert all(len(line["span_id"]) == 16 for line in joined)
        # The gateway's lines (uvicorn's access log included) are JSON too.
        gateway_lines = [json.loads(line) for line in gateway_log.splitlines() if line.strip()]
        assert any("POST /v1/generations" in line["message"] for line in gateway_lines)


def test_a_killed_worker_gives_attempts_one_and_two_in_one_trace(
    redis_url: str, request: pytest.FixtureRequest
) -> None:
    with OtlpReceiver() as receiver, FakeOpenAI() as fake:
        fake.plan(Reply.stream([f"w{i} " for i in range(200)], delay=0.05), model="gpt-4o-mini")
        env = {**fake_openai_env(fake.base_url), **otel_env(receiver), "GENQ_LEASE": "2"}
        with running_stack(redis_url, request.node.name, workers=0, **env) as stack:
            first = stack.start_worker()
            traceparent, trace_id, _ = client_traceparent()
            job_id = post(stack, {"model": MODEL, "prompt": "long one"}, traceparent)
            assert fake.wait_requests(1, timeout=60)
            assert fake.requests[0].wait_tokens(3, timeout=30)
            first.kill()
            stack.start_worker()
            assert stack.result(job_id)["status"] == "completed"

            def both(spans: list[Span]) -> bool:
                attempts = named([s for s in spans if s.trace_id == trace_id], "genq.attempt")
                return {s.attributes.get("genq.attempt") for s in attempts} == {1, 2}

            receiver.wait_for(both)
            attempts = named(receiver.in_trace(trace_id), "genq.attempt")

        by_number = {s.attributes["genq.attempt"]: s for s in attempts}
        lost, second = by_number[1], by_number[2]
        assert lost.attributes["genq.outcome"] == "lease_expired"
        assert "worker lost" in lost.attributes["genq.lost.reason"]
        assert second.attributes["genq.outcome"] == "completed"
        assert second.attributes["genq.previous_attempt.outcome"] == "lease_expired"
        assert "worker lost" in second.attributes["genq.previous_attempt.error"]
        assert lost.parent_span_id == second.parent_span_id  # both children of the enqueue


def test_a_cancelled_generation_shows_the_cancel_event(
    redis_url: str, request: pytest.FixtureRequest
) -> None:
    with OtlpReceiver() as receiver, FakeOpenAI() as fake:
        fake.plan(Reply.hang(after=2), model="gpt-4o-mini")
        env = {**fake_openai_env(fake.base_url), **otel_env(receiver)}
        with running_stack(redis_url, request.node.name, **env) as stack:
            traceparent, trace_id, _ = client_traceparent()
            job_id = post(stack, {"model": MODEL, "prompt": "stop me"}, traceparent)
            assert fake.wait_requests(1, timeout=60)
            assert fake.requests[0].wait_tokens(2, timeout=30)
            with stack.client() as client:
                assert client.post(f"/v1/generations/{job_id}/cancel").json()["cancelled"]
            assert stack.result(job_id)["status"] == "cancelled"
            spans = receiver.wait_for(
                lambda spans: any(
                    s.trace_id == trace_id and s.name == "genq.attempt" for s in spans
                )
            )

        (attempt,) = named([s for s in spans if s.trace_id == trace_id], "genq.attempt")
        assert attempt.attributes["genq.outcome"] == "cancelled"
        assert attempt.event("genq.cancel") is not None
        calls = [s for s in spans if s.trace_id == trace_id and s.name == f"chat {MODEL}"]
        assert [c.attributes["error.type"] for c in calls] == ["cancelled"]


@pytest.mark.parametrize(
    "otel",
    [
        pytest.param({}, id="no_endpoint"),
        pytest.param({"OTEL_TRACES_SAMPLER": "always_off"}, id="sampler_off"),
        pytest.param({"OTEL_SDK_DISABLED": "true"}, id="sdk_disabled"),
    ],
)
def test_nothing_is_exported_when_tracing_is_off(
    redis_url: str, request: pytest.FixtureRequest, otel: dict[str, str]
) -> None:
    with OtlpReceiver() as receiver:
        env = {**otel}
        if otel:  # an endpoint, and something else that turns the spans off
            env |= {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{receiver.endpoint}/v1/traces"}
            env |= {"OTEL_BSP_SCHEDULE_DELAY": "100"}
        with running_stack(redis_url, request.node.name, **env) as stack:
            traceparent, _, _ = client_traceparent()
            job_id = post(stack, {"model": "demo/fast", "prompt": "quiet"}, traceparent)
            assert stack.result(job_id)["status"] == "completed"
            record = stack.record(job_id)
            # Stopping the processes flushes whatever their exporters still hold.
            stack.stop()
        assert receiver.spans == []
        assert receiver.posts == 0
        assert record["status"] == "completed"


def test_batch_lines_are_linked_to_their_batch(
    redis_url: str, request: pytest.FixtureRequest
) -> None:
    with OtlpReceiver() as receiver:
        env = {**otel_env(receiver), "GENQ_BATCH_POLL": "0.1", "GENQ_MODELS": "demo/fast"}
        with running_stack(redis_url, request.node.name, **env) as stack:
            traceparent, trace_id, _ = client_traceparent()
            headers = {"Authorization": f"Bearer {DEV_KEY}", "traceparent": traceparent}
            lines = [
                {
                    "custom_id": f"line-{n}",
                    "method": "POST",
                    "url": "/v1/chat/completions",
                    "body": {
                        "model": "demo/fast",
                        "messages": [{"role": "user", "content": "hi"}],
                    },
                }
                for n in range(3)
            ]
            content = "".join(json.dumps(line) + "\n" for line in lines).encode()
            with httpx.Client(base_url=f"{stack.base_url}/v1", headers=headers, timeout=30) as http:
                uploaded = http.post(
                    "/files",
                    data={"purpose": "batch"},
                    files={"file": ("batch.jsonl", content, "application/jsonl")},
                )
                assert uploaded.status_code == 200, uploaded.text
                created = http.post(
                    "/batches",
                    json={
                        "input_file_id": uploaded.json()["id"],
                        "endpoint": "/v1/chat/completions",
                        "completion_window": "24h",
                    },
                )
                assert created.status_code == 200, created.text
                batch_id = created.json()["id"]
                deadline = time.monotonic() + 60
                while (batch := http.get(f"/batches/{batch_id}").json())["status"] != "completed":
                    assert time.monotonic() < deadline, "the batch did not complete"
                    time.sleep(0.1)
                assert batch["request_counts"] == {"total": 3, "completed": 3, "failed": 0}, batch

            def linked(spans: list[Span]) -> list[Span]:
                return [
                    s
                    for s in spans
                    if s.kind == PRODUCER and any(t == trace_id for t, _ in s.links)
                ]

            def attempts_of(spans: list[Span]) -> list[Span]:
                traces = {s.trace_id for s in linked(spans)}
                return [s for s in named(spans, "genq.attempt") if s.trace_id in traces]

            spans = receiver.wait_for(lambda spans: len(attempts_of(spans)) == 3)

        enqueues = linked(spans)
        assert enqueues, "no enqueue span linked to the batch's create"
        assert all(s.service == "genq-gateway" for s in enqueues)
        assert all(s.attributes["genq.queue"].endswith(".batch") for s in enqueues)
        attempts = attempts_of(spans)
        assert {s.parent_span_id for s in attempts} <= {s.span_id for s in enqueues}
        assert all(s.attributes["genq.outcome"] == "completed" for s in attempts)
