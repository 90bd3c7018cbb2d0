"""`genq serve` and `genq keys` as a user runs them."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import httpx

from gateway.access.auth import hash_key
from tests.gateway.conftest import KEY_ALPHA, SECRET
from tests.ports import free_port

# `python -m genq_cli` is what the `genq` console script runs (pyproject: genq_cli.main:app).
GENQ = [sys.executable, "-m", "genq_cli"]


def _env(redis_url: str, prefix: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GENQ_")}
    env.update(GENQ_REDIS_URL=redis_url, GENQ_QUEUE_NAMESPACE=prefix, GENQ_SECRET=SECRET)
    env["GENQ_MODELS"] = "demo/fast"  # production's default allow-list has no demo models
    return env


def _start_serve(redis_url: str, prefix: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = _env(redis_url, prefix)
    env["GENQ_API_KEYS"] = f'{{"sha256:{hash_key(KEY_ALPHA)}": "alpha"}}'
    server = subprocess.Popen(
        [*GENQ, "serve", "--port", str(port), "--log-level", "warning"], env=env
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while True:
        try:
            httpx.get(f"{url}/healthz", timeout=1)
            return server, url
        except httpx.TransportError:
            assert server.poll() is None, "genq serve exited"
            assert time.monotonic() < deadline, "genq serve did not start"
            time.sleep(0.1)


def _stop(server: subprocess.Popen[bytes]) -> int:
    if server.poll() is None:
        server.terminate()
    return server.wait(15)


def test_cli_serve_starts_the_gateway_and_stops_on_sigterm(redis_url: str, prefix: str) -> None:
    server, url = _start_serve(redis_url, prefix)
    try:
        assert httpx.get(f"{url}/readyz", timeout=5).json() == {"status": "ready"}
    finally:
        # uvicorn shuts down gracefully, then re-raises the signal it caught.
        assert _stop(server) in (0, -signal.SIGTERM)


def test_cli_serve_sigterm_ends_open_streams_at_once(redis_url: str, prefix: str) -> None:
    """uvicorn waits for open connections before shutting the app down: the gateway must end
    its SSE streams itself (clients resume elsewhere with Last-Event-ID)."""
    server, url = _start_serve(redis_url, prefix)
    try:
        auth = {"Authorization": f"Bearer {KEY_ALPHA}"}
        body = {"model": "demo/fast", "prompt": "x", "delay_ms": 60_000}
        job = httpx.post(f"{url}/v1/generations", json=body, headers=auth).json()["id"]
        with httpx.stream(
            "GET", f"{url}/v1/generations/{job}/events", headers=auth, timeout=30
        ) as stream:
            lines = stream.iter_lines()
            assert next(lines).startswith("retry:")
            started = time.monotonic()
            server.terminate()
            rest: list[str] = []
            # sse-starlette ends the stream at shutdown; the connection may close mid-chunk,
            # which an EventSource treats as a drop and resumes elsewhere with Last-Event-ID.
            with contextlib.suppress(httpx.RemoteProtocolError):
                rest.extend(lines)
        assert time.monotonic() - started < 3
        assert not any(line.startswith("event:") for line in rest)
    finally:
        assert _stop(server) in (0, -signal.SIGTERM)
        assert time.monotonic() - started < 5


def test_cli_serve_refuses_to_start_without_a_secret(redis_url: str, prefix: str) -> None:
    env = _env(redis_url, prefix)
    del env["GENQ_SECRET"]
    done = subprocess.run(
        [*GENQ, "serve", "--port", str(free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode != 0
    assert "GENQ_SECRET is required" in done.stderr


def test_cli_keys_create_list_revoke(redis_url: str, prefix: str) -> None:
    from tests.gateway.conftest import LiveGateway, make_settings

    env = _env(redis_url, prefix)
    created = subprocess.run(
        [*GENQ, "keys", "create", "--tenant", "acme"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    api_key = created.stdout.strip()
    assert api_key.startswith("gq_")
    listed = subprocess.run(
        [*GENQ, "keys", "list"], env=env, capture_output=True, text=True, timeout=30, check=True
    )
    digest_prefix, tenant, role = listed.stdout.split()
    assert (tenant, role) == ("acme", "user")
    assert api_key not in listed.stdout

    with LiveGateway(make_settings(redis_url, prefix)) as live:
        auth = {"Authorization": f"Bearer {api_key}"}
        body = {"model": "demo/fast", "prompt": "x", "delay_ms": 60_000}
        assert httpx.post(f"{live.url}/v1/generations", json=body, headers=auth).status_code == 202
        subprocess.run(
            [*GENQ, "keys", "revoke", digest_prefix],
            env=env,
            timeout=30,
            check=True,
            capture_output=True,
        )
        assert httpx.post(f"{live.url}/v1/generations", json=body, headers=auth).status_code == 401
