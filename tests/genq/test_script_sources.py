"""How the scripts' sources are assembled: each gets the shared helpers it reaches, and no other,
each made just before the first statement that needs it."""

from __future__ import annotations

import asyncio
import re
from importlib import resources

import pytest

from genq._scripts import (
    COMMENT,
    LOCALS,
    NAMES,
    STRING,
    WORD,
    compose,
    helpers,
    lua_constant,
    names_in,
    source,
    statements,
    undefined_calls,
)


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


@pytest.mark.parametrize("name", NAMES)
def test_compose_splices_each_helper_once(name: str) -> None:
    _, pieces = helpers()
    text = source(name)
    for helper in defined(text):
        assert text.count(pieces[helper]) == 1, helper


def test_compose_splices_a_helper_before_the_statement_that_first_uses_it() -> None:
    text = compose("#!lua name=t\nlocal a = 1\n-- the clock\nlocal b = now_ms()\nreturn b\n")
    assert text.index("local a = 1") < text.index("local function now_ms")
    assert text.index("local function now_ms") < text.index("-- the clock\nlocal b = now_ms()")


def test_compose_fails_loudly_on_a_call_of_an_unknown_helper() -> None:
    with pytest.raises(ValueError, match=r"\['now_msec'\]"):
        compose("#!lua name=t\nlocal a = now_msec()\nreturn a\n")


def test_undefined_calls_leave_out_locals_lua_functions_methods_strings_and_comments() -> None:
    lua = (
        "local function f(x) return tostring(x) end\n"
        "local g, h = 1, 2\n"
        "-- gone(1)\n"
        "redis.call('GET', 'k(1)')\n"
        "return f(g), string.format('%d', h), cjson.encode({}), missing(1)\n"
    )
    assert undefined_calls(lua) == {"missing"}


@pytest.mark.parametrize("name", NAMES)
def test_compose_every_script_calls_only_what_it_defines(name: str) -> None:
    assert undefined_calls(source(name)) == set()


def test_helpers_reached_only_through_another_helper_are_spliced_in() -> None:
    # enqueue.lua calls reindex, which calls index_drop and index_add; emit.lua needs none.
    assert {"reindex", "index_drop", "index_add", "expiry_entry"} <= defined(source("enqueue"))
    assert defined(source("emit")) == {"now_ms", "append", "restart_stream"}


@pytest.mark.parametrize("name", NAMES)
def test_each_helper_is_defined_before_the_code_first_names_it(name: str) -> None:
    code = COMMENT.sub("", source(name))
    for helper in defined(source(name)):
        first = re.search(rf"\b{helper}\b", code)
        assert first is not None
        before = code[: first.end()]
        assert before.endswith((f"local function {helper}", f"local {helper}")), (name, helper)


def test_a_helper_is_made_where_the_script_first_needs_it() -> None:
    # enqueue.lua returns from its path for one new job before the hand-off and the items'
    # path, whose helpers (books_at, reindex and what they call) come only after it.
    text = source("enqueue")
    new_job = text.index("if #ARGV < NARGS then")
    assert text.index("local function now_digits") < new_job
    assert new_job < text.index("local function books_at") < text.index("local function hand_off")
    assert text.index("local function reindex") > new_job
    assert text.index("local function index_drop") > new_job


def test_statements_are_cut_at_column_0_but_never_inside_a_block_or_a_comment() -> None:
    body = (
        "--[[\nAbout it.\n\nKEYS[1] not code\n]]\n"
        "-- the first\nlocal a = 1\n"
        "if a then\n  a = 2\nelse\n  a = 3\nend\n"
        "\n-- the last\nreturn {\n  a,\n}\n"
    )
    assert statements(body) == [
        "--[[\nAbout it.\n\nKEYS[1] not code\n]]\n-- the first\nlocal a = 1\n",
        "if a then\n  a = 2\nelse\n  a = 3\nend\n\n",
        "-- the last\nreturn {\n  a,\n}\n",
    ]
    assert "".join(statements(body)) == body


@pytest.mark.parametrize("name", NAMES)
def test_no_script_names_a_local_of_its_own_after_a_helper(name: str) -> None:
    # compose splices every helper whose name the code holds: a local of that name would pull
    # in a helper the script never calls (and shadow it).
    _, pieces = helpers()
    text = (resources.files("genq") / "lua" / f"{name}.lua").read_text()
    code = STRING.sub("''", COMMENT.sub("", text))
    own = {w for names in LOCALS.findall(code) for w in WORD.findall(names)}
    assert own & pieces.keys() == set()


def test_retry_gets_none_of_the_dead_lettering_helpers() -> None:
    # retry.lua takes jobs out of the dead set; it never puts one in nor finishes one.
    assert not {"dead_letter", "finish", "release_key"} & defined(source("retry"))


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


def test_lua_constant_reads_a_whole_number_of_lib_and_refuses_what_is_not_one() -> None:
    assert lua_constant("ADMIT_MAX") == 1000
    for name in ("NO_SUCH_CONSTANT", "now_ms"):
        with pytest.raises(ValueError, match=name):
            lua_constant(name)
