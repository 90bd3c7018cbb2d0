"""``genq dev``: the whole stack on one machine, for trying genq by hand.

Starts an embedded Valkey when ``GENQ_REDIS_URL`` is unset, then the gateway and one worker
process serving the built-in demo models, waits until the gateway is ready and prints the page's
URL. Ctrl-C (or SIGTERM) drains the worker and stops everything, leaving no process behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from workers.lifetime import die_with_parent

from .embedded_redis import EmbeddedRedis

DEV_DEFAULTS = {
    "GENQ_DEV": "1",
    "GENQ_LOG_LEVEL": "INFO",
}


@contextlib.contextmanager
def redis_for_dev() -> Iterator[str]:
    url = os.environ.get("GENQ_REDIS_URL")
    if url:
        yield url
        return
    data = Path(".genq")
    data.mkdir(exist_ok=True)
    # Dev data survives a restart of `make dev`: append-only file, fsync every second.
    with EmbeddedRedis(data_dir=data, appendonly="yes", appendfsync="everysec") as server:
        print(f"embedded Valkey on {server.url} (data in {data}/)", flush=True)
        yield server.url


def spawn(args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(args, env=env, preexec_fn=die_with_parent)


def wait_ready(url: str, processes: list[subprocess.Popen[bytes]], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for process in processes:
            if process.poll() is not None:
                args = process.args if isinstance(process.args, list) else [process.args]
                raise RuntimeError(f"{args[:3]} exited with {process.returncode}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return
        time.sleep(0.2)
    raise TimeoutError(f"the gateway at {url} was not ready after {timeout}s")


def stop(processes: list[subprocess.Popen[bytes]], grace: float = 30) -> None:
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for process in processes:
        try:
            process.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def run_dev(host: str = "127.0.0.1", port: int = 8000) -> None:
    with redis_for_dev() as redis_url:
        env = {**DEV_DEFAULTS, **os.environ, "GENQ_REDIS_URL": redis_url}
        # `genq serve`, not uvicorn's own command: it passes uvicorn the connection limits.
        gateway = spawn(
            [
                sys.executable,
                "-m",
                "genq_cli",
                "serve",
                "--host",
                host,
                "--port",
                str(port),
                "--log-level",
                "warning",
            ],
            env,
        )
        worker = spawn([sys.executable, "-m", "workers"], env)
        processes = [gateway, worker]
        signal.signal(signal.SIGTERM, _interrupt)
        try:
            url = f"http://{host}:{port}"
            wait_ready(url, processes)
            dev = env.get("GENQ_DEV") == "1"
            print(f"\n  genq is running: {url}/   (operations: {url}/admin)", flush=True)
            if dev:
                print("  dev keys: genq-dev-key (user), genq-dev-admin-key (admin)", flush=True)
            print("  Ctrl-C stops everything.\n", flush=True)
            while all(p.poll() is None for p in processes):
                time.sleep(0.5)
            raise RuntimeError("a genq process exited; stopping the others")
        except KeyboardInterrupt:
            print("\nstopping (draining the worker)...", flush=True)
        finally:
            stop(processes)
