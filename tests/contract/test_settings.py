"""The common settings: one GENQ_ variable, read alike by the gateway, the worker and the CLI."""

from __future__ import annotations

import pytest

from gateway.settings import Settings
from genq_contract.settings import CommonSettings
from workers.settings import WorkerSettings

COMMON_ENV = {
    "GENQ_REDIS_URL": "redis+cluster://:pw@10.0.0.1:7000,10.0.0.2:7000",
    "GENQ_QUEUE_NAMESPACE": "acme",
    "GENQ_RESULT_TTL": "120",
    "GENQ_DEAD_TTL": "600",
    "GENQ_MAX_ATTEMPTS": "5",
    "GENQ_MODELS": "demo/fast,openai/*",
}


@pytest.fixture
def common_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in COMMON_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("GENQ_SECRET", "s" * 32)


@pytest.mark.usefixtures("common_env")
def test_settings_every_process_reads_the_common_variables_alike() -> None:
    cli, gateway, worker = CommonSettings(), Settings(), WorkerSettings()
    for settings in (cli, gateway, worker):
        assert settings.redis_url == COMMON_ENV["GENQ_REDIS_URL"]
        assert settings.queue_namespace == "acme"
        assert (settings.result_ttl, settings.dead_ttl, settings.max_attempts) == (120, 600, 5)
        assert settings.routing().queue_prefix("openai/gpt-4o") == "acme:openai"


def test_settings_processes_share_the_common_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in COMMON_ENV:
        monkeypatch.delenv(name, raising=False)
    common = CommonSettings().model_dump()
    for settings in (Settings(secret="s" * 32), WorkerSettings()):
        assert {name: getattr(settings, name) for name in common} == common


@pytest.mark.parametrize("process", [Settings, WorkerSettings])
def test_settings_common_fields_are_inherited_never_redeclared(process: type) -> None:
    redeclared = set(process.__annotations__) & set(CommonSettings.model_fields)
    assert not redeclared, f"{process.__name__} declares {sorted(redeclared)} again"


def test_settings_queue_options_read_fair_share_and_durability(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GENQ_TENANT_WEIGHTS", '{"gold": 3, "free": 1}')
    monkeypatch.setenv("GENQ_TENANT_CONCURRENCY", "4")
    monkeypatch.setenv("GENQ_DURABLE_REPLICAS", "1")
    monkeypatch.setenv("GENQ_MAX_ATTEMPTS", "5")
    options = WorkerSettings().queue_options()
    assert options["tenant_weights"] == {"gold": 3, "free": 1}
    assert options["tenant_concurrency"] == 4
    assert (options["durable_replicas"], options["durable_timeout"]) == (1, 1.0)
    assert options["max_attempts"] == 5


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("GENQ_TENANT_WEIGHTS", '{"gold": 0}'),
        ("GENQ_TENANT_WEIGHTS", '{"gold": 1001}'),
        ("GENQ_TENANT_WEIGHTS", "gold=3"),
        ("GENQ_TENANT_CONCURRENCY", "-1"),
    ],
)
def test_settings_fair_share_refuses_bad_values(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=name.removeprefix("GENQ_").lower()):
        WorkerSettings()
