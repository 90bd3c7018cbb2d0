"""How the scripts' sources are assembled: each gets the shared helpers it reaches, and no other."""

from __future__ import annotations

import asyncio

import pytest

from genq.scripts import NAMES, helpers, names_in, source


def defined(text: str) -> set[str]:
    _, pieces = helpers()
    return {name for name, piece in pieces.items() if piece in text}


@pytest.mark.parametrize("name", NAMES)
def test_a_script_gets_every_helper_it_reaches_and_no_other(name: str) -> None:
    _, pieces = helpers()
    text = source(name)
    have = defined(text)
    body = text.partition("\n")[2]
    for helper in have:
        body = body.replace(pieces[helper], "")
    reached, frontier = set(), names_in(body) & pieces.keys()
    while frontier:
        reached |= frontier
        frontier = set().union(*(names_in(pieces[n]) for n in frontier)) & pieces.keys() - reached
    assert have == reached


def test_helpers_reached_only_through_another_helper_are_spliced_in() -> None:
    # enqueue.lua calls reindex, which calls index_drop and index_add; emit.lua needs none.
    assert {"reindex", "index_drop", "index_add", "expiry_entry"} <= defined(source("enqueue"))
    assert defined(source("emit")) == {"now_ms", "append", "restart_stream"}


def test_every_helper_is_used_by_some_script() -> None:
    _, pieces = helpers()
    used = set().union(*(defined(source(name)) for name in NAMES))
    assert used == pieces.keys()


def test_a_comment_naming_a_helper_does_not_pull_it_in() -> None:
    assert names_in("-- make_ready's turn\n--[[ leave_ready\n]] local x = 1") == {"local", "x"}


async def test_now_digits_is_the_servers_clock_in_ms_with_its_micros_padded(redis) -> None:
    # Readings 7 ms apart until one second's microseconds below 100,000 (padded) and above were
    # both seen: a second at most.
    _, pieces = helpers()
    script = pieces["now_digits"] + "return {now_digits(), redis.call('TIME')}"
    seen: set[bool] = set()
    for _ in range(300):
        digits, (seconds, micros) = await redis.eval(script, 0)
        seen.add(int(micros) < 100_000)
        after = int(seconds) * 1000 + int(micros) // 1000
        assert digits.isdigit() and 0 <= after - int(digits) <= 2
        if len(seen) == 2:
            break
        await asyncio.sleep(0.007)
    assert seen == {True, False}
