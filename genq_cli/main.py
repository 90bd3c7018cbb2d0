"""The ``genq`` command: a thin dispatcher, one function per command."""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING, Annotated, Literal, NoReturn

import typer

if TYPE_CHECKING:
    from pydantic_core import ErrorDetails

app = typer.Typer(help="genq: durable AI generations.", no_args_is_help=True)


def group(name: str, summary: str) -> typer.Typer:
    """A ``genq NAME`` group of commands, ``summary`` its help."""
    commands = typer.Typer(help=summary, no_args_is_help=True)
    app.add_typer(commands, name=name)
    return commands


ADMIN_HTTP = "admin key; HTTP: GENQ_URL, GENQ_API_KEY"
keys_app = group("keys", "Manage API keys (stored hashed in Redis).")
jobs_app = group(
    "jobs",
    "Follow or cancel a generation; with --queue (admin key) list and operate a queue's "
    "jobs (HTTP: GENQ_URL, GENQ_API_KEY).",
)
dead_app = group("dead", f"Dead-lettered generations ({ADMIN_HTTP}).")
cooldown_app = group("cooldown", f"A provider queue's pause after a 429 ({ADMIN_HTTP}).")
tenants_app = group("tenants", "Disable or enable a tenant as a whole (Redis: GENQ_REDIS_URL).")
budgets_app = group("budgets", f"Tenants' spending limits in USD ({ADMIN_HTTP}).")
alerts_app = group("alerts", f"Dead-letter alert deliveries to webhooks ({ADMIN_HTTP}).")
webhooks_app = group(
    "webhooks", f"Tenants' webhook endpoints and their delivery logs ({ADMIN_HTTP})."
)
batches_app = group(
    "batches",
    "OpenAI-style batches: a key's own, or with --all every tenant's (admin key); HTTP: "
    "GENQ_URL, GENQ_API_KEY.",
)
EveryTenant = Annotated[bool, typer.Option("--all", help="Every tenant's batches (admin key)")]

Watch = Annotated[bool, typer.Option("--watch", "-w", help="Stream the job until it ends")]
ProgressBar = Annotated[
    bool, typer.Option("--progress", help="With --watch: a progress bar instead of the text")
]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON")]
QueueOpt = Annotated[str | None, typer.Option(help="Only this queue (a provider name)")]
JobQueue = Annotated[str, typer.Option("--queue", help="The queue (a provider name)")]
JobIds = Annotated[list[str] | None, typer.Argument(help="Generation ids", show_default=False)]
AllJobs = Annotated[bool, typer.Option("--all", help="Every job of --status (and --tenant)")]
StatusOpt = Annotated[str | None, typer.Option(help="With --all: the status to select")]
TenantOpt = Annotated[str | None, typer.Option(help="Only this tenant's jobs")]
Reason = Annotated[str | None, typer.Option(help="Why (kept in the audit log)")]
Yes = Annotated[bool, typer.Option("--yes", "-y", help="With --all: do not ask to confirm")]


@app.callback()
def main() -> None:
    """genq: durable AI generations."""


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to bind")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to bind")] = 8000,
    workers: Annotated[int, typer.Option(help="Processes (each runs its own shared tails)")] = 1,
    log_level: Annotated[str, typer.Option(help="uvicorn log level")] = "info",
) -> None:
    """Run the HTTP gateway (settings from GENQ_* environment variables)."""
    import uvicorn
    from pydantic import ValidationError

    from gateway.server_options import uvicorn_options
    from gateway.settings import Settings

    from .support import fail

    try:
        # Read here too: the connection limits are uvicorn's options, set before any app exists.
        settings = Settings()
    except ValidationError as exc:
        fail("; ".join(setting_error(error) for error in exc.errors()))
    uvicorn.run(
        "gateway.app:create_app",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level=log_level,
        timeout_graceful_shutdown=10,
        **uvicorn_options(settings),
    )


def setting_error(error: ErrorDetails) -> str:
    """One of pydantic's errors, named by the environment variable it is about."""
    if not error["loc"]:  # a check of the whole (GENQ_SECRET's), which names its variable
        return error["msg"]
    field, *inside = (str(part) for part in error["loc"])
    where = f" ({'.'.join(inside)})" if inside else ""
    return f"GENQ_{field.upper()}{where}: {error['msg']}"


