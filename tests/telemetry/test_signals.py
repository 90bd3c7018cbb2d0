"""The rest of what a generation tells an operator, from live processes: a 429 as a span
event, an SSE viewer as a span linked to the generation's trace, the GenAI metrics on the
worker's Prometheus ``/metrics`` and through OTLP."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.e2e.browser import DEV_KEY, fake_openai_env, running_stack
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.ports import free_port
from tests.telemetry.otlp_receiver import OtlpReceiver, Span
from tests.telemetry.test_traces import MODEL, client_traceparent, otel_env, post

GENAI_SERIES = (
    "gen_ai_client_token_usage_bucket",
    "gen_ai_client_operation_duration_seconds_bucket",
    "gen_ai_client_operation_time_to_first_chunk_seconds_bucket",
    "genq_queue_wait_seconds_bucket",
    "genq_attempts_total",
)


GENAI_METRICS = {
    "gen_ai.client.token.usage",
    "gen_ai.client.operation.duration",
    "gen_ai.client.operation.time_to_first_chunk",
    "genq.queue.wait",
    "genq.attempts",
}
"""What the worker exports by OTLP (the receiver waits for them all)."""


def quoted(text: str, spans: list[Span]) -> list[str]:
    """The spans whose attributes or events hold ``text``."""
    return [s.name for s in spans if text in json.dumps([s.attributes, s.events], default=str)]


def test_a_429_a_viewer_and_the_genai_metrics(
    redis_url: str, request: pytest.FixtureRequest
) -> None:
    metrics_port = free_port()
    with OtlpReceiver() as receiver, FakeOpenAI(default_tokens=4) as fake:
        fake.plan(Reply.error(429, "Rate limit reached", retry_after="0.2"), model="gpt-4o-mini")
        env = {
            **fake_openai_env(fake.base_url),
            **otel_env(receiver),
            "GENQ_BACKOFF": "0.05",
            "GENQ_METRICS_PORT": str(metrics_port),
        }
        with running_stack(redis_url, request.node.name, **env) as stack:
            traceparent, trace_id, _ = client_traceparent()
            job_id = post(stack, {"model": MODEL, "prompt": "limited"}, traceparent)
            frames = []
            with httpx.stream(
                "GET",
                f"{stack.base_url}/v1/generations/{job_id}/events",
                headers={"Authorization": f"Bearer {DEV_KEY}"},
                timeout=60,
            ) as viewer:
                for line in viewer.iter_lines():
                    frames.append(line)
            assert "event: completed" in frames

            def seen(spans: list[Span]) -> bool:
                attempts = [s for s in spans if s.trace_id == trace_id and s.name == "genq.attempt"]
                views = [s for s in spans if s.name.startswith("genq.view")]
                return len(attempts) == 2 and bool(views)

            spans = receiver.wait_for(seen)
            scraped = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics").text
            receiver.wait_for(lambda _: receiver.metric_names >= GENAI_METRICS)

        attempts = {
            s.attributes["genq.attempt"]: s
            for s in spans
            if s.trace_id == trace_id and s.name == "genq.attempt"
        }
        limited = attempts[1]
        assert limited.attributes["genq.outcome"] == "retry"
        assert limited.attributes["error.type"] == "RateLimitedError"
        cooldown = limited.event("genq.provider.cooldown")
        assert cooldown is not None and cooldown["genq.retry_after"] == pytest.approx(0.2)
        assert attempts[2].attributes["genq.outcome"] == "completed"
        assert attempts[2].attributes["genq.previous_attempt.outcome"] == "retry"
        assert "genq.previous_attempt.error" not in attempts[2].attributes
        assert not quoted("Rate limit reached", spans)  # the provider's words stay in the record

        (view,) = [s for s in spans if s.name.startswith("genq.view")]
        assert view.trace_id != trace_id  # the viewer's own request, not the generation's
        assert [link[0] for link in view.links] == [trace_id]
        assert view.attributes["genq.job.id"] == job_id
        assert view.attributes["genq.view.writes"] > 0

        for series in GENAI_SERIES:
            assert series in scraped, series
        assert 'gen_ai_token_type="output"' in scraped
        assert 'outcome="retry"' in scraped and 'outcome="completed"' in scraped


def test_a_fallback_is_an_event_and_its_generation_a_child_of_the_attempt(
    redis_url: str, request: pytest.FixtureRequest
) -> None:
    with OtlpReceiver() as receiver, FakeOpenAI() as fake:
        # A 429 asking for longer than GENQ_FALLBACK_MAX_WAIT: on to the next model at once.
        fake.plan(Reply.error(429, "Rate limit reached", retry_after="120"), model="gpt-4o-mini")
        env = {
            **fake_openai_env(fake.base_url),
            **otel_env(receiver),
            "GENQ_FALLBACKS": json.dumps({MODEL: ["demo/fast"]}),
        }
        with running_stack(redis_url, request.node.name, **env) as stack:
            traceparent, trace_id, _ = client_traceparent()
            job_id = post(stack, {"model": MODEL, "prompt": "fall back"}, traceparent)
            assert stack.result(job_id)["status"] == "completed"

            def relayed(spans: list[Span]) -> bool:
                mine = [s for s in spans if s.trace_id == trace_id]
                return len([s for s in mine if s.name == "genq.attempt"]) == 2

            receiver.wait_for(relayed)
            spans = receiver.in_trace(trace_id)

    (parent,) = [
        s for s in spans if s.name == "genq.attempt" and s.attributes["genq.job.id"] == job_id
    ]
    fallback = parent.event("genq.fallback")
    assert fallback is not None and fallback["genq.fallback.model"] == "demo/fast"
    assert parent.event("genq.provider.cooldown") is not None
    (child,) = [s for s in spans if s.name == "genq.attempt" and s is not parent]
    assert child.attributes["genq.job.id"] == fallback["genq.job.id"] != job_id
    assert child.parent_span_id == parent.span_id
    assert {s.name for s in spans} >= {f"chat {MODEL}", "chat demo/fast"}
    assert not quoted("Rate limit reached", spans)
