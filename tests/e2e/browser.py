"""The full stack as real processes, and Debian's Chromium driven by Playwright.

A browser test gets:

- ``stack``: the embedded Redis (shared by the session), a gateway (``uvicorn
  gateway.app:create_app --factory``) on a free port and one worker (``python -m workers``),
  all configured through ``GENQ_`` environment variables with a random queue namespace, so
  tests never see each other's jobs. ``stack.start_worker()`` adds workers; ``Proc.kill()``
  SIGKILLs one, as a crash would.
- ``page``: a fresh browser context and page; when the test ends, whatever happened, a
  screenshot goes to ``artifacts/screenshots/<test>.png`` and the processes' logs stay in
  ``artifacts/logs/<test>/``.

Chromium is ``/usr/bin/chromium`` (``.ci/install-browser`` installs it) or ``GENQ_CHROMIUM``.
A missing browser fails the test: it never skips.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx
import pytest

from genq import Keys
from tests.polling import waited_for
from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts"
SCREENSHOTS = ARTIFACTS / "screenshots"
LOGS = ARTIFACTS / "logs"

CHROMIUM = os.environ.get("GENQ_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

DEV_KEY = "genq-dev-key"
DEV_ADMIN_KEY = "genq-dev-admin-key"
DESKTOP = {"width": 1100, "height": 900}
PHONE = {"width": 375, "height": 740}

# Recorded in every page: each distinct (output text, status line) pair, in order, as the DOM
# held them. A MutationObserver sees every state a user could have seen.
RECORDER = """
window.__seen = [];
document.addEventListener("DOMContentLoaded", () => {
  const output = document.getElementById("output");
  const status = document.getElementById("status");
  if (!output || !status) return;
  const record = () => {
    const last = window.__seen[window.__seen.length - 1];
    const now = {text: output.textContent, status: status.textContent};
    if (!last || last.text !== now.text || last.status !== now.status) window.__seen.push(now);
  };
  new MutationObserver(record).observe(document.body,
    {subtree: true, childList: true, characterData: true, attributes: true});
  record();
});
"""


def _die_with_parent() -> None:  # in the child, between fork and exec
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def require_chromium() -> str:
    if not (Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)):
        pytest.fail(
            f"Chromium not found at {CHROMIUM}: run .ci/install-browser (apt install chromium)"
        )
    return CHROMIUM


def safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_")[:120]


@dataclass
class Proc:
    """A child process with its output in a log file; stopped and killed by its own pid."""

    name: str
    args: list[str]
    env: dict[str, str]
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    cwd: Path = ROOT

    def start(self) -> Proc:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.args,
                cwd=self.cwd,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent,
            )
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, chars: int = 3000) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return text[-chars:]

    def kill(self) -> None:
        """SIGKILL: no cleanup, no drain, as a crashed machine would."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
        if self.process is not None:
            self.process.wait(10)

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM (a graceful drain), then SIGKILL if it does not exit in time."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


@dataclass
class Stack:
    """A gateway and its workers, on one Redis, in one random queue namespace."""

    redis_url: str
    log_dir: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    namespace: str = field(default_factory=lambda: f"e2e{uuid.uuid4().hex[:10]}")
    port: int = field(default_factory=free_port)
    gateway: Proc | None = None
    workers: list[Proc] = field(default_factory=list)
    gateway_log_level: str = "warning"
    """uvicorn's ``--log-level``; ``info`` and below also write the access log."""

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self, **overrides: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GENQ_")}
        env.update(
            GENQ_DEV="1",
            GENQ_REDIS_URL=self.redis_url,
            GENQ_QUEUE_NAMESPACE=self.namespace,
            GENQ_MODELS="demo/fast,demo/slow,openai/gpt-4o-mini",
            GENQ_LOG_LEVEL="INFO",
            LITELLM_LOCAL_MODEL_COST_MAP="True",
            PYTHONUNBUFFERED="1",
        )
        env.update(self.extra_env)
        env.update(overrides)
        return env

    def start_gateway(self, timeout: float = 30.0) -> Proc:
        args = [
            sys.executable,
            "-m",
            "uvicorn",
            "gateway.app:create_app",
            "--factory",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--log-level",
            self.gateway_log_level,
        ]
        self.gateway = Proc("gateway", args, self.env(), self.log_dir / "gateway.log").start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.gateway.alive:
                raise RuntimeError(f"the gateway exited:\n{self.gateway.log_tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.base_url}/readyz", timeout=1).status_code == 200:
                    return self.gateway
            time.sleep(0.05)
        raise TimeoutError(f"the gateway was not ready in {timeout}s:\n{self.gateway.log_tail()}")

    def start_worker(self, **env: str) -> Proc:
        name = f"worker{len(self.workers) + 1}"
        args = [sys.executable, "-m", "workers"]
        worker = Proc(name, args, self.env(**env), self.log_dir / f"{name}.log").start()
        self.workers.append(worker)
        return worker

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop()
        if self.gateway is not None:
            self.gateway.stop()

    def logs(self) -> str:
        procs = [p for p in [self.gateway, *self.workers] if p is not None]
        return "\n".join(
            f"--- {p.name} (pid {p.process.pid if p.process else '-'}) ---\n{p.log_tail()}"
            for p in procs
        )

    # -- talking to it as a server would ------------------------------------------------

    def client(self, admin: bool = False) -> httpx.Client:
        key = DEV_ADMIN_KEY if admin else DEV_KEY
        return httpx.Client(
            base_url=self.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=40
        )

    def result(self, job_id: str, timeout: float = 60.0) -> dict[str, Any]:
        """The terminal record (``GET .../result``, asked again while it answers 202), failing
        if it did not end in time. The default leaves room for a worker just started: on a
        loaded 2-core machine its imports (LiteLLM) have taken 28 s."""
        deadline = time.monotonic() + timeout
        with self.client() as client:
            while True:
                wait = max(0.0, min(30.0, deadline - time.monotonic()))
                response = client.get(f"/v1/generations/{job_id}/result", params={"timeout": wait})
                if response.status_code != 202 or time.monotonic() >= deadline:
                    break
        assert response.status_code == 200, (
            f"{job_id} did not finish: {response.status_code} {response.text}"
        )
        return dict(response.json())

    def record(self, job_id: str) -> dict[str, Any]:
        with self.client() as client:
            response = client.get(f"/v1/generations/{job_id}")
        response.raise_for_status()
        return dict(response.json())

    def submit(self, body: dict[str, Any], key: str | None = None) -> dict[str, Any]:
        headers = {"Idempotency-Key": key} if key else {}
        with self.client() as client:
            response = client.post("/v1/generations", json=body, headers=headers)
        assert response.status_code in (200, 202), response.text
        return dict(response.json())

    def queue_prefix(self, provider: str) -> str:
        """A provider's genq queue prefix: ``<namespace>:<provider>`` (genq_contract.routing)."""
        return f"{self.namespace}:{provider}"

    def job_keys(self, provider: str) -> list[str]:
        """The job records of a provider's queue, read straight from Redis."""
        import redis

        client = redis.Redis.from_url(self.redis_url)
        try:
            pattern = Keys(self.queue_prefix(provider)).job("*")
            return sorted(k.decode() for k in client.scan_iter(match=pattern, count=1000))
        finally:
            client.close()


