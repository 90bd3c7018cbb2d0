"""A worker SIGKILLed in the middle of a response streamed to the official Python SDK: a new
worker takes over, the stream shows ``response.genq.restarted``, its numbers keep growing, and
the final text is one clean text (the dead attempt's words are not in it)."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from gateway.openai.objects import job_id_of
from tests.e2e.browser import Stack

pytestmark = pytest.mark.slow

RESTARTED = "response.genq.restarted"


def test_responses_stream_survives_a_killed_worker_with_one_clean_text(
    client: openai.OpenAI, stack: Stack
) -> None:
    events: list[Any] = []
    with client.responses.stream(
        model="demo/slow",
        input="survive this",
        background=True,
        extra_body={"demo_tokens": 16, "demo_delay_ms": 100},
    ) as stream:
        for event in stream:
            events.append(event)
            if sum(e.type == "response.output_text.delta" for e in events) == 3:
                stack.workers[0].kill()
                stack.start_worker()
        final = stream.get_final_response()

    kinds = [e.type for e in events]
    numbers = [e.sequence_number for e in events]
    assert numbers == sorted(set(numbers)), "sequence_number must grow across the restart"
    assert kinds.count(RESTARTED) == 1
    restart = kinds.index(RESTARTED)
    before = "".join(e.delta for e in events[:restart] if e.type == "response.output_text.delta")
    after = "".join(e.delta for e in events[restart:] if e.type == "response.output_text.delta")
    native = stack.result(job_id_of(final.id))
    assert before and native["attempt"] == 2
    assert final.output_text == after == native["text"]
    assert final.output_text.startswith("Echo: survive this")
    assert final.output_text.count("Echo:") == 1

    # Resuming from a number of the dead attempt gives the restart and everything after it.
    cut = numbers[restart - 1]
    rest = list(client.responses.retrieve(final.id, stream=True, starting_after=cut))
    assert rest[0].type == RESTARTED
    assert [e.sequence_number for e in rest] == numbers[restart:]
