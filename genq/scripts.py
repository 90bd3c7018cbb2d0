"""The Lua scripts: loading, and the return codes they share.

Each state change is one file in ``genq/lua``. ``_lib.lua`` holds the helpers the scripts share;
since Redis has no include, the ones a script uses (and the ones those use) are spliced in right
after its ``#!lua`` line. Only those: the server runs a script's whole text on every call, and
defining every helper cost each call about as much as two ``redis.call`` commands.
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

from .connection import RedisClient
from .errors import JobExistsError, JobLeaseLostError, JobNotFoundError
from .streamed import pooled, run_streamed

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
)


class Code(IntEnum):
    OK = 0
    DEDUPLICATED = 1
    EXISTS = 2
    GONE = 3
    LEASE_LOST = 4
    CANCEL_REQUESTED = 5
    STALE_READ = 6


DEFINITION = re.compile(r"^local (?:function )?([A-Za-z_]\w*)", re.MULTILINE)
WORD = re.compile(r"[A-Za-z_]\w*")
COMMENT = re.compile(r"--\[\[.*?\]\]|--[^\n]*", re.DOTALL)


def names_in(lua: str) -> set[str]:
    """The words of ``lua``'s code (comments left out: a helper they mention is not a use)."""
    return set(WORD.findall(COMMENT.sub("", lua)))


@cache
def helpers() -> tuple[str, dict[str, str]]:
    """``_lib.lua`` cut into its top-level definitions, each with the comments just above it:
    (what comes before the first, {name: its text})."""
    lines = (resources.files("genq") / "lua" / "_lib.lua").read_text().splitlines(keepends=True)
    commentary, in_block = [], False
    for line in lines:
        in_block = in_block or line.startswith("--[[")
        commentary.append(in_block or line.startswith("--") or not line.strip())
        in_block = in_block and "]]" not in line
    cuts: list[tuple[int, str]] = []
    for i, line in enumerate(lines):
        if (m := DEFINITION.match(line)) and not commentary[i]:
            start = i
            while start > 0 and commentary[start - 1]:
                start -= 1
            cuts.append((start, m.group(1)))
    ends = [start for start, _ in cuts[1:]] + [len(lines)]
    pieces = {name: "".join(lines[a:b]) for (a, name), b in zip(cuts, ends, strict=True)}
    return "".join(lines[: cuts[0][0]]), pieces


@cache
def source(name: str) -> str:
    """The script's text with the helpers it needs spliced in, in ``_lib.lua``'s order (made
    once per process: every queue's ``Scripts`` registers the same texts)."""
    text = (resources.files("genq") / "lua" / f"{name}.lua").read_text()
    shebang, _, body = text.partition("\n")
    preamble, pieces = helpers()
    needed: set[str] = set()
    pending = names_in(body) & pieces.keys()
    while pending:
        needed |= pending
        pending = set().union(*(names_in(pieces[n]) for n in pending)) & pieces.keys() - needed
    lib = "".join(piece for n, piece in pieces.items() if n in needed)
    return f"{shebang}\n{preamble}{lib}\n{body}"


class Script(AsyncScript):
    """A registered script whose calls on a single node's pooled client skip redis-py's
    per-command bookkeeping (:func:`genq.streamed.run_streamed`); on a cluster, a client holding
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
        (reply,) = await run_streamed(client, self, [(keys or (), tuple(args or ()))])
        return reply


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


def raise_for(code: int, job_id: str) -> None:
    """Maps a script's failure code to the exception the caller sees."""
    if code == Code.EXISTS:
        raise JobExistsError(job_id)
    if code == Code.LEASE_LOST:
        raise JobLeaseLostError(job_id)
    if code == Code.GONE:
        raise JobNotFoundError(job_id)
