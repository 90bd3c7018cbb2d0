"""compose.yaml, run without Docker: each service's command as a local process.

Redis runs with exactly the compose command's flags (plus a free port and a temporary data
dir); the gateway and a worker run their compose commands with the compose environment,
``redis:6379`` rewritten to the local server. A generation then goes through them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from gateway.access.auth import hash_key
from tests.ports import free_port
from workers.settings import WorkerSettings

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
API_KEY = "compose-test-key-1f2e3d"
_VAR = re.compile(r"\$\{(?P<name>\w+)(?:(?P<op>:[-?])(?P<arg>[^}]*))?\}")


def interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's ``${VAR}``, ``${VAR:-default}`` and ``${VAR:?message}``."""

    def one(match: re.Match[str]) -> str:
        name, op, arg = match["name"], match["op"], match["arg"]
        if env.get(name):
            return env[name]
        if op == ":?":
            raise KeyError(f"{name}: {arg}")
        return arg if op == ":-" else ""

    return _VAR.sub(one, value)


def compose() -> dict[str, Any]:
    return dict(yaml.safe_load((ROOT / "compose.yaml").read_text()))


def service_env(service: dict[str, Any], env: dict[str, str], redis_port: int) -> dict[str, str]:
    values = {k: interpolate(str(v), env) for k, v in service.get("environment", {}).items()}
    return {k: v.replace("redis:6379", f"127.0.0.1:{redis_port}") for k, v in values.items()}


def local(command: list[str]) -> list[str]:
    """A compose command as a local process: ``genq`` from this venv."""
    return [str(BIN / "genq"), *command[1:]] if command[0] == "genq" else command


def test_compose_requires_the_secrets_and_lets_workers_scale() -> None:
    services = compose()["services"]
    assert set(services) >= {"redis", "gateway", "worker"}
    gateway_env = services["gateway"]["environment"]
    for name in ("GENQ_SECRET", "GENQ_API_KEYS"):
        with pytest.raises(KeyError, match=name):
            interpolate(gateway_env[name], {})
    worker = services["worker"]
    # `--scale worker=N` needs no fixed name and no published port
    assert "container_name" not in worker and "ports" not in worker
    assert worker["command"] == ["genq", "worker"]
    assert services["gateway"]["command"][:4] == ["genq", "serve", "--host", "0.0.0.0"]
    assert (ROOT / "Dockerfile").read_text().startswith("# The genq image")
    assert "FROM python:3.11-slim" in (ROOT / "Dockerfile").read_text()
    assert "[all]" in (ROOT / "Dockerfile").read_text()  # the image installs the built wheel


def test_compose_grace_period_outlasts_the_worker_drain() -> None:
    """`docker compose stop` (a deploy) must not SIGKILL a worker still draining."""
    grace = duration_seconds(compose()["services"]["worker"]["stop_grace_period"])
    drain = WorkerSettings().drain_deadline
    assert drain >= 600  # long generations finish instead of being handed back (re-billed)
    assert drain < grace <= drain + 60


