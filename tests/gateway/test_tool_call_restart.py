"""A worker SIGKILLed half-way through a tool call's arguments (issue 33): the next worker runs
the generation again, and its result, its native event stream and its Chat Completions stream
each hold every call exactly once, whole.

Real processes: a gateway and a worker whose ``openai`` provider is the fake OpenAI server. The
first attempt's reply is a gate, not a race: the fake streams the first call whole and the
opening pieces of the second call's arguments, then holds the stream open, so the kill lands
between two argument pieces however slowly the machine runs.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from gateway.openai.objects import job_id_of
from genq_contract.transcript import Transcript
from tests.e2e.browser import Stack, fake_openai_env, running_stack
from tests.fakes.openai_server import FakeOpenAI, Reply, function_tools, tool_call_deltas
from tests.gateway.test_beyond_text_stack import sse_events, sse_stream
from tests.openai.conftest import sdk_client
from tests.openai.test_chat_beyond_text import reassembled, tool_reply

# A takeover waits for the lease and for a new worker's start, whose LiteLLM import is slow on a
# loaded machine (tests/e2e/browser.py's Stack.result).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

MODEL = "openai/gpt-4o-mini"
USER = [{"role": "user", "content": "Weather in Paris, time in Oslo?"}]
TOOLS = function_tools("get_weather", "get_time")
CALLS = [
    (
        "call_w",
        "get_weather",
        json.dumps({"city": "Paris", "days": [1, 2, 3], "note": 'a "q" {x}'}),
    ),
    ("call_t", "get_time", json.dumps({"zone": "Europe/Oslo", "format": "24h"})),
]
WHOLE = [{"id": i, "name": n, "arguments": a} for i, n, a in CALLS]
PIECE = 4
RESTARTED = {"event": "restarted"}


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def stack(redis_url: str, fake: FakeOpenAI, request: pytest.FixtureRequest) -> Iterator[Stack]:
    env = {
        **fake_openai_env(fake.base_url),
        "GENQ_LEASE": "2",  # a killed worker's job is taken over quickly
        "GENQ_BACKOFF": "0.05",
        "GENQ_MAX_BACKOFF": "0.2",
    }
    with running_stack(redis_url, request.node.name, **env) as running:
        yield running


def restart_marks(chunks: list[Any]) -> list[int]:
    """Where the Chat stream says the generation started over (``"genq": {"event":
    "restarted"}``, a field the SDK keeps as an extra)."""
    return [n for n, c in enumerate(chunks) if (c.model_extra or {}).get("genq") == RESTARTED]


def chat_stream(client: openai.OpenAI, key: str) -> Any:
    """A streamed chat completion bound to ``key``: the same call again re-attaches to it."""
    return client.chat.completions.create(
        model=MODEL,
        messages=USER,
        tools=TOOLS,
        stream=True,
        extra_headers={"Idempotency-Key": key},
    )


def test_worker_killed_inside_tool_call_arguments_gives_each_call_once_and_whole(
    stack: Stack, fake: FakeOpenAI
) -> None:
    first_call = len(tool_call_deltas(CALLS[:1], PIECE))
    gate = tool_call_deltas(CALLS, PIECE)[: first_call + 3]  # call 2's start and 2 pieces
    fake.plan(Reply.hang(deltas=gate, delay=0.05))
    fake.plan(tool_reply(CALLS, PIECE, delay=0.02))  # in pieces again, apart after coalescing
    key = f"killed-in-args-{uuid.uuid4().hex}"

    with sdk_client(stack) as client, chat_stream(client, key) as chat, stack.client() as http:
        live = iter(chat)
        chunks = [next(live)]  # the stream opens at once: the generation's id
        job_id = job_id_of(chunks[0].id)
        events: list[dict[str, Any]] = []
        for event in sse_stream(http, job_id):
            events.append(event)
            data = event["data"]
            if event["event"] == "tool_args" and data["index"] == 1 and len(stack.workers) == 1:
                assert fake.requests[0].finished_at is None, "the gate must still hold"
                stack.workers[0].kill()
                stack.start_worker()
        chunks += list(live)  # the Chat stream of the same generation, read across the kill

    # The kill cut the provider's stream inside call 2's arguments (the gate never opened).
    first = fake.requests[0]
    assert first.wait_disconnected(timeout=10) and first.tokens_sent >= first_call + 2
    assert fake.count() == 2

    result = stack.result(job_id)
    assert (result["status"], result["attempt"]) == ("completed", 2)
    assert result["tool_calls"] == WHOLE
    assert result["finish_reason"] == "tool_calls"

    # The native stream: the dead attempt stopped inside call 2's arguments; after the one
    # `restarted`, each call starts, streams and ends once, and folds to the result's calls.
    kinds = [e["event"] for e in events]
    assert kinds.count("restarted") == 1 and kinds[-1] == "completed"
    cut = kinds.index("restarted")
    before, after = events[:cut], events[cut + 1 :]
    arguments = CALLS[1][2]
    partial = "".join(
        e["data"]["delta"] for e in before if e["event"] == "tool_args" and e["data"]["index"] == 1
    )
    assert partial and len(partial) < len(arguments) and arguments.startswith(partial)
    assert [e["data"]["index"] for e in before if e["event"] == "tool_done"] == [0]
    for kind in ("tool_call", "tool_done"):
        assert Counter(e["data"]["index"] for e in after if e["event"] == kind) == {0: 1, 1: 1}
    pieces = {0: "", 1: ""}
    for e in after:
        if e["event"] == "tool_args":
            pieces[e["data"]["index"]] += e["data"]["delta"]
    assert pieces == {0: CALLS[0][2], 1: arguments}
    folded = Transcript()
    for e in after:
        folded.add(e["event"], e["data"])
    assert [c.model_dump() for c in folded.tool_calls] == WHOLE
    whole = Transcript()
    for e in events:  # a reader that saw both attempts: `restarted` drops the first
        whole.add(e["event"], e["data"])
    assert whole.as_json()["tool_calls"] == WHOLE
    with stack.client() as http:  # what is retained: the `restarted` and the new attempt
        assert sse_events(http, job_id) == [events[cut], *after]

    # The Chat stream read live across the kill: one restart mark, then each call once.
    expected = dict(enumerate(WHOLE))
    marks = restart_marks(chunks)
    assert len(marks) == 1
    assert reassembled(chunks[marks[0] + 1 :]) == expected
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
    # ... and re-attached with the same key after the end: the retained attempt only.
    with sdk_client(stack) as client, chat_stream(client, key) as again:
        replay = list(again)
    assert job_id_of(replay[0].id) == job_id
    assert restart_marks(replay) == [1]  # right after the opening chunk
    assert reassembled(replay[2:]) == expected
    assert fake.count() == 2  # the re-attach called no provider
