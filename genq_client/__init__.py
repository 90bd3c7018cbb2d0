"""The Python client of genq's HTTP API; needs httpx and anyio only (no FastAPI, no Redis).

from genq_client import Client
genq = Client("http://127.0.0.1:8000", api_key)
text = genq.text(genq.generate("demo/fast", prompt="hi").id)

A worker anywhere (a worker key) works a queue with ``Puller`` or ``AsyncPuller``:
Puller(url, worker_key).consume("demo", lambda job: job.payload["messages"][-1]["content"])
"""

from ._client import AsyncClient, Client, Event
from ._common import APIError, Created
from ._generation import Generation, ToolCall
from ._operations import BulkOutcome, CancelOutcome, GenerationPage, JobPage, UsageReport
from ._output import OutputError
from ._pulled_job import PulledJob
from ._puller import AsyncPuller, Puller, RetryJob, TerminalJob

__all__ = [
    "APIError",
    "AsyncClient",
    "AsyncPuller",
    "BulkOutcome",
    "CancelOutcome",
    "Client",
    "Created",
    "Event",
    "Generation",
    "GenerationPage",
    "JobPage",
    "OutputError",
    "PulledJob",
    "Puller",
    "RetryJob",
    "TerminalJob",
    "ToolCall",
    "UsageReport",
]