def duration_seconds(value: str) -> float:
    """Compose's duration (``630s``, ``10m30s``) in seconds."""
    units = {"h": 3600, "m": 60, "s": 1}
    parts = re.findall(r"(\d+(?:\.\d+)?)([hms])", value)
    assert parts and "".join(n + u for n, u in parts) == value, value
    return sum(float(n) * units[u] for n, u in parts)


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    running: list[subprocess.Popen[bytes]] = []
    yield running
    for process in reversed(running):
        if process.poll() is None:
            process.terminate()
    for process in running:
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def wait_for(
    check: Any, what: str, processes: list[subprocess.Popen[bytes]], timeout: float
) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = check()
            if result:
                return result
        except (httpx.HTTPError, OSError, subprocess.SubprocessError):
            pass
        for process in processes:
            assert process.poll() is None, f"{process.args} exited while waiting for {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_compose_services_run_a_generation(
    tmp_path: Path, prefix: str, processes: list[subprocess.Popen[bytes]]
) -> None:
    services = compose()["services"]
    base = {k: v for k, v in os.environ.items() if not k.startswith("GENQ_")}
    outer = {
        "GENQ_SECRET": "compose-test-secret-0123456789abcdef",
        "GENQ_API_KEYS": json.dumps({f"sha256:{hash_key(API_KEY)}": "acme"}),
        "GENQ_QUEUE_NAMESPACE": prefix,
        "GENQ_MODELS": "demo/fast",  # production's default has no demo models
    }

    redis = services["redis"]
    redis_port = free_port()
    flags = redis["command"][1:]
    assert redis["command"][0] == "redis-server"
    processes.append(
        subprocess.Popen(
            [REDIS_SERVER, *flags, "--port", str(redis_port), "--dir", str(tmp_path)],
            stdout=subprocess.DEVNULL,
        )
    )
    cli, *args = redis["healthcheck"]["test"][1:]  # ["CMD", "redis-cli", "ping"]
    cli = shutil.which(cli) or f"/usr/bin/{cli}"
    health = [cli, "-p", str(redis_port), *args]
    ping = wait_for(
        lambda: subprocess.run(health, capture_output=True, timeout=2).stdout.strip() == b"PONG",
        "the redis health check",
        processes,
        10,
    )
    assert ping
    config = subprocess.run(
        [cli, "-p", str(redis_port), "config", "get", "*"], capture_output=True, check=True
    ).stdout.decode()
    pairs = dict(zip(*[iter(config.split("\n"))] * 2, strict=False))
    assert pairs["appendonly"] == "yes" and pairs["appendfsync"] == "everysec"
    assert pairs["maxmemory-policy"] == "noeviction" and int(pairs["maxmemory"]) > 0

    port = free_port()
    gateway = services["gateway"]
    command = [str(port) if arg == "8000" else arg for arg in local(gateway["command"])]
    command = [("127.0.0.1" if arg == "0.0.0.0" else arg) for arg in command]
    env = {**base, **service_env(gateway, outer, redis_port)}
    processes.append(subprocess.Popen(command, env=env))
    url = f"http://127.0.0.1:{port}"
    # The gateway first, and alone: started beside the worker it shared the cores with the
    # worker's LiteLLM imports (one process per core) and missed its budget in a loaded test
    # run. Alone it needs a fraction of this budget, which is Stack.start_gateway's (loaded runs).
    wait_for(lambda: httpx.get(f"{url}/readyz").status_code == 200, "the gateway", processes, 30)

    # Compose starts the worker once the gateway has started (`depends_on`); one process is
    # enough for one generation (`--processes` has its own test, tests/workers/test_supervise.py).
    worker = services["worker"]
    env = {**base, **service_env(worker, outer, redis_port), "GENQ_LOG_LEVEL": "WARNING"}
    processes.append(subprocess.Popen([*local(worker["command"]), "--processes", "1"], env=env))
    auth = {"Authorization": f"Bearer {API_KEY}"}
    body = {"model": "demo/fast", "prompt": "compose", "params": {"demo_tokens": 6}}
    created = httpx.post(f"{url}/v1/generations", json=body, headers=auth)
    assert created.status_code == 202, created.text
    job_id = created.json()["id"]

    types, text = [], ""
    with httpx.stream(
        "GET", f"{url}/v1/generations/{job_id}/events", headers=auth, timeout=30
    ) as events:
        for line in events.iter_lines():
            if line.startswith("event:"):
                types.append(line.split(":", 1)[1].strip())
            if line.startswith("data:") and types and types[-1] == "chunk":
                data = json.loads(line[5:])
                text += data if isinstance(data, str) else data.get("text", "")
            if types and types[-1] == "completed":
                break
    assert types[-1] == "completed" and types.count("chunk") >= 1
    result = httpx.get(f"{url}/v1/generations/{job_id}/result", headers=auth, timeout=10).json()
    assert result["status"] == "completed"
    assert result["text"] == text and result["text"].startswith("Echo: compose")