@app.command()
def worker(
    processes: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Worker processes, under a supervisor (default: one per core); "
            "1 runs the worker in this process",
        ),
    ] = None,
) -> None:
    """Run generation workers for the configured providers (settings from GENQ_*).

    SIGTERM drains every process (GENQ_DRAIN_DEADLINE); exit 0 once all have drained."""
    count = processes or usable_cores()
    if count == 1:
        from workers.run import run_worker  # imported here: LiteLLM stays out of `genq serve`

        run_worker()
        return
    from workers.supervise import supervise  # the supervisor itself never imports LiteLLM

    raise typer.Exit(supervise(count))


def usable_cores() -> int:
    """The cores this process may run on (a container's cpuset, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@app.command()
def dev(
    host: Annotated[str, typer.Option(help="Interface to bind")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to bind")] = 8000,
) -> None:
    """Run everything locally: embedded Valkey (unless GENQ_REDIS_URL), gateway, demo worker."""
    from .devstack import run_dev

    run_dev(host=host, port=port)


@app.command()
def enqueue(
    prompt: Annotated[str, typer.Argument(help="The prompt")],
    model: Annotated[str, typer.Option(help="Model, e.g. demo/fast")],
    priority: Annotated[int | None, typer.Option(help="Higher runs first")] = None,
    delay_ms: Annotated[int | None, typer.Option(help="Start no sooner than this")] = None,
    idempotency_key: Annotated[str | None, typer.Option(help="Replays return the same id")] = None,
    metadata: Annotated[str | None, typer.Option(help="A JSON object kept with the job")] = None,
    watch: Watch = False,
    progress: ProgressBar = False,
) -> None:
    """Enqueue a generation and print its id; --watch streams it (exit code as `jobs get`)."""
    from .jobs import enqueue as run_enqueue

    raise typer.Exit(
        run_enqueue(
            model,
            prompt,
            priority=priority,
            delay_ms=delay_ms,
            idempotency_key=idempotency_key,
            metadata=metadata,
            watch=watch,
            progress=progress,
        )
    )


@jobs_app.command("get")
def jobs_get(
    job_id: Annotated[str, typer.Argument(help="The generation id")],
    watch: Watch = False,
    progress: ProgressBar = False,
    as_json: AsJson = False,
) -> None:
    """Show a generation (or stream it with --watch).

    Exit code: 0 completed, 1 failed, 2 cancelled, 3 not finished, 4 error."""
    from .jobs import get

    raise typer.Exit(get(job_id, watch=watch, progress=progress, as_json=as_json))


@jobs_app.command("list")
def jobs_list(
    queue: JobQueue,
    status: Annotated[
        str | None,
        typer.Option(
            help="waiting, scheduled, active, completed, failed, cancelled or dead (= failed)"
        ),
    ] = None,
    tenant: TenantOpt = None,
    model: Annotated[str | None, typer.Option(help="Only jobs of this model")] = None,
    limit: Annotated[int, typer.Option(min=1, max=200, help="Rows per page")] = 50,
    cursor: Annotated[str | None, typer.Option(help="Start after this (a page's cursor)")] = None,
    all_pages: Annotated[bool, typer.Option("--all-pages", help="Every page, not one")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line")] = False,
) -> None:
    """Any tenant's jobs in a queue, newest first (admin key)."""
    from .jobs import list_jobs

    raise typer.Exit(
        list_jobs(
            queue,
            status=status,
            tenant=tenant,
            model=model,
            limit=limit,
            cursor=cursor,
            all_pages=all_pages,
            as_json=as_json,
        )
    )


def _operate(
    action: Literal["cancel", "retry", "delete"],
    queue: str,
    ids: list[str] | None,
    *,
    all_: bool,
    status: str | None,
    tenant: str | None,
    reason: str | None,
    yes: bool,
) -> NoReturn:
    """Runs ``jobs cancel|retry|delete --queue``: the operator's commands share one option set."""
    from .jobs import act

    raise typer.Exit(
        act(
            action,
            queue,
            ids or [],
            all_=all_,
            status=status,
            tenant=tenant,
            reason=reason,
            yes=yes,
        )
    )


