"""`genq enqueue`, `jobs`, `stats` and `dead` as a user runs them, against a live gateway."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.gateway.conftest import KEY_ADMIN, KEY_ALPHA, LiveGateway, Script, script
from tests.ops.conftest import cli_env, genq

__all__ = ["script"]  # the scripted worker fixture, re-used from the gateway tests

COMMANDS = [
    [],
    ["enqueue"],
    ["jobs"],
    ["jobs", "get"],
    ["jobs", "cancel"],
    ["stats"],
    ["dead"],
    ["dead", "list"],
    ["dead", "retry"],
    ["dead", "purge"],
    ["dead", "watch"],
    ["cooldown"],
    ["cooldown", "clear"],
]


async def test_cli_every_command_has_help() -> None:
    results = await asyncio.gather(
        *(genq(*command, "--help", env=cli_env("http://127.0.0.1:1", None)) for command in COMMANDS)
    )
    for command, result in zip(COMMANDS, results, strict=True):
        assert result.code == 0, (command, result.err)
        assert "Usage: " in result.out and "--help" in result.out, command


async def test_cli_enqueue_prints_the_id_and_jobs_get_watch_streams_it(
    live: LiveGateway, script: Script
) -> None:
    env = cli_env(live.url, KEY_ALPHA)
    created = await genq("enqueue", "--model", "demo/fast", "hello", env=env)
    assert created.code == 0, created.err
    job_id = created.out.strip()
    assert job_id.startswith("demo.") and len(job_id.splitlines()) == 1

    watched = await genq("jobs", "get", job_id, "--watch", env=env)
    assert (watched.code, watched.out) == (0, "t0 t1 t2 \n")

    shown = await genq("jobs", "get", job_id, env=env)
    assert shown.code == 0
    assert f"id: {job_id}" in shown.out and "status: completed" in shown.out
    assert shown.out.rstrip().endswith("t0 t1 t2")
    record = json.loads((await genq("jobs", "get", job_id, "--json", env=env)).out)
    assert (record["status"], record["text"]) == ("completed", "t0 t1 t2 ")


async def test_cli_jobs_get_says_no_progress_before_the_handler_reports_any(
    live: LiveGateway,
) -> None:
    env = cli_env(live.url, KEY_ALPHA)
    created = await genq("enqueue", "--model", "demo/fast", "later", "--delay-ms", "60000", env=env)
    assert created.code == 0, created.err
    shown = await genq("jobs", "get", created.out.strip(), env=env)
    assert "status: scheduled" in shown.out and "progress: no progress" in shown.out


async def test_cli_enqueue_watch_streams_the_text_with_the_id_on_stderr(
    live: LiveGateway, script: Script
) -> None:
    env = cli_env(live.url, KEY_ALPHA)
    meta = json.dumps({"chunks": 4, "delay_ms": 20})
    result = await genq("enqueue", "--model", "demo/fast", "x", "--metadata", meta, "-w", env=env)
    assert (result.code, result.out) == (0, "t0 t1 t2 t3 \n")
    assert result.err.strip().startswith("demo.")


async def test_cli_watch_progress_shows_a_bar_and_keeps_stdout_clean(
    live: LiveGateway, script: Script
) -> None:
    env = cli_env(live.url, KEY_ALPHA)
    result = await genq("enqueue", "--model", "demo/fast", "x", "--watch", "--progress", env=env)
    assert result.code == 0, result.err
    assert result.out == ""
    assert "completed" in result.err and "100%" in result.err and "9 chars" in result.err


async def test_cli_jobs_get_exit_code_says_how_the_job_ended(
    live: LiveGateway, script: Script
) -> None:
    env = cli_env(live.url, KEY_ALPHA)
    failing = json.dumps({"fail": "model exploded"})
    failed = await genq("enqueue", "--model", "demo/fast", "x", "--metadata", failing, env=env)
    result = await genq("jobs", "get", failed.out.strip(), "--watch", env=env)
    assert result.code == 1
    assert "failed: model exploded" in result.err

    gated = json.dumps({"gate": "g", "gate_at": 1})
    running = await genq("enqueue", "--model", "demo/fast", "x", "--metadata", gated, env=env)
    job_id = running.out.strip()
    await asyncio.wait_for(script.started_event(job_id).wait(), 10)
    unfinished = await genq("jobs", "get", job_id, env=env)
    assert unfinished.code == 3 and "status: active" in unfinished.out

    cancelled = await genq("jobs", "cancel", job_id, env=env)
    assert cancelled.code == 0 and f"{job_id} cancelled" in cancelled.out
    watched = await genq("jobs", "get", job_id, "--watch", env=env)
    assert (watched.code, watched.out, watched.err.strip()) == (2, "t0 \n", "cancelled")

    again = await genq("jobs", "cancel", failed.out.strip(), env=env)
    assert again.code == 1 and "not cancelled (status: failed)" in again.out


async def test_cli_stats_prints_a_table_per_queue(live: LiveGateway, script: Script) -> None:
    user = cli_env(live.url, KEY_ALPHA)
    delayed = ("enqueue", "--model", "other/model", "x", "--delay-ms", "600000")
    assert (await genq(*delayed, env=user)).code == 0

    result = await genq("stats", env=cli_env(live.url, KEY_ADMIN))
    assert result.code == 0, result.err
    rows = {line.split("│")[1].strip(): line for line in result.out.splitlines() if "│" in line}
    assert {"demo", "other"} <= set(rows)
    cells = [cell.strip() for cell in rows["other"].split("│")[1:-1]]
    assert cells[:5] == ["other", "0", "1", "0", "0"]  # name, waiting, scheduled, active, dead

    denied = await genq("stats", env=user)
    assert denied.code == 4
    assert denied.err.count("\n") == 1 and "403" in denied.err and "Traceback" not in denied.err


async def test_cli_dead_list_retry_and_purge(live: LiveGateway, script: Script) -> None:
    user, admin = cli_env(live.url, KEY_ALPHA), cli_env(live.url, KEY_ADMIN)
    failing = ("enqueue", "--model", "demo/fast", "x", "--metadata", '{"fail": "boom"}')
    ids = [(await genq(*failing, env=user)).out.strip() for _ in range(2)]
    for job_id in ids:
        assert (await genq("jobs", "get", job_id, "-w", env=user)).code == 1

    listed = await genq("dead", "list", env=admin)
    assert listed.code == 0, listed.err
    assert {line.split()[0] for line in listed.out.splitlines()} == set(ids)
    assert all("terminal" in line or "boom" in line for line in listed.out.splitlines())
    assert "2 dead job(s)" in listed.err

    script.healed.add(ids[0])
    retried = await genq("dead", "retry", ids[0], env=admin)
    assert (retried.code, retried.out.strip()) == (0, "retried 1 dead job(s)")
    assert (await genq("jobs", "get", ids[0], "--watch", env=user)).code == 0

    not_dead = await genq("dead", "retry", ids[0], env=admin)
    assert not_dead.code == 1 and "1 id(s) were not dead letters" in not_dead.err

    purged = await genq("dead", "purge", "--all", env=admin)
    assert (purged.code, purged.out.strip()) == (0, "purged 1 dead job(s)")
    assert (await genq("dead", "list", "--json", env=admin)).out.count('"id"') == 0
    gone = await genq("jobs", "get", ids[1], env=user)
    assert gone.code == 4 and "404" in gone.err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("jobs", "get", "demo.0123456789abcdef0123456789abcdef"), "gateway answered 404"),
        (("dead", "retry"), "give job ids or --all"),
        (("dead", "purge", "nodot"), "is not a generation id"),
        (("enqueue", "--model", "nope/x", "hi"), "gateway answered 422"),
        (("enqueue", "--model", "demo/fast", "hi", "--metadata", "[1]"), "JSON object"),
    ],
)
async def test_cli_errors_are_one_line_and_exit_non_zero(
    live: LiveGateway, args: tuple[str, ...], message: str
) -> None:
    result = await genq(*args, env=cli_env(live.url, KEY_ADMIN))
    assert result.code == 4, result
    assert result.err.count("\n") == 1 and message in result.err, result.err
    assert "Traceback" not in result.err + result.out


async def test_cli_unreachable_gateway_or_missing_key_is_one_line() -> None:
    down = await genq("jobs", "get", "demo.x", env=cli_env("http://127.0.0.1:9", "k"))
    assert down.code == 4
    assert down.err.startswith("error: cannot reach the gateway at http://127.0.0.1:9")
    assert down.err.count("\n") == 1
    keyless = await genq("stats", env=cli_env("http://127.0.0.1:9", None))
    assert keyless.code == 4 and "GENQ_API_KEY is not set" in keyless.err


async def test_cli_jobs_get_watch_shows_tool_calls_and_reasoning(
    live: LiveGateway, script: Script
) -> None:
    env = cli_env(live.url, KEY_ALPHA)
    meta = json.dumps({"chunks": 2, "parts": True})
    created = await genq("enqueue", "--model", "demo/fast", "x", "--metadata", meta, env=env)
    watched = await genq("jobs", "get", created.out.strip(), "--watch", env=env)
    assert watched.code == 0, watched.err
    call = 'tool call get_weather call_1: {"city": "Paris"}'
    assert watched.out == f"t0 t1 \n{call}\n"  # the answer on stdout ...
    assert watched.err.startswith("Thinking.")  # ... the reasoning on stderr


def test_cli_show_prints_a_records_reasoning_and_tool_calls(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from genq_cli.jobs import show
    from tests.gateway.conftest import PARTS_RESULT

    show({"id": "demo.1", "status": "completed", "text": "t0 ", **PARTS_RESULT})
    shown = capsys.readouterr().out
    assert "reasoning:\nThinking.\n\nt0 \n\ntool call get_weather call_1: " in shown
    assert shown.rstrip().endswith('{"city": "Paris"}')
