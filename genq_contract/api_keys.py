"""API keys as the gateway checks them and ``genq keys`` writes them.

A key is stored only as its SHA-256 digest (keys are random 256-bit tokens, so a fast hash is
enough): in ``GENQ_API_KEYS`` as ``sha256:<hex>`` (``genq keys hash`` prints one), or in the
gateway's key store (a Redis hash, :attr:`genq_contract.keys.GatewayKeys.api_keys`), digest ->
:class:`KeyGrant` as JSON.
"""

from __future__ import annotations

import hashlib
import re

from pydantic import BaseModel, Field

TENANT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
KEY_HASH_PATTERN = re.compile(r"^sha256:[0-9a-f]{64}$")
"""A key's digest as ``GENQ_API_KEYS`` holds it."""


class KeyGrant(BaseModel):
    """What an API key grants: the tenant it acts as, and whether it may operate the queues."""

    tenant: str = Field(pattern=TENANT_PATTERN)
    admin: bool = False


def hash_key(api_key: str) -> str:
    """Hex SHA-256 of an API key: the only form a key is ever stored in."""
    return hashlib.sha256(api_key.encode()).hexdigest()