@jobs_app.command("cancel")
def jobs_cancel(
    ids: JobIds = None,
    queue: Annotated[
        str | None, typer.Option(help="Operate this queue (admin key): any tenant's jobs")
    ] = None,
    all_: AllJobs = False,
    status: StatusOpt = None,
    tenant: TenantOpt = None,
    reason: Reason = None,
    yes: Yes = False,
) -> None:
    """Cancel a generation of yours; with --queue, any tenant's ids or --all --status
    (waiting, scheduled, active). Exit 1 if some had already finished."""
    from .jobs import cancel
    from .support import fail

    if queue is None:
        if all_ or status or tenant or reason or len(ids or []) != 1:
            fail("without --queue, give exactly one id (your own generation)")
        raise typer.Exit(cancel((ids or [""])[0]))
    _operate("cancel", queue, ids, all_=all_, status=status, tenant=tenant, reason=reason, yes=yes)


def _operator_command(action: Literal["retry", "delete"], doc: str) -> None:
    """Registers ``genq jobs ACTION``, whose --queue is required."""

    def command(
        queue: JobQueue,
        ids: JobIds = None,
        all_: AllJobs = False,
        status: StatusOpt = None,
        tenant: TenantOpt = None,
        reason: Reason = None,
        yes: Yes = False,
    ) -> None:
        _operate(
            action, queue, ids, all_=all_, status=status, tenant=tenant, reason=reason, yes=yes
        )

    command.__doc__ = doc
    jobs_app.command(action)(command)


_operator_command(
    "retry",
    """Put failed or cancelled generations back in line, same ids (admin key): ids, or --all
    --status (failed, cancelled, dead). Exit 1 if some could not be retried.""",
)
_operator_command(
    "delete",
    """Delete finished generations for good (admin key): ids, or --all --status (completed,
    failed, cancelled, dead). Exit 1 if some had not finished.""",
)


@app.command()
def stats(as_json: AsJson = False) -> None:
    """Depths of every provider queue, as a table (admin key)."""
    from .queues import stats as show_stats

    raise typer.Exit(show_stats(as_json))


@app.command()
def usage(
    first_day: Annotated[
        str | None, typer.Option("--from", help="First UTC day, YYYY-MM-DD (default today)")
    ] = None,
    last_day: Annotated[
        str | None, typer.Option("--to", help="Last UTC day, included (default today)")
    ] = None,
    group_by: Annotated[
        str, typer.Option("--group-by", help="Any of day, tenant, model, comma separated")
    ] = "model",
    tenant: Annotated[
        str | None, typer.Option(help="Another tenant, or '*' for all (admin key)")
    ] = None,
    as_json: AsJson = False,
) -> None:
    """Tokens and cost metered by workers, as a table with its total (your key's tenant)."""
    from .usage import usage as show_usage

    raise typer.Exit(show_usage(first_day, last_day, group_by, tenant, as_json))


@budgets_app.command("list")
def budgets_list(
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line")] = False,
) -> None:
    """Every tenant's budget: limits, spent today and this month, reserved."""
    from .usage import budgets_list as show_budgets

    raise typer.Exit(show_budgets(as_json))


@budgets_app.command("set")
def budgets_set(
    tenant: Annotated[str, typer.Argument(help="The tenant")],
    daily_usd: Annotated[
        float | None, typer.Option(min=0, help="Limit per UTC day (omitted: none)")
    ] = None,
    monthly_usd: Annotated[
        float | None, typer.Option(min=0, help="Limit per UTC month (omitted: none)")
    ] = None,
    reason: Reason = None,
) -> None:
    """Set a tenant's limits (replaces both; wins over GENQ_TENANT_BUDGETS; audited)."""
    from .usage import budgets_set as set_budget

    raise typer.Exit(set_budget(tenant, daily_usd, monthly_usd, reason))


@budgets_app.command("clear")
def budgets_clear(
    tenant: Annotated[str, typer.Argument(help="The tenant")], reason: Reason = None
) -> None:
    """Remove the limits set with `budgets set` (GENQ_TENANT_BUDGETS applies again)."""
    from .usage import budgets_clear as clear_budget

    raise typer.Exit(clear_budget(tenant, reason))


