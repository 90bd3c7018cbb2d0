"""`genq jobs list|cancel|retry|delete --queue` (an operator's key) run as processes against a
live gateway; the queue's state is read back from Redis afterwards."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis

from genq import JobStatus
from tests.gateway.conftest import KEY_ADMIN, KEY_ALPHA, KEY_BETA, LiveGateway, queue_for
from tests.ops.conftest import GENQ, Result, cli_env, genq

LATER = {"model": "demo/fast", "prompt": "x", "delay_ms": 600_000}


async def _enqueue(live: LiveGateway, key: str, n: int) -> list[str]:
    """``n`` scheduled generations of the key's tenant, oldest first."""
    async with httpx.AsyncClient(
        base_url=live.url, headers={"Authorization": f"Bearer {key}"}
    ) as http:
        return [(await http.post("/v1/generations", json=LATER)).json()["id"] for _ in range(n)]


async def _statuses(redis: aioredis.Redis, prefix: str, ids: list[str]) -> list[str | None]:
    queue = queue_for(redis, prefix)
    jobs = [await queue.get(job_id) for job_id in ids]
    return [job.status.value if job else None for job in jobs]


async def _audit(live: LiveGateway) -> list[dict[str, Any]]:
    auth = {"Authorization": f"Bearer {KEY_ADMIN}"}
    async with httpx.AsyncClient(base_url=live.url, headers=auth) as http:
        return list((await http.get("/v1/audit")).json()["entries"])


async def _genq_with_input(*args: str, env: dict[str, str], answer: str) -> Result:
    process = await asyncio.create_subprocess_exec(
        *GENQ,
        *args,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(answer.encode()), 20)
    assert process.returncode is not None
    return Result(process.returncode, out.decode(), err.decode())


async def test_cli_jobs_operator_commands_have_help() -> None:
    env = cli_env("http://127.0.0.1:1", None)
    for command in ("list", "cancel", "retry", "delete"):
        result = await genq("jobs", command, "--help", env=env)
        assert result.code == 0 and "--queue" in result.out, (command, result.err)


async def test_cli_jobs_list_filters_pages_and_prints_json_lines(live: LiveGateway) -> None:
    admin = cli_env(live.url, KEY_ADMIN)
    alphas = await _enqueue(live, KEY_ALPHA, 3)
    betas = await _enqueue(live, KEY_BETA, 1)
    newest_first = [*reversed(alphas + betas)]

    every = await genq("jobs", "list", "--queue", "demo", "--json", env=admin)
    assert every.code == 0, every.err
    rows = [json.loads(line) for line in every.out.splitlines()]
    assert [r["id"] for r in rows] == newest_first
    assert {(r["queue"], r["status"]) for r in rows} == {("demo", "scheduled")}
    assert [r["tenant"] for r in rows] == ["beta", "alpha", "alpha", "alpha"]

    theirs = await genq(
        "jobs",
        "list",
        "--queue",
        "demo",
        "--tenant",
        "alpha",
        "--json",
        "--status",
        "scheduled",
        "--model",
        "demo/fast",
        env=admin,
    )
    assert [json.loads(line)["id"] for line in theirs.out.splitlines()] == alphas[::-1]
    other_model = await genq(
        "jobs", "list", "--queue", "demo", "--model", "x/y", "--json", env=admin
    )
    assert (other_model.code, other_model.out) == (0, "")
    none_done = await genq(
        "jobs", "list", "--queue", "demo", "--status", "completed", "--json", env=admin
    )
    assert (none_done.code, none_done.out) == (0, "")

    # One page of a table, and how to get the next; --all-pages walks them all.
    page = await genq("jobs", "list", "--queue", "demo", "--limit", "2", env=admin)
    assert page.code == 0, page.err
    assert "jobs in demo" in page.out
    assert [i for i in newest_first if i in page.out] == newest_first[:2]
    assert "more: --cursor " in page.err and "4 scheduled" in page.err
    cursor = page.err.split("more: --cursor ")[1].split()[0]
    rest = await genq(
        "jobs", "list", "--queue", "demo", "--limit", "2", "--cursor", cursor, "--json", env=admin
    )
    assert [json.loads(line)["id"] for line in rest.out.splitlines()] == newest_first[2:]
    walked = await genq(
        "jobs", "list", "--queue", "demo", "--limit", "1", "--all-pages", "--json", env=admin
    )
    assert [json.loads(line)["id"] for line in walked.out.splitlines()] == newest_first
    assert "more:" not in walked.err


