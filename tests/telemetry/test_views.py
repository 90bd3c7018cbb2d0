"""Every stream of a generation is one ``genq.view`` span, linked to the generation's trace:
the OpenAI-compatible streams (through the official ``openai`` SDK) and the AI SDK's UI
message stream, from a live gateway and a demo worker exporting to a local OTLP receiver.

A POST that enqueues and streams is itself in the generation's trace: its view span is a child
of its server span, linked to the enqueue. A resume is a viewer of its own, in its own trace.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import openai
import pytest

from gateway.openai.objects import job_id_of
from tests.e2e.browser import DEV_KEY, Stack, running_stack
from tests.telemetry.otlp_receiver import OtlpReceiver, Span
from tests.telemetry.test_traces import PRODUCER, client_traceparent, otel_env

pytestmark = pytest.mark.slow

SLOW = {"demo_tokens": 20, "demo_delay_ms": 100}
"""Long enough (2 s) for a resume to find the generation still running."""


@dataclass
class Traced:
    receiver: OtlpReceiver
    stack: Stack

    @property
    def queue(self) -> str:
        return self.stack.queue_prefix("demo")

    def sdk(self, traceparent: str) -> openai.OpenAI:
        return openai.OpenAI(
            base_url=f"{self.stack.base_url}/v1",
            api_key=DEV_KEY,
            max_retries=0,
            timeout=60,
            default_headers={"traceparent": traceparent},
        )

    def http(self, traceparent: str) -> httpx.Client:
        headers = {"Authorization": f"Bearer {DEV_KEY}", "traceparent": traceparent}
        return httpx.Client(base_url=self.stack.base_url, headers=headers, timeout=60)

    def views_of(self, job_id: str, count: int) -> list[Span]:
        """The ``genq.view`` spans of ``job_id`` once ``count`` of them arrived."""

        def views(spans: list[Span]) -> list[Span]:
            return [
                s
                for s in spans
                if s.name.startswith("genq.view") and s.attributes.get("genq.job.id") == job_id
            ]

        return views(self.receiver.wait_for(lambda spans: len(views(spans)) >= count))

    def enqueue_of(self, job_id: str) -> Span:
        spans = self.receiver.wait_for(
            lambda spans: any(
                s.kind == PRODUCER and s.attributes.get("genq.job.id") == job_id for s in spans
            )
        )
        (enqueue,) = [
            s for s in spans if s.kind == PRODUCER and s.attributes.get("genq.job.id") == job_id
        ]
        return enqueue


@pytest.fixture(scope="module")
def traced(redis_url: str, request: pytest.FixtureRequest) -> Iterator[Traced]:
    with OtlpReceiver() as receiver:
        env = {**otel_env(receiver), "GENQ_MODELS": "demo/fast"}
        name = f"telemetry-{request.module.__name__}"
        with running_stack(redis_url, name, **env) as stack:
            yield Traced(receiver, stack)


def assert_viewed_where_it_was_made(traced: Traced, view: Span, job_id: str) -> None:
    """``view`` is the view span of the request that enqueued ``job_id`` and streamed it."""
    enqueue = traced.enqueue_of(job_id)
    assert view.name == f"genq.view {traced.queue}"
    assert view.service == "genq-gateway"
    assert view.trace_id == enqueue.trace_id
    assert view.parent_span_id == enqueue.parent_span_id  # the POST's server span
    assert view.links == [(enqueue.trace_id, enqueue.span_id)]
    assert view.attributes["genq.queue"] == traced.queue
    assert view.attributes["genq.tenant"] == "dev"
    assert view.attributes["genq.view.writes"] > 0
    assert "genq.view.left" not in view.attributes
    assert "error.type" not in view.attributes


def test_view_spans_of_a_streamed_chat_completion_and_its_replay(traced: Traced) -> None:
    body = {"model": "demo/fast", "messages": [{"role": "user", "content": "view me"}]}
    key = {"Idempotency-Key": f"viewed-{secrets.token_hex(4)}"}
    traceparent, trace_id, _ = client_traceparent()
    with traced.sdk(traceparent) as sdk:
        chunks = list(sdk.chat.completions.create(**body, stream=True, extra_headers=key))
    assert chunks[-1].choices[0].finish_reason == "stop"
    job_id = job_id_of(chunks[0].id)
    replayer, replay_trace, _ = client_traceparent()
    with traced.sdk(replayer) as sdk:  # the same key: the same generation, streamed again
        replay = list(sdk.chat.completions.create(**body, stream=True, extra_headers=key))
    assert {c.id for c in replay} == {chunks[0].id}

    views = {s.trace_id: s for s in traced.views_of(job_id, 2)}
    assert set(views) == {trace_id, replay_trace}
    assert_viewed_where_it_was_made(traced, views[trace_id], job_id)
    assert [trace for trace, _ in views[replay_trace].links] == [trace_id]
    assert views[replay_trace].attributes["genq.view.writes"] > 0


def test_view_spans_of_a_streamed_response_and_its_resume(traced: Traced) -> None:
    traceparent, trace_id, _ = client_traceparent()
    with traced.sdk(traceparent) as sdk:
        events = list(sdk.responses.create(model="demo/fast", input="view me", stream=True))
    assert events[-1].type == "response.completed"
    response_id = events[-1].response.id
    job_id = job_id_of(response_id)
    resumer, resume_trace, _ = client_traceparent()
    with traced.sdk(resumer) as sdk:
        replay = list(sdk.responses.retrieve(response_id, stream=True))
    assert [e.sequence_number for e in replay] == [e.sequence_number for e in events]

    views = {s.trace_id: s for s in traced.views_of(job_id, 2)}
    assert set(views) == {trace_id, resume_trace}
    assert_viewed_where_it_was_made(traced, views[trace_id], job_id)
    resumed = views[resume_trace]
    assert [trace for trace, _ in resumed.links] == [trace_id]
    assert resumed.attributes["genq.view.writes"] > 0


def test_view_spans_of_a_ui_message_stream_and_its_resume(traced: Traced) -> None:
    traceparent, trace_id, _ = client_traceparent()
    resumer, resume_trace, _ = client_traceparent()
    body = {
        "id": "chat-viewed",
        "model": "demo/fast",
        "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}],
        "trigger": "submit-message",
        "params": SLOW,
    }
    with (
        traced.http(traceparent) as http,
        http.stream("POST", "/v1/ui/chat", json=body) as sent,
    ):
        assert sent.status_code == 200
        lines = sent.iter_lines()
        first = [line for line, _ in zip(lines, range(8), strict=False)]
        with traced.http(resumer) as other:
            resumed = other.get("/v1/ui/chat/chat-viewed/stream")
        rest = list(lines)
    assert resumed.status_code == 200, "the generation ended before the resume"
    assert "data: [DONE]" in rest and "data: [DONE]" in resumed.text
    start = json.loads(first[0].removeprefix("data: "))
    job_id = start["messageMetadata"]["genq"]["generationId"]

    views = {s.trace_id: s for s in traced.views_of(job_id, 2)}
    assert set(views) == {trace_id, resume_trace}
    assert_viewed_where_it_was_made(traced, views[trace_id], job_id)
    assert [trace for trace, _ in views[resume_trace].links] == [trace_id]
    assert views[resume_trace].attributes["genq.view.writes"] > 0


def test_a_viewer_that_leaves_a_streamed_chat_completion_is_marked_left(
    traced: Traced,
) -> None:
    """The viewer closes its connection mid-stream: its view span ends, marked as left (not an
    error), with the writes it got."""
    body = {
        "model": "demo/fast",
        "messages": [{"role": "user", "content": "leave me"}],
        "stream": True,
        **SLOW,
    }
    traceparent, trace_id, _ = client_traceparent()
    with (
        traced.http(traceparent) as http,
        http.stream("POST", "/v1/chat/completions", json=body) as sent,
    ):
        assert sent.status_code == 200
        lines = sent.iter_lines()
        first = next(line for line in lines if line.startswith("data: "))
        next(line for line in lines if line.startswith("data: "))  # a second event, then away
    job_id = job_id_of(json.loads(first.removeprefix("data: "))["id"])

    (view,) = traced.views_of(job_id, 1)
    assert view.trace_id == trace_id
    assert view.attributes["genq.view.left"] is True
    assert view.attributes["genq.view.writes"] >= 2
    assert "error.type" not in view.attributes
