"""Every core with one command: ``genq worker --processes N`` supervises N worker processes.

One worker process uses one core at most (LiteLLM's per-chunk work is Python), so the
supervisor runs N ``python -m workers`` children, each importing LiteLLM itself and serving the
same queues (sharing a queue is safe: reserving is atomic in Redis). It

- restarts a child that exits on its own (crashed, killed), after a backoff that doubles up to
  ``max_backoff`` so a child that cannot start does not spin; the backoff starts over once a
  child has run ``stable_after`` seconds;
- forwards SIGTERM/SIGINT to every child, each of which drains (:mod:`workers.drain`); a second
  signal is forwarded again and hurries them; nothing is (re)started during a drain;
- exits 0 once every child has drained, 1 if one exited with an error during the drain.

The children run in their own session, so a terminal's Ctrl-C reaches them once, through the
supervisor (not twice, which would hurry them), and they die with the supervisor if it is
killed outright (:func:`workers.lifetime.die_with_parent`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Sequence

from genq_contract.settings import CommonSettings
from workers.drain import STOP_SIGNALS
from workers.lifetime import die_with_parent
from workers.logs import configure as configure_logging
from workers.telemetry import child_environment

log = logging.getLogger("workers.supervise")

WORKER_COMMAND = (sys.executable, "-m", "workers")


def describe_exit(code: int) -> str:
    """``exit 1`` or ``SIGKILL``: how a child ended, for the log."""
    if code < 0:
        with contextlib.suppress(ValueError):
            return signal.Signals(-code).name
        return f"signal {-code}"
    return f"exit {code}"


def drained_cleanly(code: int) -> bool:
    """A child's exit during a drain: 0, or the stop signal itself (a child still importing
    when it came had not installed its drain yet, so it had no job to finish)."""
    return code == 0 or -code in STOP_SIGNALS


class Supervisor:
    """Keeps ``processes`` children of ``command`` running until a stop signal drains them."""

    def __init__(
        self,
        processes: int,
        command: Sequence[str] = WORKER_COMMAND,
        *,
        backoff: float = 1.0,
        max_backoff: float = 30.0,
        stable_after: float = 60.0,
    ) -> None:
        if processes < 1:
            raise ValueError("processes must be >= 1")
        self.processes = processes
        self.command = list(command)
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.stable_after = stable_after
        self.children: dict[int, asyncio.subprocess.Process] = {}
        self._stop_signal: signal.Signals | None = None
        self._draining = asyncio.Event()

    async def run(self) -> int:
        """Runs the children until they have drained; the process's exit code."""
        loop = asyncio.get_running_loop()
        for sig in STOP_SIGNALS:
            loop.add_signal_handler(sig, self.forward, sig)
        log.info("supervising %d worker processes", self.processes)
        try:
            drained = await asyncio.gather(*(self._keep(slot) for slot in range(self.processes)))
        finally:
            for sig in STOP_SIGNALS:
                with contextlib.suppress(ValueError, RuntimeError):
                    loop.remove_signal_handler(sig)
        if all(drained):
            log.info("all worker processes drained; exiting")
            return 0
        log.error("%d worker process(es) did not drain cleanly", drained.count(False))
        return 1

    def forward(self, sig: signal.Signals) -> None:
        """A stop signal: every child gets it (again, if this is the second one)."""
        again = self._draining.is_set()
        self._stop_signal = sig
        self._draining.set()
        log.info(
            "%s%s: forwarding to %d worker processes",
            sig.name,
            " again" if again else "",
            len(self.children),
        )
        for process in self.children.values():
            self._signal(process, sig)

    async def _keep(self, slot: int) -> bool:
        """Keeps slot ``slot`` filled until a drain; whether its last child drained cleanly."""
        loop = asyncio.get_running_loop()
        delay = self.backoff
        while not self._draining.is_set():
            started = loop.time()
            process = await asyncio.create_subprocess_exec(
                *self.command,
                start_new_session=True,
                preexec_fn=die_with_parent,
                env=child_environment(slot),
            )
            self.children[slot] = process
            log.info("worker process %d started (pid %d)", slot, process.pid)
            if self._stop_signal is not None:  # it came while the child was being started
                self._signal(process, self._stop_signal)
            code = await process.wait()
            del self.children[slot]
            if self._draining.is_set():
                clean = drained_cleanly(code)
                level = logging.INFO if clean else logging.ERROR
                log.log(
                    level,
                    "worker process %d (pid %d) stopped: %s",
                    slot,
                    process.pid,
                    describe_exit(code),
                )
                return clean
            if loop.time() - started >= self.stable_after:
                delay = self.backoff
            log.warning(
                "worker process %d (pid %d) exited (%s); restarting in %.1fs",
                slot,
                process.pid,
                describe_exit(code),
                delay,
            )
            with contextlib.suppress(TimeoutError):  # a drain cancels the restart
                await asyncio.wait_for(self._draining.wait(), delay)
            delay = min(delay * 2, self.max_backoff)
        return True

    @staticmethod
    def _signal(process: asyncio.subprocess.Process, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(sig)


class SupervisorSettings(CommonSettings):
    """What the supervisor reads: the common settings, checked here first so that a bad
    routing fails once, at once, instead of in N restarting children. Not the whole
    ``WorkerSettings``: importing those imports LiteLLM (seconds, ~200 MB), which only the
    children need."""

    log_level: str = "INFO"
    """GENQ_LOG_LEVEL, as the children read it."""


def supervise(processes: int, settings: SupervisorSettings | None = None) -> int:
    """``genq worker --processes N``: runs the supervisor; its exit code."""
    settings = settings or SupervisorSettings()
    settings.routing()
    configure_logging(settings.log_level)
    return asyncio.run(Supervisor(processes).run())
