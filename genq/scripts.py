"""The Lua scripts: loading, and the return codes they share.

Each state change is one file in ``genq/lua``. ``_lib.lua`` holds helpers every script uses; it
is spliced in right after each script's ``#!lua`` line, since Redis has no include.
``register_script`` loads each once and reloads it after a server restart (NOSCRIPT).
"""

from __future__ import annotations

from enum import IntEnum
from importlib import resources

from redis.commands.core import AsyncScript

from .connection import RedisClient
from .errors import JobExistsError, JobLeaseLostError, JobNotFoundError

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
)


class Code(IntEnum):
    OK = 0
    DEDUPLICATED = 1
    EXISTS = 2
    GONE = 3
    LEASE_LOST = 4
    CANCEL_REQUESTED = 5
    STALE_READ = 6


def source(name: str) -> str:
    lua = resources.files("genq") / "lua"
    text = (lua / f"{name}.lua").read_text()
    shebang, _, body = text.partition("\n")
    return f"{shebang}\n{(lua / '_lib.lua').read_text()}\n{body}"


class Scripts:
    """One registered script per state change, bound to a client."""

    def __init__(self, redis: RedisClient) -> None:
        for name in NAMES:
            setattr(self, name, redis.register_script(source(name)))

    enqueue: AsyncScript
    pick: AsyncScript
    activate: AsyncScript
    emit: AsyncScript
    heartbeat: AsyncScript
    settle: AsyncScript
    cancel: AsyncScript
    reclaim: AsyncScript
    retry: AsyncScript
    purge_dead: AsyncScript
    delete: AsyncScript
    cooldown: AsyncScript
    clear_cooldown: AsyncScript
    presence: AsyncScript


def raise_for(code: int, job_id: str) -> None:
    """Maps a script's failure code to the exception the caller sees."""
    if code == Code.EXISTS:
        raise JobExistsError(job_id)
    if code == Code.LEASE_LOST:
        raise JobLeaseLostError(job_id)
    if code == Code.GONE:
        raise JobNotFoundError(job_id)
