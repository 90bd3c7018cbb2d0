"""Every benchmark command the Makefile, README and the benchmarks' own usage lines give starts:
run as a process, the way it is written there, with ``--help`` (which needs every import the
benchmark makes; run the wrong way, a benchmark file in ``bench/`` shadows a module of the same
name, as ``bench/queue.py`` does the standard library's ``queue``)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMMAND = re.compile(r"python (-m bench\.\w+|bench/\w+\.py)")
BENCHMARKS = sorted(p for p in (ROOT / "bench").glob("*.py") if "__main__" in p.read_text())


def recipe(target: str) -> list[str]:
    """What the Makefile target runs with the project's Python: ``-m bench.x`` or
    ``bench/x.py``."""
    body = (ROOT / "Makefile").read_text().split(f"\n{target}:", 1)[1].split("\n\n", 1)[0]
    return [m.group(1) for line in body.splitlines()[1:] if (m := COMMAND.search(line))]


def commands() -> list[str]:
    found = recipe("bench") + recipe("soak")
    for path in [ROOT / "README.md", *BENCHMARKS]:
        found += COMMAND.findall(path.read_text())
    return sorted(set(found))


def target(command: str) -> Path:
    """The file a command runs."""
    if command.startswith("-m "):
        return ROOT / (command[3:].replace(".", "/") + ".py")
    return ROOT / command


@pytest.mark.slow
@pytest.mark.parametrize("command", commands())
def test_benchmark_command_starts(command: str) -> None:
    done = subprocess.run(
        [sys.executable, *command.split(), "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("usage:"), done.stdout[:200]


def test_every_benchmark_has_a_command_and_make_bench_runs_the_comparisons() -> None:
    assert {target(c) for c in commands()} >= set(BENCHMARKS)
    ran = {target(c).stem for c in recipe("bench")}
    assert ran == {"queue", "workers", "fanout", "batch"}, ran
    assert recipe("soak") == ["bench/soak.py"]
