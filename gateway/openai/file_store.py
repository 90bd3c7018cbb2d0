"""Files (``/v1/files``) kept in Redis: one hash per file, its object's fields and its content.

An uploaded file (purpose ``batch``) is one hash holding its whole content, expiring
``GENQ_FILE_TTL`` after its upload (its ``expires_at``); each tenant's ids sit in a zset by
creation, pruned of expired ones as they are listed. A batch's output and error files are
hashes without content: their lines are made from the batch's generations on read
(:mod:`.batch_output`), so nothing is copied, and they expire with the batch's record.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import asdict, dataclass
from typing import Any

from genq_contract.keys import GatewayKeys

FILE_PREFIX = "file-"
MAX_LINES = 50_000
"""The most lines an uploaded batch file may hold (OpenAI's own cap)."""
PURPOSES = ("batch",)
"""The purposes an upload may name (OpenAI's others have no use here)."""


@dataclass(frozen=True)
class FileRecord:
    id: str
    tenant: str
    filename: str
    purpose: str
    bytes: int
    created_at: int
    expires_at: int | None
    batch_id: str = ""
    """Set on a batch's output and error files (``kind`` says which)."""
    kind: str = ""

    @property
    def generated(self) -> bool:
        return bool(self.batch_id)

    def as_object(self) -> dict[str, Any]:
        """OpenAI's file object."""
        return {
            "id": self.id,
            "object": "file",
            "bytes": self.bytes,
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
            "status_details": None,
        }

    @classmethod
    def from_hash(cls, raw: dict[str, str]) -> FileRecord:
        expires = raw.get("expires_at") or ""
        return cls(
            id=raw["id"],
            tenant=raw["tenant"],
            filename=raw["filename"],
            purpose=raw["purpose"],
            bytes=int(raw["bytes"]),
            created_at=int(raw["created_at"]),
            expires_at=int(expires) if expires else None,
            batch_id=raw.get("batch_id", ""),
            kind=raw.get("kind", ""),
        )


def new_file_id() -> str:
    return f"{FILE_PREFIX}{uuid.uuid4().hex}"


class FileStore:
    """The tenant-scoped files of one gateway namespace."""

    def __init__(self, redis: Any, keys: GatewayKeys, ttl: float) -> None:
        self.redis = redis
        self.keys = keys
        self.ttl = ttl

    async def put(self, tenant: str, filename: str, purpose: str, content: bytes) -> FileRecord:
        now = int(time.time())
        record = FileRecord(
            id=new_file_id(),
            tenant=tenant,
            filename=filename,
            purpose=purpose,
            bytes=len(content),
            created_at=now,
            expires_at=now + int(self.ttl),
        )
        await self._write(record, content, self.ttl)
        return record

    async def put_generated(
        self, tenant: str, batch_id: str, kind: str, size: int, keep: float | None
    ) -> FileRecord:
        """A batch's output or error file (``kind``), of ``size`` bytes, kept ``keep``
        seconds (None: as long as the batch)."""
        now = int(time.time())
        record = FileRecord(
            id=new_file_id(),
            tenant=tenant,
            filename=f"{batch_id}_{kind}.jsonl",
            purpose=f"batch_{kind}",
            bytes=size,
            created_at=now,
            expires_at=now + int(keep) if keep else None,
            batch_id=batch_id,
            kind=kind,
        )
        await self._write(record, None, keep)
        return record

    async def _write(self, record: FileRecord, content: bytes | None, keep: float | None) -> None:
        fields: dict[str, Any] = {
            k: ("" if v is None else str(v)) for k, v in asdict(record).items()
        }
        if content is not None:
            fields["content"] = content
        key = self.keys.file(record.id)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(key, mapping=fields)
            if keep:
                pipe.expire(key, int(keep))
            pipe.zadd(self.keys.files(record.tenant), {record.id: record.created_at * 1000})
            await pipe.execute()

    async def get(self, tenant: str, file_id: str) -> FileRecord | None:
        """The tenant's file; None for an unknown, expired or another tenant's id."""
        if not file_id.startswith(FILE_PREFIX) or len(file_id) > 80:
            return None
        fields = ("id", "tenant", "filename", "purpose", "bytes", "created_at", "expires_at")
        values = await self.redis.hmget(self.keys.file(file_id), [*fields, "batch_id", "kind"])
        if values[0] is None:
            return None
        raw = {
            name: value.decode() if isinstance(value, bytes) else (value or "")
            for name, value in zip([*fields, "batch_id", "kind"], values, strict=True)
        }
        record = FileRecord.from_hash(raw)
        return record if record.tenant == tenant else None

    async def content(self, file_id: str) -> bytes | None:
        value = await self.redis.hget(self.keys.file(file_id), "content")
        if value is None:
            return None
        return value if isinstance(value, bytes) else str(value).encode()

    async def delete(self, record: FileRecord) -> None:
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.delete(self.keys.file(record.id))
            pipe.zrem(self.keys.files(record.tenant), record.id)
            await pipe.execute()

    async def page(
        self, tenant: str, after: str | None, limit: int, purpose: str | None, ascending: bool
    ) -> tuple[list[FileRecord], bool]:
        """The tenant's files after the file ``after`` (exclusive), newest first unless
        ``ascending``; and whether more follow. Ids of expired files are dropped here."""
        index = self.keys.files(tenant)
        ids = [
            i.decode() if isinstance(i, bytes) else str(i)
            for i in (await self.redis.zrange(index, 0, -1, desc=not ascending))
        ]
        if after is not None:
            ids = ids[ids.index(after) + 1 :] if after in ids else []
        found: list[FileRecord] = []
        gone: list[str] = []
        for file_id in ids:
            record = await self.get(tenant, file_id)
            if record is None:
                gone.append(file_id)
            elif purpose is None or record.purpose == purpose:
                found.append(record)
            if len(found) > limit:
                break
        if gone:
            await self.redis.zrem(index, *gone)
        return found[:limit], len(found) > limit
