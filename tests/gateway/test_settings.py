"""Settings: production refuses to start without secrets; dev mode fills them in."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gateway.access.auth import hash_key
from gateway.app import create_app
from gateway.settings import Settings
from tests.gateway.conftest import SECRET


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GENQ_DEV", "GENQ_SECRET", "GENQ_API_KEYS", "GENQ_CORS_ORIGINS", "GENQ_MODELS"):
        monkeypatch.delenv(name, raising=False)


def test_settings_production_app_refuses_to_start_without_secret() -> None:
    with pytest.raises(ValidationError, match="GENQ_SECRET is required"):
        create_app()


def test_settings_refuse_a_short_secret() -> None:
    with pytest.raises(ValidationError, match="at least 16"):
        Settings(secret="short")


def test_settings_dev_mode_generates_a_secret_and_grants_dev_keys() -> None:
    first, second = Settings(dev=True), Settings(dev=True)
    assert first.secret is not None and second.secret is not None
    assert first.secret.get_secret_value() != second.secret.get_secret_value()
    grants = first.grants()
    assert grants[hash_key(first.dev_key)].tenant == "dev"
    assert not grants[hash_key(first.dev_key)].admin
    assert grants[hash_key(first.dev_admin_key)].admin


def test_settings_production_grants_no_dev_key() -> None:
    settings = Settings(secret=SECRET)
    assert hash_key(settings.dev_key) not in settings.grants()


def test_settings_refuse_raw_api_keys() -> None:
    with pytest.raises(ValidationError, match="never raw keys"):
        Settings(secret=SECRET, api_keys={"my-plain-key": "acme"})


def test_settings_read_keys_origins_and_models_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    digest = hash_key("k1")
    monkeypatch.setenv("GENQ_SECRET", SECRET)
    monkeypatch.setenv(
        "GENQ_API_KEYS",
        f'{{"sha256:{digest}": "acme", "sha256:{"0" * 64}": {{"tenant": "ops", "admin": true}}}}',
    )
    monkeypatch.setenv("GENQ_CORS_ORIGINS", "https://a.example, https://b.example")
    monkeypatch.setenv("GENQ_MODELS", "demo/fast,openai/gpt-4o-mini")
    settings = Settings()
    assert settings.grants()[digest].tenant == "acme"
    assert settings.grants()["0" * 64].admin
    assert settings.cors_origins == ["https://a.example", "https://b.example"]
    assert settings.routing().allowed_models == ["demo/fast", "openai/gpt-4o-mini"]


def test_settings_refuse_a_bad_tenant_name() -> None:
    with pytest.raises(ValidationError):
        Settings(secret=SECRET, api_keys={f"sha256:{'1' * 64}": "bad tenant!"})
