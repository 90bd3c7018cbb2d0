"""Prometheus metrics of one gateway process.

Counters count what this process did (enqueues, dedups, cancels, requests refused by a limit).
Queue depths, SSE viewers and provider 429s are read when ``/metrics`` is scraped: the queue
figures from Redis (shared by every process), the viewers from this process's tails.

Tokens and cost per tenant and model are the cluster's totals, read from the queues' usage
counters (``Queue.usage_totals``) at each scrape: every gateway process reports the same
values, exact whichever process or worker did the work. A scrape shows at most
``USAGE_SERIES_LIMIT`` (tenant, model) pairs; pairs first seen after that are summed under
``tenant="_other", model="_other"`` (tenant names cannot start with ``_``), so a flood of
tenants cannot flood Prometheus, and each series only ever grows.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from genq import UsageRow
from genq_contract.keys import PROVIDER_429S
from genq_contract.spend import Usage

USAGE_SERIES_LIMIT = 500
"""(tenant, model) pairs with series of their own, per gateway process."""
OTHER = "_other"
TOKEN_KINDS = ("prompt", "completion", "cached")
COST = "cost_nanos"


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


Pair = tuple[str, str]


class _Usage(Collector):
    """``genq_tokens_total{tenant,model,kind}`` and ``genq_cost_usd_total{tenant,model}``."""

    def __init__(self, limit: int = USAGE_SERIES_LIMIT) -> None:
        self.limit = limit
        self.kept: set[Pair] = set()
        """Pairs with their own series: once given one, a pair keeps it (a counter that moved
        into ``_other`` would look like a reset)."""
        self.totals: dict[Pair, Usage] = {}

    def update(self, rows: Iterable[UsageRow]) -> None:
        summed: dict[Pair, dict[str, int]] = {}
        for row in rows:
            _add(summed.setdefault((row.tenant, row.label), {}), row.counts)
        # New pairs in order of cost, so the first scrape gives the biggest spenders a series.
        for pair in sorted(summed, key=lambda p: (-summed[p].get(COST, 0), p)):
            if len(self.kept) >= self.limit:
                break
            self.kept.add(pair)
        folded: dict[Pair, dict[str, int]] = {}
        for pair, counts in summed.items():
            _add(folded.setdefault(pair if pair in self.kept else (OTHER, OTHER), {}), counts)
        self.totals = {pair: Usage.from_counts(counts) for pair, counts in folded.items()}

    def collect(self) -> Iterator[Metric]:
        tokens = CounterMetricFamily(
            "genq_tokens",
            "Tokens metered by workers (every queue, every process)",
            labels=["tenant", "model", "kind"],
        )
        cost = CounterMetricFamily(
            "genq_cost_usd",
            "Cost metered by workers in USD (every queue, every process)",
            labels=["tenant", "model"],
        )
        for (tenant, model), used in sorted(self.totals.items()):
            counts = (used.prompt_tokens, used.completion_tokens, used.cached_tokens)
            for kind, value in zip(TOKEN_KINDS, counts, strict=True):
                tokens.add_metric([tenant, model, kind], value)
            cost.add_metric([tenant, model], used.cost_nanos / 1e9)
        yield from (tokens, cost)


def _add(into: dict[str, int], counts: dict[str, int]) -> None:
    for name, value in counts.items():
        into[name] = into.get(name, 0) + value


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.snapshot = _Snapshot()
        self.registry.register(self.snapshot)
        self.usage = _Usage()
        self.registry.register(self.usage)
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
    """Reads queue depths, provider 429 counters and usage totals from Redis."""
    snapshot: dict[str, QueueSnapshot] = {}
    usage: list[UsageRow] = []
    for name, queue in queues:
        usage += await queue.usage_totals()
        stats = await queue.stats()
        provider_429s = await queue.counter(PROVIDER_429S)
        tail = tails.get(name)
        snapshot[name] = QueueSnapshot(
            waiting=stats.waiting,
            scheduled=stats.scheduled,
            active=stats.active,
            dead=stats.dead,
            oldest_wait=stats.oldest_wait,
            provider_429s=provider_429s,
            viewers=tail.viewers if tail else 0,
            streams=tail.streams if tail else 0,
        )
    metrics.snapshot.queues = snapshot
    metrics.usage.update(usage)
