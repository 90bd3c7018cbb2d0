"""Prometheus metrics of one gateway process.

Counters count what this process did (enqueues, dedups, cancels, requests refused by a limit).
Queue depths, SSE viewers and provider 429s are read when ``/metrics`` is scraped: the queue
figures from Redis (shared by every process), the viewers from this process's tails.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from genq_contract.keys import provider_429_counter


@dataclass
class QueueSnapshot:
    waiting: int = 0
    scheduled: int = 0
    active: int = 0
    dead: int = 0
    oldest_wait: float = 0.0
    provider_429s: int = 0
    viewers: int = 0
    streams: int = 0


class _Snapshot(Collector):
    def __init__(self) -> None:
        self.queues: dict[str, QueueSnapshot] = {}

    def collect(self) -> Iterator[Metric]:
        jobs = GaugeMetricFamily(
            "genq_queue_jobs", "Jobs per queue and state", labels=["queue", "state"]
        )
        oldest = GaugeMetricFamily(
            "genq_queue_oldest_waiting_seconds", "Age of the oldest waiting job", labels=["queue"]
        )
        viewers = GaugeMetricFamily(
            "genq_sse_viewers", "SSE viewers connected to this process", labels=["queue"]
        )
        streams = GaugeMetricFamily(
            "genq_tail_streams",
            "Job streams followed by this process's shared tail",
            labels=["queue"],
        )
        limited = CounterMetricFamily(
            "genq_provider_rate_limited", "Provider 429 answers seen by workers", labels=["queue"]
        )
        for name, q in sorted(self.queues.items()):
            for state in ("waiting", "scheduled", "active", "dead"):
                jobs.add_metric([name, state], getattr(q, state))
            oldest.add_metric([name], q.oldest_wait)
            viewers.add_metric([name], q.viewers)
            streams.add_metric([name], q.streams)
            limited.add_metric([name], q.provider_429s)
        yield from (jobs, oldest, viewers, streams, limited)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.snapshot = _Snapshot()
        self.registry.register(self.snapshot)
        self.enqueued = self._counter("genq_enqueued", "Generations enqueued", ["queue"])
        self.deduplicated = self._counter(
            "genq_deduplicated",
            "Enqueues answered with an existing job (Idempotency-Key)",
            ["queue"],
        )
        self.cancels = self._counter("genq_cancel_requests", "Cancel requests", ["queue"])
        self.refused = self._counter(
            "genq_requests_limited", "Requests refused by a tenant limit", ["limit"]
        )

    def _counter(self, name: str, doc: str, labels: list[str]) -> Counter:
        return Counter(name, doc, labels, registry=self.registry)

    def render(self) -> bytes:
        return generate_latest(self.registry)


async def refresh(metrics: Metrics, queues: Any, tails: dict[str, Any]) -> None:
    """Reads queue depths and provider 429 counters from Redis into the snapshot."""
    snapshot: dict[str, QueueSnapshot] = {}
    for name, queue in queues:
        stats = await queue.stats()
        raw_429 = await queue.redis.get(provider_429_counter(queue.keys))
        tail = tails.get(name)
        snapshot[name] = QueueSnapshot(
            waiting=stats.waiting,
            scheduled=stats.scheduled,
            active=stats.active,
            dead=stats.dead,
            oldest_wait=stats.oldest_wait,
            provider_429s=int(raw_429 or 0),
            viewers=tail.viewers if tail else 0,
            streams=tail.streams if tail else 0,
        )
    metrics.snapshot.queues = snapshot
