"""What the gateway, the workers and the CLI must agree on, defined once.

Routing (which models run, on which provider queue), the common settings, the generation
payload the gateway writes and the worker reads, the result a worker completes it with, the
event vocabulary, the shared Redis key names, amounts of money and budget limits, the reasons
revoked or disabled work is refused, the alert attempt record and the redaction of errors
tenants see. Definitions, not services: what both sides run against Redis lives in
``genq_services``. It imports only the queue core and pydantic; never FastAPI, never LiteLLM.
"""
