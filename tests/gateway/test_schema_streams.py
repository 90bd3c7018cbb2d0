"""Hypothesis over the SSE route's cursor (``?after=``, ``Last-Event-ID``) and ``?token=`` with
Unicode text: never a 5xx, and the queue's shared tail still delivers to another tenant's
viewer afterwards (issue 17, findings 1 and 4)."""

from __future__ import annotations

import asyncio

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.gateway.conftest import KEY_ALPHA, LiveGateway, Script, create, read_stream, wait_until

DIGITS = st.characters(categories=["Nd"])  # every script's digits, ASCII among them
CURSORS = st.one_of(
    st.text(max_size=40),
    st.builds(lambda a, b: f"{a}-{b}", st.text(DIGITS, max_size=22), st.text(DIGITS, max_size=22)),
    st.builds(lambda c, tail: c + tail, st.sampled_from(["0", "1-1", "0-0"]), st.text(max_size=3)),
)
HEADER_SAFE = st.text(st.characters(exclude_categories=["Cc", "Cs"]), max_size=40)


def sendable(value: str) -> bool:
    """HTTP/1.1 cannot carry a header value with outer blanks (h11 refuses to send one)."""
    return value == value.strip(" \t")


async def test_schema_streams_unicode_cursors_and_tokens_never_5xx_and_tail_flows(
    alpha: httpx.AsyncClient, beta: httpx.AsyncClient, script: Script, live: LiveGateway
) -> None:
    theirs = await create(beta, metadata={"gate": "after-fuzz", "chunks": 2})
    watching = asyncio.create_task(read_stream(beta, theirs["id"], timeout=120))
    await wait_until(lambda: live.gateway.tails["demo"].viewers == 1)
    mine = await create(alpha, delay_ms=600_000)
    url = f"/v1/generations/{mine['id']}/events"
    tokens = st.one_of(
        st.text(max_size=60),
        st.builds(lambda t, tail: t + tail, st.just(mine["watch_token"]), st.text(max_size=3)),
    )
    statuses: set[int] = set()

    header = st.one_of(CURSORS.filter(str.isprintable), HEADER_SAFE).filter(sendable)

    @given(after=CURSORS, last=st.one_of(st.none(), header))
    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    def probe_cursor(after: str, last: str | None) -> None:
        headers = {"Last-Event-ID": last.encode()} if last is not None else {}
        with sync.stream("GET", url, params={"after": after}, headers=headers) as response:
            statuses.add(response.status_code)
            assert response.status_code < 500, (after, last, response.read())

    @given(token=tokens, after=st.one_of(st.none(), CURSORS))
    @settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
    def probe_token(token: str, after: str | None) -> None:
        params = {"token": token, **({"after": after} if after is not None else {})}
        with anon.stream("GET", url, params=params) as response:
            statuses.add(response.status_code)
            assert response.status_code < 500, (token, after, response.read())

    auth = {"Authorization": f"Bearer {KEY_ALPHA}"}
    with (
        httpx.Client(base_url=live.url, headers=auth, timeout=10) as sync,
        httpx.Client(base_url=live.url, timeout=10) as anon,
    ):
        # Blocking calls: the gateway serves them from its own thread and loop.
        probe_cursor()
        probe_token()
    assert {200, 400, 401} <= statuses

    script.gate("after-fuzz").set()
    stream = await asyncio.wait_for(watching, 10)
    assert [e.event for e in stream.events] == ["chunk", "chunk", "completed"]
    await wait_until(lambda: live.gateway.open_streams.held("alpha") == 0)
