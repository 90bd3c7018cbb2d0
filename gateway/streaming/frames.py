"""A job stream's entries as SSE messages: what the shared tail makes of each entry, once for
every viewer (``frame`` given to :class:`genq.Tail`; the bytes are ``StreamEntry.framed``).

``id:`` is the stream entry id, ``event:`` its type, ``data:`` the JSON text as written (not
decoded and encoded again). A terminal entry that carries the generation's usage totals is
sent after a ``usage`` event holding them (``Usage.as_json``); that event has no ``id:``, so a
client resuming from its last event id gets both again.
"""

from __future__ import annotations

import json
import re
from typing import Any

from genq import StreamEntry
from genq_contract.spend import Usage

KEEPALIVE = b": ping\n\n"
"""An SSE comment: keeps an idle stream's connection busy; every reader skips it (the OpenAI
routes send theirs without the blank line: :mod:`gateway.openai.response_events`)."""
DONE = b"data: [DONE]\n\n"
"""The last frame of the streams whose clients expect one (Chat Completions, the AI SDK's)."""

SSE_LINE_BREAK = re.compile(r"\r\n|\r|\n")
"""The only line breaks of SSE. ``str.splitlines()`` also splits on U+2028, U+2029, U+0085 and
a few C0 controls, which model output may carry: it would cut a ``data:`` JSON in two."""


def frame(entry: StreamEntry) -> bytes:
    lines = "".join(f"data: {line}\n" for line in SSE_LINE_BREAK.split(entry.data))
    totals = ""
    usage = usage_totals(entry)
    if usage is not None:
        totals = f"event: usage\ndata: {json.dumps(usage)}\n\n"
    return f"{totals}id: {entry.id}\nevent: {entry.type}\n{lines}\n".encode()


def usage_totals(entry: StreamEntry) -> dict[str, Any] | None:
    """The usage totals a terminal entry carries, in the shape every reader shows
    (``Usage.as_json``); None for any other entry, or one without."""
    if entry.usage is None or not entry.terminal:
        return None
    return Usage.from_counts(json.loads(entry.usage)).as_json()
