"""genq has one face: outside the core, code imports ``genq`` (its exported names) and
``genq.connection``, nothing else of it. import-linter's private-modules contract holds this for
the packages; this scan holds it for everything import-linter does not see (tests, benches,
examples), and checks that the face itself is whole."""

from __future__ import annotations

import ast
import pkgutil
from pathlib import Path

import genq

ROOT = Path(__file__).resolve().parents[2]
PUBLIC = {"genq", "genq.connection"}

WHITE_BOX = (
    "tests/genq/",
    "tests/faults/",
    "tests/cluster/",
    "tests/failover/",
    "bench/queue.py",
    "bench/script_cost.py",
)
"""The core's own tests (and the fault, cluster and failover drills that interleave its scripts
call by call), and the two benches that time its scripts one by one: they test the insides
on purpose, so they may import them."""


def reached_modules(source: str) -> list[str]:
    """Every ``genq`` module an import in ``source`` names, in order."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "genq":
                found += [f"genq.{a.name}" for a in node.names if f"genq.{a.name}" in _modules()]
            elif node.module.startswith("genq."):
                found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("genq.")]
    return found


def _modules() -> set[str]:
    return {f"genq.{m.name}" for m in pkgutil.iter_modules(genq.__path__)}


def test_one_face_nothing_outside_the_core_imports_its_private_modules() -> None:
    reached = {}
    for path in sorted(ROOT.rglob("*.py")):
        where = path.relative_to(ROOT).as_posix()
        if where.startswith(("genq/", ".venv/", "node_modules/")) or "/node_modules/" in where:
            continue
        if where.startswith(WHITE_BOX):
            continue
        private = [m for m in reached_modules(path.read_text()) if m not in PUBLIC]
        if private:
            reached[where] = private
    assert reached == {}


def test_one_face_every_module_of_the_core_but_connection_is_private() -> None:
    public = {m for m in _modules() if not m.rsplit(".", 1)[1].startswith("_")}
    assert public == {"genq.connection"}


def test_one_face_every_exported_name_resolves() -> None:
    missing = [name for name in genq.__all__ if not hasattr(genq, name)]
    assert missing == []
    assert len(genq.__all__) == len(set(genq.__all__))


def test_one_face_scan_flags_each_kind_of_reach() -> None:
    source = (
        "import genq\n"
        "from genq import Queue, connect\n"
        "from genq.connection import connect\n"
        "from genq._queue import Queue\n"
        "import genq._scripts\n"
        "from genq import _redis_patches\n"
    )
    assert [m for m in reached_modules(source) if m not in PUBLIC] == [
        "genq._queue",
        "genq._scripts",
        "genq._redis_patches",
    ]
