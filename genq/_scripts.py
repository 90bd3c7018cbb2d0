"""The Lua scripts: loading, and the return codes they share.

Each state change is one file in ``genq/lua``. ``_lib.lua`` holds the helpers the scripts share;
since Redis has no include, the ones a script uses (and the ones those use) are spliced into it,
each just before the first of its top-level statements that needs it (:func:`compose`;
docs/ARCHITECTURE.md, "Lua helpers: included at load time"). Only those, and only
there: the server makes a script's helpers anew on every call, so defining every helper would
make each call pay for helpers it never runs (docs/KNOWN_LIMITS.md has the count).
``register_script`` loads each once and reloads it after a server restart (NOSCRIPT).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from enum import IntEnum
from functools import cache
from importlib import resources
from typing import Any

from redis.commands.core import AsyncScript

from ._errors import JobExistsError, JobLeaseLostError, JobNotFoundError
from ._redis_patches import pooled
from ._streamed import run_one
from .connection import RedisClient

NAMES = (
    "enqueue",
    "pick",
    "activate",
    "emit",
    "heartbeat",
    "settle",
    "cancel",
    "reclaim",
    "retry",
    "purge_dead",
    "delete",
    "cooldown",
    "clear_cooldown",
    "presence",
    "admit",
    "meter_lost",
    "fold_usage",
)


class Code(IntEnum):
    OK = 0
    DEDUPLICATED = 1
    EXISTS = 2
    GONE = 3
    LEASE_LOST = 4
    CANCEL_REQUESTED = 5
    STALE_READ = 6
    NOT_ADMITTED = 7


DEFINITION = re.compile(r"^local (?:function )?([A-Za-z_]\w*)", re.MULTILINE)
WORD = re.compile(r"[A-Za-z_]\w*")
COMMENT = re.compile(r"--\[\[.*?\]\]|--[^\n]*", re.DOTALL)


def names_in(lua: str) -> set[str]:
    """The words of ``lua``'s code (comments left out: a helper they mention is not a use)."""
    return set(WORD.findall(COMMENT.sub("", lua)))


def commentary(lines: Sequence[str]) -> list[str]:
    """Each line's kind: "block" (inside ``--[[ ... ]]``, blank lines there too), "comment"
    (``--``), "blank" or "code"."""
    kinds, in_block = [], False
    for line in lines:
        in_block = in_block or line.startswith("--[[")
        if in_block:
            kinds.append("block")
        else:
            kinds.append(
                "comment" if line.startswith("--") else "code" if line.strip() else "blank"
            )
        in_block = in_block and "]]" not in line
    return kinds


def with_comments_above(kinds: Sequence[str], i: int, over: tuple[str, ...]) -> int:
    """Where line ``i`` starts once the lines of the ``over`` kinds just above it are counted
    in."""
    while i > 0 and kinds[i - 1] in over:
        i -= 1
    return i


@cache
def helpers() -> tuple[str, dict[str, str]]:
    """``_lib.lua`` cut into its top-level definitions, each with the comments just above it:
    (what comes before the first, {name: its text})."""
    lines = (resources.files("genq") / "lua" / "_lib.lua").read_text().splitlines(keepends=True)
    kinds = commentary(lines)
    cuts: list[tuple[int, str]] = []
    for i, line in enumerate(lines):
        if (m := DEFINITION.match(line)) and kinds[i] == "code":
            cuts.append((with_comments_above(kinds, i, ("block", "comment", "blank")), m.group(1)))
    ends = [start for start, _ in cuts[1:]] + [len(lines)]
    pieces = {name: "".join(lines[a:b]) for (a, name), b in zip(cuts, ends, strict=True)}
    return "".join(lines[: cuts[0][0]]), pieces


def reached(lua: str) -> set[str]:
    """The helpers ``lua`` uses, and the ones those use."""
    pieces = helpers()[1]
    found: set[str] = set()
    pending = names_in(lua) & pieces.keys()
    while pending:
        found |= pending
        pending = set().union(*(names_in(pieces[n]) for n in pending)) & pieces.keys() - found
    return found


CLOSES_A_BLOCK = re.compile(r"(end|else|elseif|until)\b|[})\]]")


def statements(body: str) -> list[str]:
    """``body`` cut before each top-level statement (a line of code at column 0 that does not
    close a block), each with the comments just above it."""
    lines = body.splitlines(keepends=True)
    kinds = commentary(lines)
    starts = [0]
    for i, line in enumerate(lines):
        if kinds[i] == "code" and not line[0].isspace() and not CLOSES_A_BLOCK.match(line):
            starts.append(max(starts[-1], with_comments_above(kinds, i, ("block", "comment"))))
    ends = [*starts[1:], len(lines)]
    return ["".join(lines[a:b]) for a, b in zip(starts, ends, strict=True) if a < b]


