"""Event streams: the rule every streaming response keeps (:mod:`.sse`), SSE framing of the
shared tail's entries, cursors, waits for a generation's end, and the sse-starlette patch."""
