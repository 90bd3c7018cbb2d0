"""Files (``/v1/files``), the shapes the ``openai`` SDKs' ``files`` call: upload (multipart,
purpose ``batch``), list, retrieve, content, delete. A tenant sees its own files only;
another's id answers 404.

An upload over ``GENQ_MAX_FILE_BYTES`` or :data:`.file_store.MAX_LINES` lines is 413 and
stores nothing. A batch's output and error files are listed and read like the others; their
content is made from the batch's generations on read (:mod:`.batch_output`).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, File, Form, Query, Response, UploadFile
from fastapi.responses import JSONResponse, StreamingResponse

from genq_contract.keys import GatewayKeys

from ..deps import GatewayDep, PrincipalDep
from ..errors import PayloadTooLarge
from ..state import Gateway
from .batch_output import file_lines
from .batch_store import BatchStore
from .errors import OpenAIError, OpenAIRoute
from .file_store import MAX_LINES, PURPOSES, FileRecord, FileStore
from .objects import list_page

router = APIRouter(prefix="/v1/files", tags=["openai"], route_class=OpenAIRoute)


def file_store(gateway: Gateway) -> FileStore:
    settings = gateway.settings
    return FileStore(gateway.redis, GatewayKeys(settings.queue_namespace), settings.file_ttl)


def not_found(file_id: str) -> OpenAIError:
    return OpenAIError(404, f"No such File object: {file_id}", param="id")


async def owned_file(gateway: Gateway, tenant: str, file_id: str) -> FileRecord:
    record = await file_store(gateway).get(tenant, file_id)
    if record is None:
        raise not_found(file_id)
    return record


@router.post("")
async def upload_file(
    gateway: GatewayDep,
    principal: PrincipalDep,
    file: Annotated[UploadFile, File()],
    purpose: Annotated[str, Form()],
) -> JSONResponse:
    """Stores a file for later batches; answers OpenAI's file object."""
    if purpose not in PURPOSES:
        raise OpenAIError(400, f"purpose must be one of {list(PURPOSES)}", param="purpose")
    limit = gateway.settings.max_file_bytes
    content = await file.read(limit + 1)
    if len(content) > limit:
        raise PayloadTooLarge(f"the file is over the limit of {limit} bytes")
    if content.count(b"\n") + 1 > MAX_LINES and _lines(content) > MAX_LINES:
        raise PayloadTooLarge(f"the file has more than {MAX_LINES} lines")
    name = (file.filename or "upload.jsonl")[:255]
    record = await file_store(gateway).put(principal.tenant, name, purpose, content)
    return JSONResponse(record.as_object())


def _lines(content: bytes) -> int:
    return sum(1 for line in content.splitlines() if line.strip())


@router.get("")
async def list_files(
    gateway: GatewayDep,
    principal: PrincipalDep,
    after: Annotated[str | None, Query(max_length=80)] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 10_000,
    purpose: Annotated[str | None, Query(max_length=40)] = None,
    order: Annotated[str, Query(pattern="^(asc|desc)$")] = "desc",
) -> JSONResponse:
    """The tenant's files, newest first (``order=asc``: oldest first)."""
    records, more = await file_store(gateway).page(
        principal.tenant, after, limit, purpose, ascending=order == "asc"
    )
    return JSONResponse(list_page([r.as_object() for r in records], more))


@router.get("/{file_id}")
async def retrieve_file(file_id: str, gateway: GatewayDep, principal: PrincipalDep) -> JSONResponse:
    return JSONResponse((await owned_file(gateway, principal.tenant, file_id)).as_object())


@router.get("/{file_id}/content")
async def file_content(file_id: str, gateway: GatewayDep, principal: PrincipalDep) -> Response:
    """The file's bytes; a batch's output or error file made now from its generations."""
    record = await owned_file(gateway, principal.tenant, file_id)
    store = file_store(gateway)
    if not record.generated:
        content = await store.content(record.id)
        if content is None:
            raise not_found(file_id)
        return Response(content, media_type="application/octet-stream")
    batches = BatchStore(gateway.redis, store.keys)
    batch = await batches.get(principal.tenant, record.batch_id)
    if batch is None:
        raise not_found(file_id)
    lines = await batches.lines(batch["id"])
    return StreamingResponse(
        file_lines(gateway, batch, lines, record.kind), media_type="application/octet-stream"
    )


@router.delete("/{file_id}")
async def delete_file(file_id: str, gateway: GatewayDep, principal: PrincipalDep) -> JSONResponse:
    record = await owned_file(gateway, principal.tenant, file_id)
    await file_store(gateway).delete(record)
    return JSONResponse({"id": record.id, "object": "file", "deleted": True})