async def test_cli_jobs_cancel_retry_delete_ids_with_a_reason(
    live: LiveGateway, redis: aioredis.Redis, prefix: str
) -> None:
    admin = cli_env(live.url, KEY_ADMIN)
    first, second, kept = await _enqueue(live, KEY_ALPHA, 3)

    cancelled = await genq(
        "jobs", "cancel", first, second, "--queue", "demo", "--reason", "customer asked", env=admin
    )
    assert (cancelled.code, cancelled.out.strip()) == (
        0,
        "cancelled 2 of 2 matching job(s) in demo",
    )
    assert await _statuses(redis, prefix, [first, second, kept]) == [
        "cancelled",
        "cancelled",
        "scheduled",
    ]
    entry = (await _audit(live))[0]
    assert (entry["action"], entry["queue"], entry["reason"]) == (
        "cancel",
        "demo",
        "customer asked",
    )
    assert sorted(entry["ids"]) == sorted([first, second])

    again = await genq("jobs", "cancel", first, "--queue", "demo", env=admin)
    assert again.code == 1 and "cancelled 0 of 1" in again.out

    retried = await genq("jobs", "retry", first, "--queue", "demo", env=admin)
    assert (retried.code, retried.out.strip()) == (0, "retried 1 of 1 matching job(s) in demo")
    assert await _statuses(redis, prefix, [first]) == ["waiting"]  # no worker: it waits
    not_failed = await genq("jobs", "retry", kept, "--queue", "demo", env=admin)
    assert not_failed.code == 1
    assert await _statuses(redis, prefix, [kept]) == ["scheduled"]

    deleted = await genq("jobs", "delete", second, kept, "--queue", "demo", env=admin)
    assert deleted.code == 1 and "deleted 1 of 2" in deleted.out  # kept has not finished
    assert await _statuses(redis, prefix, [second, kept]) == [None, "scheduled"]

    unknown = await genq("jobs", "delete", "demo." + "0" * 32, "--queue", "demo", env=admin)
    assert unknown.code == 1 and "1 id(s) are not jobs of demo" in unknown.err

    # Without --queue, `jobs cancel ID` is still a tenant cancelling its own generation.
    own = await genq("jobs", "cancel", kept, env=cli_env(live.url, KEY_ALPHA))
    assert own.code == 0 and "cancelled" in own.out
    assert await _statuses(redis, prefix, [kept]) == ["cancelled"]


async def test_cli_jobs_bulk_all_asks_first_and_acts_on_the_status(
    live: LiveGateway, redis: aioredis.Redis, prefix: str
) -> None:
    admin = cli_env(live.url, KEY_ADMIN)
    alphas = await _enqueue(live, KEY_ALPHA, 3)
    betas = await _enqueue(live, KEY_BETA, 2)
    bulk = ("--queue", "demo", "--all", "--status", "scheduled", "--tenant", "alpha")

    declined = await _genq_with_input("jobs", "cancel", *bulk, env=admin, answer="n\n")
    assert declined.code == 1
    assert "cancel 3 scheduled job(s) of tenant alpha in demo?" in declined.out
    assert set(await _statuses(redis, prefix, alphas + betas)) == {"scheduled"}

    accepted = await _genq_with_input(
        "jobs", "cancel", *bulk, "--reason", "runaway", env=admin, answer="y\n"
    )
    assert accepted.code == 0, accepted.err
    assert "cancelled 3 of 3 matching job(s) in demo" in accepted.out
    assert await _statuses(redis, prefix, alphas + betas) == ["cancelled"] * 3 + ["scheduled"] * 2
    assert (await _audit(live))[0]["reason"] == "runaway"

    retried = await genq(
        "jobs", "retry", "--queue", "demo", "--all", "--status", "cancelled", "--yes", env=admin
    )
    assert (retried.code, retried.out.strip()) == (0, "retried 3 of 3 matching job(s) in demo")
    assert set(await _statuses(redis, prefix, alphas)) == {"waiting"}

    cancel_all = await genq(
        "jobs", "cancel", "--queue", "demo", "--all", "--status", "waiting", "--yes", env=admin
    )
    assert cancel_all.code == 0 and "cancelled 3 of 3" in cancel_all.out
    deleted = await genq(
        "jobs", "delete", "--queue", "demo", "--all", "--status", "cancelled", "-y", env=admin
    )
    assert (deleted.code, deleted.out.strip()) == (0, "deleted 3 of 3 matching job(s) in demo")
    assert await _statuses(redis, prefix, alphas + betas) == [None] * 3 + ["scheduled"] * 2
    queue = queue_for(redis, prefix)
    assert (await queue.job_counts())[JobStatus.SCHEDULED.value] == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("jobs", "retry", "--queue", "demo"), "give job ids or --all"),
        (("jobs", "delete", "--queue", "demo", "--all"), "--all needs --status"),
        (("jobs", "cancel", "demo.a", "demo.b"), "without --queue, give exactly one id"),
        (("jobs", "list", "--queue", "demo", "--status", "nope"), "gateway answered 400"),
        (("jobs", "list", "--queue", "nope"), "gateway answered 404"),
        (
            ("jobs", "retry", "--queue", "demo", "--all", "--status", "waiting", "--yes"),
            "gateway answered 400",
        ),
    ],
)
async def test_cli_jobs_operator_errors_are_one_line(
    live: LiveGateway, args: tuple[str, ...], message: str
) -> None:
    result = await genq(*args, env=cli_env(live.url, KEY_ADMIN))
    assert result.code == 4, result
    assert result.err.count("\n") == 1 and message in result.err, result.err


async def test_cli_jobs_list_needs_an_admin_key(live: LiveGateway) -> None:
    denied = await genq("jobs", "list", "--queue", "demo", env=cli_env(live.url, KEY_ALPHA))
    assert denied.code == 4 and "403" in denied.err and "Traceback" not in denied.err
