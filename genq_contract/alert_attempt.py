"""One alert delivery attempt as the workers log it and the gateway shows it: the record's
shape, its stream fields both ways, and how many are kept.

The log itself (a Redis stream, written and read by ``genq_services.alert_log``) lives under
:attr:`genq_contract.keys.GatewayKeys.alert_log`; the entry id gives the time (Redis clock).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from genq import as_text

MAX_ENTRIES = 1000
"""Attempts kept (about: the stream is trimmed with ``MAXLEN ~``)."""
MAX_ERROR = 500
"""Characters of an error kept per entry."""

Outcome = Literal["delivered", "retrying", "given_up"]
DELIVERED: Outcome = "delivered"
RETRYING: Outcome = "retrying"
GIVEN_UP: Outcome = "given_up"
OUTCOMES: tuple[Outcome, ...] = (DELIVERED, RETRYING, GIVEN_UP)


@dataclass(frozen=True)
class AlertAttempt:
    """One POST of one alert to one webhook, and what came of it."""

    webhook: str
    job_id: str
    """The dead-lettered generation the alert is about."""
    queue: str
    """Its provider queue."""
    attempt: int
    """The delivery's attempt (1 for the first POST)."""
    outcome: Outcome
    """delivered; retrying (another attempt follows, with backoff); given_up (no more)."""
    status: int | None = None
    """The receiver's HTTP status; None when no answer came (``error`` says why)."""
    error: str | None = None
    delivery: str = ""
    """The delivery's id (``X-Genq-Delivery``, the same across its attempts)."""
    at: float = 0.0
    """When it was logged, epoch seconds (from the stream entry id)."""

    def fields(self) -> dict[str, str]:
        """The stream entry's fields (Redis has no null: an absent field is None)."""
        out = {
            "webhook": self.webhook,
            "job_id": self.job_id,
            "queue": self.queue,
            "attempt": str(self.attempt),
            "outcome": self.outcome,
            "delivery": self.delivery,
        }
        if self.status is not None:
            out["status"] = str(self.status)
        if self.error is not None:
            out["error"] = self.error[:MAX_ERROR]
        return out

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_entry(cls, entry_id: Any, raw: dict[Any, Any]) -> AlertAttempt:
        """The attempt a stream entry holds (:meth:`fields` read back; an unknown outcome
        reads as given up)."""
        f = {as_text(k): as_text(v) for k, v in raw.items()}
        outcome = f.get("outcome", "")
        status = f.get("status")
        return cls(
            webhook=f.get("webhook", ""),
            job_id=f.get("job_id", ""),
            queue=f.get("queue", ""),
            attempt=int(f.get("attempt", 0)),
            outcome=outcome if outcome in OUTCOMES else GIVEN_UP,
            status=int(status) if status else None,
            error=f.get("error"),
            delivery=f.get("delivery", ""),
            at=int(as_text(entry_id).split("-")[0]) / 1000,
        )
