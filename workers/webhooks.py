"""Alert webhooks: where dead-letter alerts go, how they are signed, what one POST decides.

A webhook is ``{name, url, secret, queues?}``: ``GENQ_ALERT_WEBHOOKS`` lists any number (JSON),
and ``GENQ_ALERT_WEBHOOK_URL`` / ``_SECRET`` add one named ``default``. ``queues`` keeps only
the dead letters of those provider queues (absent: all). Each POST carries
``X-Genq-Signature: sha256=<hex HMAC-SHA256 of the body, key = the webhook's secret>``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Mapping
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

SIGNATURE_HEADER = "X-Genq-Signature"
DEFAULT_NAME = "default"
"""The name of the webhook ``GENQ_ALERT_WEBHOOK_URL`` configures."""
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$"


def sign(secret: str, body: bytes) -> str:
    """The signature header's value: ``sha256=<hex>`` of HMAC-SHA256(secret, body)."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def encode(payload: Mapping[str, Any]) -> bytes:
    return json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()


class Webhook(BaseModel):
    """One alert receiver."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=NAME_PATTERN)
    url: str
    secret: SecretStr
    queues: frozenset[str] | None = None
    """Provider queue names whose dead letters go here; None: every queue."""

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        try:
            url = httpx.URL(value)
        except httpx.InvalidURL as exc:
            raise ValueError(f"not a URL: {exc}") from None
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError("must be an http:// or https:// URL with a host")
        return value

    @field_validator("secret")
    @classmethod
    def _secret(cls, value: SecretStr) -> SecretStr:
        if not value.get_secret_value():
            raise ValueError("must not be empty")
        return value

    @field_validator("queues")
    @classmethod
    def _queues(cls, value: frozenset[str] | None) -> frozenset[str] | None:
        if value is not None and not value:
            raise ValueError("an empty list matches no queue: leave it out to match every queue")
        return value

    def wants(self, queue: str) -> bool:
        """Whether this webhook takes the dead letters of provider queue ``queue``."""
        return self.queues is None or queue in self.queues


def parse_webhooks(raw: Any) -> list[Webhook]:
    """``GENQ_ALERT_WEBHOOKS`` (a JSON list, or the list itself) -> webhooks, with errors that
    name the entry and the field at fault."""
    if raw is None or raw == "":
        return []
    if isinstance(raw, str | bytes):
        try:
            raw = json.loads(raw)
        except ValueError as exc:
            raise ValueError(f"GENQ_ALERT_WEBHOOKS is not JSON: {exc}") from None
    if not isinstance(raw, list):
        raise ValueError("GENQ_ALERT_WEBHOOKS must be a JSON list of {name, url, secret, queues?}")
    hooks = []
    for i, item in enumerate(raw):
        if isinstance(item, Webhook):
            hooks.append(item)
            continue
        try:
            hooks.append(Webhook.model_validate(item))
        except ValueError as exc:
            raise ValueError(f"GENQ_ALERT_WEBHOOKS[{i}]: {_describe(exc)}") from None
    return hooks


def _describe(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return str(exc)
    parts = []
    for error in errors():
        where = ".".join(str(p) for p in error.get("loc", ()))
        message = re.sub(r"^Value error, ", "", str(error.get("msg", "")))
        parts.append(f"{where}: {message}" if where else message)
    return "; ".join(parts)


def check_webhooks(hooks: list[Webhook], queues: set[str]) -> None:
    """Names are unique and queue filters name configured provider queues."""
    seen: set[str] = set()
    for hook in hooks:
        if hook.name in seen:
            raise ValueError(f"alert webhook name {hook.name!r} is used twice")
        seen.add(hook.name)
        unknown = sorted((hook.queues or set()) - queues)
        if unknown:
            raise ValueError(
                f"alert webhook {hook.name!r} filters on unknown queues {unknown} "
                f"(configured: {sorted(queues)})"
            )


class Outcome:
    """What one POST decided (the delivery log's ``outcome``)."""

    DELIVERED = "delivered"
    RETRYING = "retrying"
    GIVEN_UP = "given_up"


def is_final_failure(status: int) -> bool:
    """A 4xx other than 408/429 will not get better by retrying."""
    return 400 <= status < 500 and status not in (408, 429)
