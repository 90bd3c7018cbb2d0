"""The UI message stream of one generation, from its first event, fed by the shared tail.

Every stream starts at the generation's start (the AI SDK's resume is a replay) and goes on live
until it ends: ``finish`` then ``data: [DONE]`` (:mod:`gateway.ui_chat.ui_parts`). A stream the
gateway ends first (``GENQ_SSE_MAX_DURATION``, a viewer too far behind, the gateway stopping, a
catch-up read Redis failed after the response began) ends with an ``error`` part saying how to
resume it. A client that leaves only stops watching: these routes never cancel for a dropped
connection (that is what resume is for).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

from redis.exceptions import RedisError

from genq import CursorRefused, ViewerLagged

from ..access.owned_jobs import OwnedJob
from ..state import Gateway
from ..streaming.frames import DONE, KEEPALIVE
from ..streaming.sse import HEADERS as SSE_HEADERS
from ..streaming.sse import Ending
from .ui_parts import UIParts, data_frame

log = logging.getLogger("gateway.events")

HEADERS = {**SSE_HEADERS, "Cache-Control": "no-cache", "x-vercel-ai-ui-message-stream": "v1"}
"""What the AI SDK's transport expects of a UI message stream (``text/event-stream`` is
every stream's)."""


def cut(chat_id: str) -> bytes:
    """The end of a stream that ended before its generation did."""
    error = (
        "the stream ended before the generation did (the gateway's GENQ_SSE_MAX_DURATION, it "
        f"is stopping, or a read from Redis failed): GET /v1/ui/chat/{chat_id}/stream resumes it"
    )
    return data_frame({"type": "error", "errorText": error}).encode() + DONE


async def ui_stream(
    gateway: Gateway,
    owned: OwnedJob,
    chat_id: str,
    message_id: str,
    until: float,
    ending: Ending,
) -> AsyncIterator[bytes]:
    """The stream's bytes, each batch of the tail one write (an empty one: a keepalive)."""
    parts = UIParts(owned.job.id)
    yield parts.opening(message_id)
    tail = gateway.tails[owned.provider]
    try:
        async with contextlib.aclosing(tail.follow(owned.job.id, None, until=until)) as batches:
            async for batch in batches:
                if not batch:
                    yield KEEPALIVE
                    continue
                if len(batch) == 1:
                    frames = parts.frames(batch[0])
                else:
                    frames = b"".join([parts.frames(entry) for entry in batch])
                if batch[-1].terminal:
                    ending.begin()
                    frames += DONE
                if frames:  # progress events, say, show nothing
                    yield frames
    except (ViewerLagged, CursorRefused):
        pass
    except RedisError as exc:  # the response has begun: no 503 can be sent
        log.warning("ended a UI message stream of %s early: %s", chat_id, type(exc).__name__)
    if ending.turn is None:
        yield cut(chat_id)
        return
    ending.release()
    await ending.turn