@dead_app.command("list")
def dead_list(
    queue: QueueOpt = None,
    count: Annotated[int, typer.Option(min=1, max=500, help="Per queue")] = 20,
    as_json: AsJson = False,
) -> None:
    """Dead-lettered generations, newest first, with why they died."""
    from .queues import dead_list as show_dead

    raise typer.Exit(show_dead(queue, count, as_json))


def _dead_command(action: Literal["retry", "purge"], doc: str) -> None:
    """Registers ``genq dead ACTION``: the same ids, --all and --queue for both."""

    def command(
        ids: Annotated[list[str] | None, typer.Argument(help="Generation ids")] = None,
        all_: Annotated[bool, typer.Option("--all", help="Every dead job")] = False,
        queue: QueueOpt = None,
    ) -> None:
        from .queues import dead_apply

        raise typer.Exit(dead_apply(action, ids or [], all_, queue))

    command.__doc__ = doc
    dead_app.command(action)(command)


_dead_command("retry", "Put dead generations back in their queue with fresh attempts.")
_dead_command("purge", "Delete dead generations for good.")


@dead_app.command("watch")
def dead_watch(
    count: Annotated[int | None, typer.Option(help="Exit after this many notices")] = None,
) -> None:
    """Print dead-letter notices as they happen (reads Redis: GENQ_REDIS_URL; best-effort)."""
    from .queues import dead_watch as watch_dead

    raise typer.Exit(watch_dead(count))


@alerts_app.command("list")
def alerts_list(
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Newest attempts to show")] = 20,
    as_json: AsJson = False,
) -> None:
    """Each webhook POST of a dead-letter alert: when, webhook, job, attempt, HTTP status or
    error, and whether it was delivered, will be retried or was given up."""
    from .alerts import alerts_list as show_alerts

    raise typer.Exit(show_alerts(limit, as_json))


@batches_app.command("list")
def batches_list(
    every: EveryTenant = False,
    limit: Annotated[int, typer.Option(min=1, max=100, help="Newest batches to show")] = 20,
    as_json: AsJson = False,
) -> None:
    """Batches, newest first: id, endpoint, status and progress (lines done / total)."""
    from .batches import batches_list as show

    raise typer.Exit(show(every, limit, as_json))


@batches_app.command("get")
def batches_get(
    batch_id: Annotated[str, typer.Argument(help="The batch id (batch_...)")],
    as_json: AsJson = False,
) -> None:
    """One batch: status, progress, its files, and why it failed validation if it did."""
    from .batches import batches_get as show

    raise typer.Exit(show(batch_id, as_json))


@batches_app.command("cancel")
def batches_cancel(
    batch_id: Annotated[str, typer.Argument(help="The batch id (batch_...)")],
    every: Annotated[bool, typer.Option("--all", help="Any tenant's batch (admin key)")] = False,
) -> None:
    """Cancels a batch: its waiting lines at once, its running ones as Stop does."""
    from .batches import batches_cancel as cancel

    raise typer.Exit(cancel(batch_id, every))


@webhooks_app.command("list")
def webhooks_list(
    tenant: Annotated[str | None, typer.Option(help="Only this tenant's endpoints")] = None,
    as_json: AsJson = False,
) -> None:
    """Every tenant's webhook endpoints (/v1/webhook_endpoints): id, tenant, name, URL,
    event types."""
    from .webhooks import webhooks_list as show

    raise typer.Exit(show(tenant, as_json))


@webhooks_app.command("deliveries")
def webhooks_deliveries(
    endpoint: Annotated[str, typer.Argument(help="The endpoint id (we_...)")],
    limit: Annotated[int, typer.Option(min=1, max=200, help="Newest attempts to show")] = 20,
    as_json: AsJson = False,
) -> None:
    """An endpoint's delivery log: when, event, webhook-id, attempt, HTTP status or error,
    and whether it was delivered, will be retried or was given up."""
    from .webhooks import webhooks_deliveries as show

    raise typer.Exit(show(endpoint, limit, as_json))


@webhooks_app.command("test")
def webhooks_test(
    endpoint: Annotated[str, typer.Argument(help="The endpoint id (we_...)")],
    event_type: Annotated[str, typer.Option(help="The sample event's type")] = "response.completed",
) -> None:
    """Send the endpoint a signed sample event now; prints the HTTP status it answered."""
    from .webhooks import webhooks_test as send

    raise typer.Exit(send(endpoint, event_type))


