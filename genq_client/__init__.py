"""The Python client of genq's HTTP API; needs httpx and anyio only (no FastAPI, no Redis).

from genq_client import Client
genq = Client("http://127.0.0.1:8000", api_key)
text = genq.text(genq.generate("demo/fast", prompt="hi").id)
"""

from ._client import AsyncClient, Client, Event
from ._common import APIError, Created
from ._operations import BulkOutcome, CancelOutcome, GenerationPage, JobPage, UsageReport

__all__ = [
    "APIError",
    "AsyncClient",
    "BulkOutcome",
    "CancelOutcome",
    "Client",
    "Created",
    "Event",
    "GenerationPage",
    "JobPage",
    "UsageReport",
]
