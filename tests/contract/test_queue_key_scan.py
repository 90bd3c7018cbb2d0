"""No code outside genq builds a queue's key names or sends commands on a queue's client by hand:
a scan of every module of the other packages (what the end-to-end record in
tests/gateway/test_queue_key_callers.py cannot run: workers, providers, the CLI)."""

from __future__ import annotations

import ast
from pathlib import Path

from genq import Keys
from genq_contract.keys import GatewayKeys

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("gateway", "workers", "providers", "genq_contract", "genq_services", "genq_cli")
LAYOUT = {name for name in dir(Keys) if not name.startswith("_")}


def _queue_like(node: ast.expr) -> bool:
    """``queue``, ``self.queue``, ``job.queue``, ``alerts_queue`` ...: a genq Queue by name."""
    name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")
    return "queue" in name.lower()


def findings(source: str) -> list[str]:
    """Each line where ``source`` builds a queue's key or sends a command on a queue's
    client, in order (one finding per line)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        where = f"line {getattr(node, 'lineno', 0):04}"
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith("genq._keys"):
                found.append(f"{where}: imports {node.module}")
            elif node.module == "genq" and any(a.name == "Keys" for a in node.names):
                found.append(f"{where}: imports genq.Keys")
        elif isinstance(node, ast.Attribute):
            inner = node.value
            if node.attr == "keys" and _queue_like(inner):
                found.append(f"{where}: {ast.unparse(node)} (a queue's key names)")
            elif node.attr in LAYOUT and isinstance(inner, ast.Attribute) and inner.attr == "keys":
                found.append(f"{where}: {ast.unparse(node)} (a queue's key)")
            elif (
                isinstance(inner, ast.Attribute)
                and inner.attr == "redis"
                and _queue_like(inner.value)
            ):
                found.append(f"{where}: {ast.unparse(node)} (a command on a queue's client)")
    return sorted({hit[:9]: hit for hit in sorted(found, reverse=True)}.values())


def test_queue_key_scan_finds_nothing_outside_genq() -> None:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            module = path.relative_to(ROOT).as_posix()
            if hits := findings(path.read_text()):
                found[module] = hits
    assert found == {}


def test_queue_key_scan_flags_each_raw_access() -> None:
    source = """
from genq import Keys
from genq import Keys, Queue
pipe.get(queue.keys.idempotency(key))
await self.queue.redis.exists(name)
flag = await job.queue.redis.hget(name, "cancel_requested")
signal = self.queue.keys.signal
history(queue.keys)
"""
    assert [hit[:9] for hit in findings(source)] == [f"line {n:04}" for n in range(2, 9)]


def test_queue_key_scan_leaves_gateway_keys_and_shared_clients_alone() -> None:
    assert not set(dir(GatewayKeys)) & LAYOUT - set(dir(object))  # no name means both
    source = """
key = self.settings.keys.in_flight(tenant)
access = Access(self.queue.redis, namespace)
await queue.count(PROVIDER_429S)
"""
    assert findings(source) == []
