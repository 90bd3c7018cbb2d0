"""A response's stream of Responses events, numbered by ``sequence_number``.

Numbers 0-4 are the lifecycle preamble: ``response.created`` and ``response.queued`` (sent at
once), then ``response.in_progress``, ``response.output_item.added`` and
``response.content_part.added`` (sent with the first entry of the job's stream). Each stream
entry then gets ``FIRST_ENTRY + its ordinal`` (see :mod:`.numbering`):

- ``chunk`` -> ``response.output_text.delta``;
- ``restarted`` -> ``response.genq.restarted``: the attempt before died, its text is void; the
  new attempt's deltas follow, and the closing events carry the one clean text;
- ``progress`` -> nothing (its number is skipped);
- the terminal entry -> ``response.output_text.done``, ``response.content_part.done``,
  ``response.output_item.done`` and ``response.completed`` (or ``response.incomplete``,
  ``response.failed``, ``response.cancelled``), numbered from the entry's own number up:
  nothing follows a terminal entry, so these numbers are free.

``starting_after=N`` yields exactly the events numbered above N. A stream the gateway ends
before the response did (``GENQ_SSE_MAX_DURATION``) ends with an ``error`` event
(``code: "stream_cut"``, no ``id:``: it is not one of the response's events).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator, Iterator
from typing import Any

from genq import Job, Queue, StreamEntry

from ..access.owned_jobs import OwnedJob
from ..state import Gateway
from .connection_bound import CUT, StreamCut
from .numbering import numbered, retained
from .objects import (
    item_id,
    message_item,
    output_text_part,
    response_id,
    response_object,
    result_of,
    text_of,
)

PREAMBLE_SENT_AT_ONCE = 2
FIRST_ENTRY = 5
RESTARTED = "response.genq.restarted"
KEEPALIVE = b": ping\n\n"
FINAL_EVENT = {
    "completed": "response.completed",
    "incomplete": "response.incomplete",
    "failed": "response.failed",
    "cancelled": "response.cancelled",
}

Event = tuple[str, dict[str, Any]]


def sse(number: int, kind: str, body: dict[str, Any]) -> bytes:
    data = json.dumps({"type": kind, "sequence_number": number, **body}, separators=(",", ":"))
    return f"id: {number}\nevent: {kind}\ndata: {data}\n\n".encode()


def preamble(job: Job) -> list[Event]:
    item = {"item_id": item_id(job.id), "output_index": 0, "content_index": 0}
    return [
        ("response.created", {"response": response_object(job, "", status="queued")}),
        ("response.queued", {"response": response_object(job, "", status="queued")}),
        ("response.in_progress", {"response": response_object(job, "", status="in_progress")}),
        (
            "response.output_item.added",
            {"output_index": 0, "item": message_item(job, "", "in_progress", content=False)},
        ),
        ("response.content_part.added", {**item, "part": output_text_part("")}),
    ]


def entry_events(job: Job, entry: StreamEntry) -> list[Event]:
    """The events of a non-terminal entry."""
    where = {"item_id": item_id(job.id), "output_index": 0, "content_index": 0}
    if entry.type == "chunk":
        return [
            (
                "response.output_text.delta",
                {**where, "delta": json.loads(entry.data), "logprobs": []},
            )
        ]
    if entry.type == "restarted":
        return [(RESTARTED, where)]
    return []


def closing_events(job: Job, text: str) -> list[Event]:
    """What ends a response: the text, part and item closed, then the final lifecycle event."""
    final = response_object(job, text)
    status = final["status"]
    where = {"item_id": item_id(job.id), "output_index": 0}
    return [
        ("response.output_text.done", {**where, "content_index": 0, "text": text, "logprobs": []}),
        (
            "response.content_part.done",
            {**where, "content_index": 0, "part": output_text_part(text)},
        ),
        (
            "response.output_item.done",
            {
                "output_index": 0,
                "item": final["output"][0]
                if final["output"]
                else message_item(job, text, "incomplete"),
            },
        ),
        (FINAL_EVENT.get(status, "response.completed"), {"response": final}),
    ]


def numbered_events(events: list[Event], first: int, after: int) -> Iterator[bytes]:
    for offset, (kind, body) in enumerate(events):
        if first + offset > after:
            yield sse(first + offset, kind, body)


def cut_event(job: Job, number: int, goes_on: bool) -> bytes:
    """The last event of a stream that ended before its response did, numbered ``number``."""
    then = (
        f"the response goes on: resume with GET /v1/responses/{response_id(job.id)}"
        f"?stream=true&starting_after={number - 1}"
        if goes_on
        else "the response was cancelled (a background response, or one created with an "
        "Idempotency-Key, would go on and could be resumed)"
    )
    body = {"code": "stream_cut", "message": f"{CUT}; {then}", "param": None}
    data = json.dumps({"type": "error", "sequence_number": number, **body}, separators=(",", ":"))
    return f"event: error\ndata: {data}\n\n".encode()


async def response_stream(
    gateway: Gateway, owned: OwnedJob, after: int, until: float, goes_on: bool
) -> AsyncGenerator[bytes, None]:
    """SSE bytes of the response's events numbered above ``after`` (-1: all of them), until
    the response ends; at ``until`` (the event loop's time) the stream ends with
    :func:`cut_event` and :class:`StreamCut` (``goes_on``: the response outlives it)."""
    job, queue = owned.job, owned.queue
    opening = preamble(job)
    for chunk in numbered_events(opening[:PREAMBLE_SENT_AT_ONCE], 0, after):
        yield chunk
    opened = False
    ended = False
    following = PREAMBLE_SENT_AT_ONCE  # the number after the last one given out
    entries = numbered(gateway.tails[owned.provider], queue, job.id, until)
    async with contextlib.aclosing(entries):
        async for batch in entries:
            if not batch:
                yield KEEPALIVE
                continue
            out: list[bytes] = []
            if not opened:
                opened = True
                rest = opening[PREAMBLE_SENT_AT_ONCE:]
                out.extend(numbered_events(rest, PREAMBLE_SENT_AT_ONCE, after))
                following = FIRST_ENTRY
            for item in batch:
                number = FIRST_ENTRY + item.ordinal
                if item.entry.terminal:
                    out.extend(numbered_events(await _closing(owned), number, after))
                    ended = True
                else:
                    events = entry_events(job, item.entry)
                    out.extend(numbered_events(events, number, after))
                    following = number + max(1, len(events))
            if out:
                yield b"".join(out)
    if not ended:
        yield cut_event(job, max(following, after + 1), goes_on)
        raise StreamCut


async def _closing(owned: OwnedJob) -> list[Event]:
    job = await owned.queue.get(owned.job.id) or owned.job
    return closing_events(job, await current_text(owned.queue, job))


async def current_text(queue: Queue, job: Job) -> str:
    """The response's text: the result's once completed, else what the current attempt wrote."""
    text = result_of(job).get("text")
    if isinstance(text, str):
        return text
    items = await retained(queue, job.id)
    return text_of(item.entry for item in items)