@cooldown_app.command("clear")
def cooldown_clear(
    queue: Annotated[str, typer.Argument(help="The queue (a provider name)")],
) -> None:
    """End a queue's cooldown now: its jobs run again at once (audited)."""
    from .cooldown import clear

    raise typer.Exit(clear(queue))


@keys_app.command("create")
def keys_create(
    tenant: Annotated[
        str, typer.Option(help="Tenant the key acts as (worker keys: default 'workers')")
    ] = "",
    admin: Annotated[bool, typer.Option(help="Allow /v1/queues (operations)")] = False,
    worker: Annotated[
        bool, typer.Option(help="A worker key: only pulls and settles jobs of --queues")
    ] = False,
    queues: Annotated[
        str, typer.Option(help="Worker keys: the queues it may pull from, comma-separated")
    ] = "",
) -> None:
    """Create a key; it is printed once and stored only as a hash.

    `genq keys create --worker --queues demo,openai` makes a key for HTTP workers (pull/ack,
    docs/GATEWAY.md "Workers anywhere"): it cannot read or enqueue generations."""
    from .keys import create_key

    try:
        api_key, digest = asyncio.run(create_key(tenant, admin, worker, queues))
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(api_key)
    typer.echo(f"stored as sha256:{digest}", err=True)


@keys_app.command("list")
def keys_list() -> None:
    """List stored keys (digest prefix, tenant, role)."""
    from .keys import list_keys

    for digest, grant in asyncio.run(list_keys()).items():
        role = f"worker ({','.join(grant.queues)})" if grant.worker else grant.role
        typer.echo(f"{digest[:12]}  {grant.tenant}  {role}")


@keys_app.command("revoke")
def keys_revoke(
    digest_prefix: Annotated[
        str, typer.Argument(help="8 or more hex digits of the key's digest (`genq keys list`)")
    ],
    reason: Reason = None,
) -> None:
    """Revoke a key and stop its work: its waiting, scheduled and running generations are
    cancelled now, its watch tokens refused. A key of GENQ_API_KEYS is revoked by its id too
    (give 8+ digits of `genq keys hash`; remove it from the settings as well)."""
    from .keys import revoke_key

    try:
        revoked = asyncio.run(revoke_key(digest_prefix, reason))
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if revoked.removed:
        typer.echo(f"revoked {len(revoked.removed)} key(s), key id {revoked.key_id}")
    else:
        typer.echo(
            f"no stored key matches {digest_prefix}; key id {revoked.key_id} is refused from "
            "now on (a key of GENQ_API_KEYS: remove it there too)"
        )
    typer.echo(f"stopped {revoked.stopped.count} job(s)")


@tenants_app.command("disable")
def tenants_disable(
    tenant: Annotated[str, typer.Argument(help="The tenant")], reason: Reason = None
) -> None:
    """Disable a tenant: its keys get 403, its watch tokens 401, and its waiting, scheduled
    and running generations are cancelled now."""
    from .tenants import disable

    try:
        changed, stopped = asyncio.run(disable(tenant, reason))
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"tenant {tenant} {'disabled' if changed else 'was already disabled'}")
    typer.echo(f"stopped {stopped.count} job(s)")


@tenants_app.command("enable")
def tenants_enable(
    tenant: Annotated[str, typer.Argument(help="The tenant")], reason: Reason = None
) -> None:
    """Enable a disabled tenant again (generations stopped meanwhile stay stopped)."""
    from .tenants import enable

    try:
        changed = asyncio.run(enable(tenant, reason))
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"tenant {tenant} {'enabled' if changed else 'was not disabled'}")


@tenants_app.command("list")
def tenants_list() -> None:
    """List tenants with stored keys or disabled: name, stored keys, state."""
    from .tenants import list_tenants

    for row in asyncio.run(list_tenants()):
        typer.echo(f"{row.tenant}  {row.keys}  {'disabled' if row.disabled else 'enabled'}")


@keys_app.command("hash")
def keys_hash(api_key: Annotated[str, typer.Argument(help="The key to hash")]) -> None:
    """Print a key's hash, for GENQ_API_KEYS."""
    from genq_contract.api_keys import hash_key

    typer.echo(f"sha256:{hash_key(api_key)}")
