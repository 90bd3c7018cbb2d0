"""genq as a user installs it: the wheel built from this checkout, in a new virtualenv.

- ``build_wheel`` builds from a copy of exactly the files the Docker build sees (the rules of
  ``.dockerignore``), so a passing test also proves the image's build context is enough.
- ``new_venv`` makes a virtualenv without pip and installs into it with this interpreter's pip
  (``pip --python``): the real dependencies from the index (pip's cache keeps it quick), no
  bytecode compiled ahead of time (Python writes it on first import).
- ``outside_env`` is the environment of a process that must not see the checkout: no
  ``PYTHONPATH``, no active virtualenv; such processes also run with a cwd outside the tree.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.e2e.browser import ROOT, Stack

PIP_TIMEOUT = 900.0
# What the pages are served from, and the file of web/ each one must be.
PAGES = {"/": "index.html", "/admin": "admin.html", "/web/api.js": "api.js"}


def dockerignore_rules() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def ignored(relative: str, rules: list[str]) -> bool:
    """Docker's rule for the simple patterns we use: a name, ``*.ext`` or ``**/name``."""
    name = relative.rsplit("/", 1)[-1]
    for rule in rules:
        if rule.startswith("**/"):
            if fnmatch.fnmatch(name, rule[3:]):
                return True
        elif fnmatch.fnmatch(relative, rule):
            return True
    return False


def build_context(dest: Path) -> Path:
    """A copy of the Docker build context: every file of the checkout ``.dockerignore`` keeps."""
    rules = dockerignore_rules()

    def skip(directory: str, names: list[str]) -> list[str]:
        base = Path(directory).relative_to(ROOT)
        return [n for n in names if ignored((base / n).as_posix(), rules)]

    shutil.copytree(ROOT, dest, ignore=skip)
    return dest


def outside_env(base: dict[str, str] | None = None, **extra: str) -> dict[str, str]:
    drop = {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV"}
    env = {k: v for k, v in (base if base is not None else os.environ).items() if k not in drop}
    env.update(PIP_NO_INPUT="1", PIP_DISABLE_PIP_VERSION_CHECK="1", **extra)
    return env


def run(args: list[str], cwd: Path, timeout: float = PIP_TIMEOUT) -> str:
    """Runs a command to its end; its output goes into the failure message."""
    done = subprocess.run(
        args, cwd=cwd, env=outside_env(), capture_output=True, text=True, timeout=timeout
    )
    if done.returncode != 0:
        raise AssertionError(
            f"{' '.join(args)} exited with {done.returncode}\n{done.stdout[-3000:]}"
            f"\n{done.stderr[-5000:]}"
        )
    return done.stdout


def build_wheel(workdir: Path) -> Path:
    source = build_context(workdir / "context")
    out = workdir / "dist"
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), "."], source)
    (wheel,) = out.glob("genq-*.whl")
    return wheel


@dataclass
class Venv:
    path: Path

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    def bin(self, name: str) -> Path:
        return self.path / "bin" / name

    def pip(self, *args: str) -> str:
        return run([sys.executable, "-m", "pip", "--python", str(self.python), *args], self.path)

    def distributions(self) -> set[str]:
        """Normalized names of every distribution installed in it."""
        listed = json.loads(self.pip("list", "--format", "json"))
        return {str(d["name"]).lower().replace("_", "-") for d in listed}

    def run_python(self, code: str, *args: str, cwd: Path, timeout: float = 60) -> Any:
        """Runs ``code`` with the venv's Python outside the checkout; returns its last JSON line."""
        out = run([str(self.python), "-c", code, *args], cwd, timeout=timeout)
        return json.loads(out.strip().splitlines()[-1])


def new_venv(path: Path, requirement: str) -> Venv:
    """A fresh virtualenv with ``requirement`` and its real dependencies from the index."""
    run([sys.executable, "-m", "venv", "--without-pip", str(path)], path.parent)
    venv = Venv(path)
    venv.pip("install", "-q", "--no-compile", requirement)
    venv.pip("check")
    return venv


def packaged_sources() -> dict[Path, str]:
    """Each package directory of the checkout -> its import name, as pyproject.toml maps them."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapped = config.get("package-dir", {})
    return {ROOT / mapped.get(name, name.replace(".", "/")): name for name in config["packages"]}


def assert_serves_a_generation_and_the_pages(stack: Stack) -> None:
    """A demo generation completes with its text; the pages and an asset are the real files."""
    created = stack.submit(
        {"model": "demo/fast", "prompt": "installed", "params": {"demo_tokens": 5}}
    )
    result = stack.result(created["id"])
    assert result["status"] == "completed", result
    assert result["text"].startswith("Echo: installed"), result
    for path, source in PAGES.items():
        response = httpx.get(f"{stack.base_url}{path}", timeout=10)
        assert response.status_code == 200, (path, response.status_code, response.text[:300])
        assert response.text == (ROOT / "web" / source).read_text(), path
