"""The Docker image (Dockerfile: build the wheel, install ``genq[all]`` from it) serves a
generation and the pages, with the gateway and a worker as two containers of one image.

It needs a Docker engine: where ``docker info`` fails it skips, saying so. The containers use
the host's network, so they reach the test's Redis on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.e2e.browser import LOGS, ROOT, Stack, safe_name, wait_until
from tests.e2e.installed import assert_serves_a_generation_and_the_pages

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def docker(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def engine_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return docker("info", timeout=30).returncode == 0
    except subprocess.TimeoutExpired:
        return False


@pytest.fixture
def image() -> Iterator[str]:
    if not engine_answers():
        pytest.skip("no Docker engine answers (`docker info` failed): the image is not built")
    tag = f"genq-test:{uuid.uuid4().hex[:10]}"
    built = docker("build", "-t", tag, str(ROOT), timeout=1500)
    assert built.returncode == 0, f"docker build failed:\n{built.stdout[-3000:]}{built.stderr}"
    try:
        yield tag
    finally:
        docker("rmi", "-f", tag)


@pytest.fixture
def containers(
    image: str, redis_url: str, request: pytest.FixtureRequest
) -> Iterator[tuple[Stack, list[str]]]:
    stack = Stack(redis_url=redis_url, log_dir=LOGS / safe_name(request.node.name))
    env = {k: v for k, v in stack.env(GENQ_MODELS="demo/fast").items() if k.startswith("GENQ_")}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    flags = ["run", "-d", "--network", "host", *(f"-e{k}={v}" for k, v in env.items())]
    commands = [
        ["genq", "serve", "--host", "127.0.0.1", "--port", str(stack.port)],
        ["genq", "worker"],
    ]
    ids: list[str] = []
    try:
        for command in commands:
            started = docker(*flags, image, *command)
            assert started.returncode == 0, started.stderr
            ids.append(started.stdout.strip())
        yield stack, ids
    finally:
        for container in ids:
            logs = docker("logs", container)
            print(f"--- {container[:12]} ---\n{logs.stdout[-3000:]}{logs.stderr[-3000:]}")
            docker("rm", "-f", container)


def test_docker_image_serves_a_generation_and_the_pages(
    containers: tuple[Stack, list[str]],
) -> None:
    stack, _ = containers

    def ready() -> bool:
        with contextlib.suppress(httpx.HTTPError):
            return httpx.get(f"{stack.base_url}/readyz", timeout=1).status_code == 200
        return False

    wait_until(ready, 120, "the gateway container never got ready")
    assert_serves_a_generation_and_the_pages(stack)