CALL = re.compile(r"(?<![\w.:])([A-Za-z_]\w*)\s*\(")
STRING = re.compile(r"'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"")
LOCALS = re.compile(r"\blocal[ \t]+(?:function[ \t]+)?([\w \t,]+)")
NOT_CALLS = frozenset(
    {"and", "or", "not", "if", "elseif", "while", "until", "return", "in", "function"}
    | {"tonumber", "tostring", "type", "pairs", "ipairs", "unpack", "next", "select", "error"}
    | {"pcall", "assert", "setmetatable", "getmetatable", "rawget", "rawset", "xpcall"}
)
"""Lua's keywords before a parenthesis, and the plain functions of the server's Lua."""


def undefined_calls(lua: str) -> set[str]:
    """The names ``lua`` calls that it does not define as a local (strings and comments left
    out), apart from Lua's own functions: a misspelt or unknown helper."""
    code = STRING.sub("''", COMMENT.sub("", lua))
    local = {w for names in LOCALS.findall(code) for w in WORD.findall(names)}
    return set(CALL.findall(code)) - local - NOT_CALLS


def compose(text: str) -> str:
    """A script's text with the ``_lib.lua`` helpers it reaches spliced in, each once, just
    before the first top-level statement that reaches it, in ``_lib.lua``'s order: the server
    makes a helper when the script runs past its definition, so a call that returns early does
    not pay for the helpers of the statements it never reaches. A call of a name that neither
    the script nor ``_lib.lua`` defines raises ValueError here rather than on the server,
    where a path the tests miss would fail only when it runs."""
    shebang, _, body = text.partition("\n")
    preamble, pieces = helpers()
    made: set[str] = set()
    out = [f"{shebang}\n{preamble}"]
    for statement in statements(body):
        needed = reached(statement) - made
        out += [piece for n, piece in pieces.items() if n in needed]
        out.append(statement)
        made |= needed
    composed = "".join(out)
    if unknown := undefined_calls(composed):
        raise ValueError(f"the script calls {sorted(unknown)}, which _lib.lua does not define")
    return composed


@cache
def source(name: str) -> str:
    """``genq/lua/<name>.lua`` composed (:func:`compose`), once per process: every queue's
    ``Scripts`` registers the same texts."""
    return compose((resources.files("genq") / "lua" / f"{name}.lua").read_text())


def lua_constant(name: str) -> int:
    """A whole-number constant of ``_lib.lua`` (``local NAME = 128``), for the tests and benches
    that size their runs by it."""
    found = re.search(rf"^local {name} = (\d+)$", helpers()[1].get(name, ""), re.MULTILINE)
    if found is None:
        raise ValueError(f"_lib.lua has no whole-number constant {name}")
    return int(found[1])


class Script(AsyncScript):
    """A registered script whose calls on a single node's pooled client skip redis-py's
    per-command bookkeeping (:func:`genq._streamed.run_one`); on a cluster, a client holding
    one connection, or a pipeline, it is redis-py's ``AsyncScript`` as it is."""

    async def __call__(
        self,
        keys: Sequence[Any] | None = None,
        args: Iterable[Any] | None = None,
        client: Any = None,
    ) -> Any:
        client = self.registered_client if client is None else client
        if not pooled(client):
            return await super().__call__(keys, args, client)
        return await run_one(client, self, keys or (), tuple(args or ()))


class Scripts:
    """One registered script per state change, bound to a client."""

    def __init__(self, redis: RedisClient) -> None:
        for name in NAMES:
            setattr(self, name, Script(redis, source(name)))

    enqueue: Script
    pick: Script
    activate: Script
    emit: Script
    heartbeat: Script
    settle: Script
    cancel: Script
    reclaim: Script
    retry: Script
    purge_dead: Script
    delete: Script
    cooldown: Script
    clear_cooldown: Script
    presence: Script
    admit: Script
    meter_lost: Script
    fold_usage: Script


def raise_for(code: int, job_id: str) -> None:
    """Maps a script's failure code to the exception the caller sees."""
    if code == Code.EXISTS:
        raise JobExistsError(job_id)
    if code == Code.LEASE_LOST:
        raise JobLeaseLostError(job_id)
    if code == Code.GONE:
        raise JobNotFoundError(job_id)
