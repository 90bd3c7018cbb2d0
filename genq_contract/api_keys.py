"""API keys as the gateway checks them and ``genq keys`` writes them.

A key is stored only as its SHA-256 digest (keys are random 256-bit tokens, so a fast hash is
enough): in ``GENQ_API_KEYS`` as ``sha256:<hex>`` (``genq keys hash`` prints one), or in the
gateway's key store (a Redis hash, :attr:`genq_contract.keys.GatewayKeys.api_keys`), digest ->
:class:`KeyGrant` as JSON. A key's id (:func:`key_id_of`) names it without giving it away: in
the audit log, on the jobs it creates, in the set of revoked keys.
"""

from __future__ import annotations

import hashlib
import re
from typing import Annotated

from pydantic import BaseModel, Field, model_validator

TENANT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
KEY_HASH_PATTERN = re.compile(r"^sha256:[0-9a-f]{64}$")
"""A key's digest as ``GENQ_API_KEYS`` holds it."""
QUEUE_NAME_PATTERN = r"^[^{}\s/]{1,80}$"
"""A queue (provider) name as a worker key names it."""
KEY_ID_LENGTH = 8
KEY_ID_PATTERN = re.compile(r"^[0-9a-f]{8}$")
"""A key's id: the first :data:`KEY_ID_LENGTH` hex digits of its digest."""


class KeyGrant(BaseModel):
    """What an API key grants: the tenant it acts as, and its role: a user's (generations of
    its tenant), ``admin`` (operate the queues too) or ``worker`` (pull and settle the jobs of
    the named ``queues``, nothing else). Grants stored before roles existed read as before."""

    tenant: str = Field(pattern=TENANT_PATTERN)
    admin: bool = False
    worker: bool = False
    queues: list[Annotated[str, Field(pattern=QUEUE_NAME_PATTERN)]] = []
    """The queues a worker key may pull from (worker keys only)."""

    @model_validator(mode="after")
    def _one_role(self) -> KeyGrant:
        if self.worker and self.admin:
            raise ValueError("a key is a worker key or an admin key, not both")
        if self.worker and not self.queues:
            raise ValueError("a worker key needs the queues it may pull from")
        if self.queues and not self.worker:
            raise ValueError("only a worker key is limited to queues")
        return self

    @property
    def role(self) -> str:
        return "admin" if self.admin else "worker" if self.worker else "user"


def hash_key(api_key: str) -> str:
    """Hex SHA-256 of an API key: the only form a key is ever stored in."""
    return hashlib.sha256(api_key.encode()).hexdigest()


def key_id_of(digest: str) -> str:
    """The id of the key with this hex SHA-256 digest (:func:`hash_key`). A revoked id also
    refuses any other key whose digest starts the same (about one in four billion)."""
    return digest[:KEY_ID_LENGTH]
