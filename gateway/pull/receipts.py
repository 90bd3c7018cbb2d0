"""Pull receipts as the gateway hands them out: genq's receipt, bound to who pulled, signed.

genq's receipt (``<lease token>.<visibility ms>``, see :mod:`genq._pull`) fences by itself: only
the current attempt's token settles. The gateway adds the id and tenant of the key that pulled
and an HMAC over the job id and all of it, so a receipt cannot be moved to another job or
claimed for another key: only the key that pulled may use it (``routes/pull.py`` compares the
sender's key id, 403 otherwise), and a revoked key's or disabled tenant's receipts are refused
on use (:class:`genq_services.access.Access`), whatever key sends them.

    <token>.<visibility ms>~<key id>~<tenant>~<signature>

Any receipt that does not verify is reported exactly like a stale one (409).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass

from genq import JobLeaseLostError

SEP = "~"


@dataclass(frozen=True)
class Receipt:
    inner: str
    """genq's receipt, what :meth:`genq.Queue.ack` and the others take."""
    key_id: str
    tenant: str


class Receipts:
    def __init__(self, secret: str) -> None:
        # A key derived for this one purpose, as the watch tokens' is.
        self._key = hmac.new(secret.encode(), b"genq pull receipt v1", hashlib.sha256).digest()

    def issue(self, job_id: str, inner: str, key_id: str, tenant: str) -> str:
        body = SEP.join((inner, key_id, tenant))
        return f"{body}{SEP}{self._sign(job_id, body)}"

    def verify(self, job_id: str, receipt: str) -> Receipt:
        """The receipt's parts; :class:`genq.JobLeaseLostError` when it does not verify."""
        body, _, signature = receipt.rpartition(SEP)
        parts = body.split(SEP)
        expected = self._sign(job_id, body).encode()
        if len(parts) != 3 or not hmac.compare_digest(signature.encode(), expected):
            raise JobLeaseLostError(job_id)
        return Receipt(*parts)

    def _sign(self, job_id: str, body: str) -> str:
        mac = hmac.new(self._key, f"{job_id}\n{body}".encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac[:18]).decode()
