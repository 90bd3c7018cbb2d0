"""The Redis keys genq's processes share beyond a queue's own (those are ``genq.Keys``).

Two kinds:

- keys under a provider queue's hash tag, so they follow the queue to its Cluster slot: the
  count of provider 429s (a named counter of the queue: workers ``Queue.count`` it, the
  gateway's ``/metrics`` reads ``Queue.counter``) and the queue-depth history of the
  operations chart (every gateway process samples it into ``Queue.extra_key`` keys with a
  script of its own: that data is the gateway's, genq never touches it);
- the gateway's own keys under the queue namespace: API keys (``genq keys`` writes them, the
  gateway reads them), per-tenant rate buckets, daily counts and in-flight sets, budget
  accounts (the gateway reserves, workers hold and charge), the operations audit log, the
  alert delivery log (workers write, the gateway reads), the revoked key ids and disabled
  tenants (the gateway writes them, everyone checks them).
  Queue keys start with ``{``, so these never collide with a provider's queue.
"""

from __future__ import annotations

from dataclasses import dataclass

from genq import Queue

PROVIDER_429S = "metrics:provider_429_total"
"""The queue's named counter (``Queue.count``, ``Queue.counter``) of its provider's 429s."""


def provider_429_counter(queue: Queue) -> str:
    """string: the key :data:`PROVIDER_429S` is counted in (stored data: its name is kept)."""
    return queue.extra_key(PROVIDER_429S)


def history_keys(queue: Queue) -> tuple[str, str]:
    """hashes: per time step, the queue's peak depth and its longest wait (the chart)."""
    return queue.extra_key("history:depth"), queue.extra_key("history:wait")


@dataclass(frozen=True)
class GatewayKeys:
    """The gateway's own keys, under the queue namespace (``GENQ_QUEUE_NAMESPACE``)."""

    namespace: str

    def _key(self, name: str) -> str:
        return f"{self.namespace}:gateway:{name}"

    @property
    def api_keys(self) -> str:
        """hash: API key digest -> grant JSON (``genq_contract.api_keys.KeyGrant``)."""
        return self._key("apikeys")

    @property
    def audit(self) -> str:
        """stream: who retried or purged which dead generations (``gateway.access.audit``)."""
        return self._key("audit")

    @property
    def alert_log(self) -> str:
        """stream: every dead-letter alert POST attempt and its outcome, written by workers
        (``genq_services.alert_log``), read by ``GET /v1/alerts``."""
        return self._key("alerts:log")

    def rate(self, tenant: str) -> str:
        """hash: the tenant's enqueue token bucket."""
        return self._key(f"rate:{tenant}")

    def daily_count(self, tenant: str, day: str) -> str:
        """string: generations accepted for the tenant on UTC ``day`` (``YYYY-MM-DD``); it
        expires after that day (``gateway.admission.limits.Limiter.charge_daily``)."""
        return self._key(f"daily:{tenant}:{day}")

    def in_flight(self, tenant: str) -> str:
        """zset: the tenant's unfinished job ids, scored by the time they were accepted (ms)."""
        return self._key(f"inflight:{tenant}")

    def budget(self, tenant: str) -> str:
        """hash: the tenant's budget account: the operator's limits, the spend of the current
        UTC day and month, the total reserved, one reservation per job id
        (``genq_services.budget``; read and written by the gateway and the workers)."""
        return self._key(f"budget:{tenant}")

    @property
    def budget_tenants(self) -> str:
        """set: tenants an operator gave budget limits (the admin API lists and sweeps them)."""
        return self._key("budget-tenants")

    @property
    def revoked_key_ids(self) -> str:
        """set: ids (first 8 hex digits of the digest) of revoked API keys: their jobs, watch
        tokens and receipts are refused (``genq_services.access``)."""
        return self._key("revoked-key-ids")

    @property
    def disabled_tenants(self) -> str:
        """set: tenants an operator disabled: their keys, jobs, watch tokens and receipts are
        refused until enabled again (``genq_services.access``)."""
        return self._key("disabled-tenants")

    def idempotency_claim(self, scoped_key: str) -> str:
        """string: the token of the request accepting this ``<tenant>:<Idempotency-Key>`` now
        (short-lived; ``gateway.admission.limits.Limiter.claim``)."""
        return self._key(f"idem-claim:{scoped_key}")

    def ui_chat(self, tenant: str, chat_id: str) -> str:
        """string: the id of the generation a ``useChat`` chat last started (``POST
        /v1/ui/chat``), the one its resume and Stop act on; it expires ``GENQ_RESULT_TTL``
        after a request last found it (``gateway.ui_chat.active``). A chat id holds no ``:``,
        so the tenant before it is unambiguous."""
        return self._key(f"uichat:{tenant}:{chat_id}")

    def file(self, file_id: str) -> str:
        """hash: an uploaded file (``/v1/files``): its object's fields and its ``content``;
        it expires with the file (``GENQ_FILE_TTL``). A batch's output and error files hold
        no content: it is made from the lines' records on read (``gateway.openai.batches``)."""
        return self._key(f"file:{file_id}")

    def files(self, tenant: str) -> str:
        """zset: the tenant's file ids by creation (ms): the list route's order."""
        return self._key(f"files:{tenant}")

    def batch(self, batch_id: str) -> str:
        """hash: a batch (``/v1/batches``): its object's fields, the state its runner keeps."""
        return self._key(f"batch:{batch_id}")

    def batch_lines(self, batch_id: str) -> str:
        """hash: line number -> ``{custom_id, job}`` (the line's generation) or ``{custom_id,
        status, body}`` (a line refused at admission: the route's answer), for the files."""
        return self._key(f"batch:{batch_id}:lines")

    def batch_runner(self, batch_id: str) -> str:
        """string + TTL: the gateway process driving the batch now (a lease it renews; when
        it lapses, another gateway's runner takes the batch over where it was)."""
        return self._key(f"batch:{batch_id}:runner")

    def batches(self, tenant: str) -> str:
        """zset: the tenant's batch ids by creation (ms): the list route's order."""
        return self._key(f"batches:{tenant}")

    @property
    def all_batches(self) -> str:
        """zset: every tenant's batch ids by creation (ms): the admin list."""
        return self._key("batches:all")

    @property
    def active_batches(self) -> str:
        """zset: ids of batches not yet final, by creation (ms): what runners look after."""
        return self._key("batches:active")
