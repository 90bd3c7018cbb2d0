"""A response's stream of Responses events, numbered by ``sequence_number``.

Numbers 0-4 are the lifecycle preamble: ``response.created`` and ``response.queued`` (sent at
once), then ``response.in_progress``, ``response.output_item.added`` and
``response.content_part.added`` of the message (sent with the first entry of the job's
stream). Each stream entry's events (:class:`.response_items.StreamItems`) then take the
numbers from :class:`EventNumbers` (see :mod:`.numbering` for the ordinals):

- ``chunk`` -> ``response.output_text.delta``;
- ``reasoning``, ``tool_call``, ``tool_args``, ``tool_done`` -> the ``reasoning`` and
  ``function_call`` items' events (:mod:`.response_items`);
- ``restarted`` -> ``response.genq.restarted``: the attempt before died, what it wrote is void;
  the new attempt's events follow, and the closing events carry the one clean output;
- ``progress`` -> nothing (its number is skipped);
- the terminal entry -> the message's ``response.output_text.done``,
  ``response.content_part.done`` and ``response.output_item.done``, the other open items'
  closing events, and ``response.completed`` (or ``response.incomplete``, ``response.failed``,
  ``response.cancelled``), numbered from the entry's own number up: nothing follows a terminal
  entry, so these numbers are free.

``starting_after=N`` yields exactly the events numbered above N. A stream the gateway ends
before the response did (``GENQ_SSE_MAX_DURATION``) ends with an ``error`` event
(``code: "stream_cut"``, no ``id:``: it is not one of the response's events).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator, Iterator
from typing import Any

from genq import Event as GenqEvent
from genq import Job, Queue
from genq_contract.result import read_result
from genq_contract.transcript import Transcript

from ..access.owned_jobs import OwnedJob
from ..state import Gateway
from .connection_bound import CUT, StreamCut
from .numbering import numbered, retained
from .objects import (
    ResponseOutput,
    item_id,
    item_status,
    message_item,
    output_text_part,
    response_id,
    response_object,
    text_of,
)
from .response_items import EVENTS_PER_ENTRY, Event, StreamItems

PREAMBLE_SENT_AT_ONCE = 2
FIRST_ENTRY = 5
KEEPALIVE = b": ping\n"
"""A comment line and no blank line: once an event carried an ``id:``, the OpenAI Python SDK's
decoder turns a blank line into an event with no data (which it fails to parse as JSON), while
the comment alone is skipped by every reader and still keeps the connection busy."""
FINAL_EVENT = {
    "completed": "response.completed",
    "incomplete": "response.incomplete",
    "failed": "response.failed",
    "cancelled": "response.cancelled",
}


def sse(number: int, kind: str, body: dict[str, Any]) -> bytes:
    data = json.dumps({"type": kind, "sequence_number": number, **body}, separators=(",", ":"))
    return f"id: {number}\nevent: {kind}\ndata: {data}\n\n".encode()


def preamble(job: Job) -> list[Event]:
    item = {"item_id": item_id(job.id), "output_index": 0, "content_index": 0}
    nothing = ResponseOutput()
    return [
        ("response.created", {"response": response_object(job, nothing, status="queued")}),
        ("response.queued", {"response": response_object(job, nothing, status="queued")}),
        ("response.in_progress", {"response": response_object(job, nothing, status="in_progress")}),
        (
            "response.output_item.added",
            {"output_index": 0, "item": message_item(job, "", "in_progress", content=False)},
        ),
        ("response.content_part.added", {**item, "part": output_text_part("")}),
    ]


def closing_events(job: Job, output: ResponseOutput, items: StreamItems) -> list[Event]:
    """What ends a response: the text, part and message closed, the other items closed, then
    the final lifecycle event."""
    final = response_object(job, output)
    status = final["status"]
    text = output.text
    where = {"item_id": item_id(job.id), "output_index": 0}
    message = message_item(job, text, item_status(status))
    return [
        ("response.output_text.done", {**where, "content_index": 0, "text": text, "logprobs": []}),
        (
            "response.content_part.done",
            {**where, "content_index": 0, "part": output_text_part(text)},
        ),
        ("response.output_item.done", {"output_index": 0, "item": message}),
        *items.closing(),
        (FINAL_EVENT.get(status, "response.completed"), {"response": final}),
    ]


class EventNumbers:
    """The number of an entry's first event: ``FIRST_ENTRY + ordinal + extra``, where ``extra``
    counts the events beyond one that the entries before it (in its attempt) gave. A text-only
    stream is thus numbered without a gap. A ``restarted`` entry of ordinal R starts ``extra``
    at ``(EVENTS_PER_ENTRY - 1) * R``: more than the attempts before it can have used, so
    numbers keep growing, and it depends on the entry alone, so a reader resuming from the
    retained entries (which start at that ``restarted``) numbers them as a live one did."""

    def __init__(self) -> None:
        self._extra = 0

    def first(self, ordinal: int, entry_type: str) -> int:
        if entry_type == "restarted":
            self._extra = (EVENTS_PER_ENTRY - 1) * ordinal
        return FIRST_ENTRY + ordinal + self._extra

    def gave(self, count: int) -> None:
        self._extra += max(0, count - 1)


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
    items = StreamItems(job)
    numbers = EventNumbers()
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
            for entry in batch:
                number = numbers.first(entry.ordinal, entry.entry.type)
                if entry.entry.terminal:
                    out.extend(numbered_events(await _closing(owned, items), number, after))
                    ended = True
                else:
                    events = items.events(entry.entry)
                    numbers.gave(len(events))
                    out.extend(numbered_events(events, number, after))
                    following = number + max(1, len(events))
            if out:
                yield b"".join(out)
    if not ended:
        yield cut_event(job, max(following, after + 1), goes_on)
        raise StreamCut


async def _closing(owned: OwnedJob, items: StreamItems) -> list[Event]:
    job = await owned.queue.get(owned.job.id) or owned.job
    return closing_events(job, await current_output(owned.queue, job), items)


async def current_output(queue: Queue, job: Job) -> ResponseOutput:
    """What the response returned: the result's once completed, else what the current attempt
    wrote (:class:`genq_contract.transcript.Transcript`'s fold of its events)."""
    result = read_result(job.result)
    if result.text is not None:
        return ResponseOutput(result.text, result.reasoning, tuple(result.tool_calls))
    retained_entries = await retained(queue, job.id)
    transcript = Transcript.of(
        GenqEvent(n.entry.id, n.entry.type, json.loads(n.entry.data)) for n in retained_entries
    )
    return ResponseOutput(
        text_of(n.entry for n in retained_entries),
        transcript.reasoning,
        tuple(transcript.tool_calls),
    )
