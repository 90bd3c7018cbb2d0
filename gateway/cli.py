"""The ``genq`` command: a thin dispatcher, one function per command."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

app = typer.Typer(help="genq: durable AI generations.", no_args_is_help=True)
keys_app = typer.Typer(help="Manage API keys (stored hashed in Redis).", no_args_is_help=True)
app.add_typer(keys_app, name="keys")


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

    uvicorn.run(
        "gateway.app:create_app",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level=log_level,
        timeout_graceful_shutdown=10,
    )


@app.command()
def worker() -> None:
    """Run a generation worker for the configured providers (settings from GENQ_*)."""
    from workers.run import run_worker  # imported here: LiteLLM stays out of `genq serve`

    run_worker()


@app.command()
def dev(
    host: Annotated[str, typer.Option(help="Interface to bind")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to bind")] = 8000,
) -> None:
    """Run everything locally: embedded Valkey (unless GENQ_REDIS_URL), gateway, demo worker."""
    from .devstack import run_dev

    run_dev(host=host, port=port)


@keys_app.command("create")
def keys_create(
    tenant: Annotated[str, typer.Option(help="Tenant the key acts as")],
    admin: Annotated[bool, typer.Option(help="Allow /v1/queues (operations)")] = False,
) -> None:
    """Create a key; it is printed once and stored only as a hash."""
    from .keys_cli import create_key

    api_key, digest = asyncio.run(create_key(tenant, admin))
    typer.echo(api_key)
    typer.echo(f"stored as sha256:{digest}", err=True)


@keys_app.command("list")
def keys_list() -> None:
    """List stored keys (digest prefix, tenant, role)."""
    from .keys_cli import list_keys

    for digest, grant in asyncio.run(list_keys()).items():
        role = "admin" if grant.admin else "user"
        typer.echo(f"{digest[:12]}  {grant.tenant}  {role}")


@keys_app.command("revoke")
def keys_revoke(
    digest_prefix: Annotated[str, typer.Argument(help="First hex digits of the key's digest")],
) -> None:
    """Revoke stored keys by digest prefix (as `genq keys list` shows)."""
    from .keys_cli import revoke_key

    removed = asyncio.run(revoke_key(digest_prefix))
    typer.echo(f"revoked {len(removed)} key(s)")
    if not removed:
        raise typer.Exit(1)


@keys_app.command("hash")
def keys_hash(api_key: Annotated[str, typer.Argument(help="The key to hash")]) -> None:
    """Print a key's hash, for GENQ_API_KEYS."""
    from .auth import hash_key

    typer.echo(f"sha256:{hash_key(api_key)}")


if __name__ == "__main__":
    app()