def fake_openai_env(base_url: str, api_key: str = "sk-e2e-fake") -> dict[str, str]:
    """The stack's environment that sends the ``openai`` provider to a fake server."""
    return {
        "GENQ_PROVIDER_API_BASES": f"openai={base_url}",
        "GENQ_PROVIDER_API_KEY_ENVS": "openai=E2E_FAKE_OPENAI_KEY",
        "E2E_FAKE_OPENAI_KEY": api_key,
    }


@contextlib.contextmanager
def running_stack(
    redis_url: str,
    test_name: str,
    workers: int = 1,
    gateway_log_level: str = "warning",
    **env: str,
) -> Iterator[Stack]:
    log_dir = LOGS / safe_name(test_name)
    shutil.rmtree(log_dir, ignore_errors=True)
    stack = Stack(
        redis_url=redis_url, log_dir=log_dir, extra_env=env, gateway_log_level=gateway_log_level
    )
    try:
        stack.start_gateway()
        for _ in range(workers):
            stack.start_worker()
        yield stack
    finally:
        stack.stop()
        print(stack.logs())  # pytest shows it only when the test failed


def job_id_of(page: Any) -> str:
    """The generation the page follows, from its address (``/?job=<id>``)."""
    ids = parse_qs(urlparse(page.url).query).get("job")
    assert ids, f"the page shows no job in its address: {page.url}"
    return ids[0]


def seen(page: Any) -> list[dict[str, str]]:
    """Every ``{text, status}`` the page's output box and status line held since it loaded."""
    return list(page.evaluate("window.__seen"))


def save_screenshot(page: Any, name: str, full_page: bool = True) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{safe_name(name)}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path


def admin_loaded(page: Any) -> None:
    """Until the admin page's sections have all loaded (its first load, a queue's): before
    that, a section above a table grows and moves the table under a click (web/admin.js)."""
    from playwright.sync_api import expect

    expect(page.locator("#main")).not_to_have_attribute("aria-busy", "true")


def wait_until(
    predicate: Callable[[], bool], timeout: float, message: str, poll: float = 0.05
) -> None:
    """For conditions outside the page (a process, a fake server); pages use Playwright waits."""
    if not waited_for(predicate, timeout, poll):
        raise AssertionError(message)


# -- fixtures (registered for tests/e2e by its conftest.py) ---------------------------------

EXPECT_TIMEOUT_MS = 60_000
"""How long a page assertion waits for the page to show what the test expects: the first
answer of a stack waits for its worker's start (LiteLLM's import, 28 s seen on a loaded
machine)."""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    path = require_chromium()
    from playwright.sync_api import expect, sync_playwright

    # Pages show a server's change at their next poll (every 2-5 s, later when the machine is
    # busy): Playwright's 5 s default for an assertion is a race on a loaded runner.
    expect.set_options(timeout=EXPECT_TIMEOUT_MS)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def stack(redis_url: str, request: pytest.FixtureRequest) -> Iterator[Stack]:
    """The default stack: a gateway and one worker."""
    with running_stack(redis_url, request.node.name) as running:
        yield running


@dataclass
class Screenshots:
    name: str

    def __call__(self, page: Any, suffix: str) -> Path:
        return save_screenshot(page, f"{self.name}-{suffix}")


@pytest.fixture
def screenshot(request: pytest.FixtureRequest) -> Screenshots:
    """``screenshot(page, "phone")`` saves ``artifacts/screenshots/<test>-phone.png``."""
    return Screenshots(safe_name(request.node.name))


@pytest.fixture
def page(browser: Any, screenshot: Screenshots) -> Iterator[Any]:
    """A page in a fresh context (its own storage). Uncaught script errors fail the test; the
    page as it was at the end, pass or fail, is saved as ``artifacts/screenshots/<test>.png``."""
    context = browser.new_context(viewport=DESKTOP)
    context.add_init_script(RECORDER)
    tab = context.new_page()
    errors: list[str] = []
    context.on("weberror", lambda e: errors.append(str(e.error)))
    try:
        yield tab
        save_screenshot(tab, screenshot.name)
    finally:
        context.close()
    assert not errors, f"uncaught errors in the page: {errors}"
