"""Routing: the allow-list, model -> provider -> queue, and settings from the environment."""

from __future__ import annotations

import subprocess
import sys

import pytest

from genq_contract.routing import (
    ModelNotAllowedError,
    Routing,
    RoutingSettings,
    UnsupportedParamError,
)


def test_routing_provider_is_the_part_before_the_slash() -> None:
    routing = Routing.build(["demo/fast", "openai/gpt-4o-mini"])
    assert routing.provider_of("demo/fast").name == "demo"
    assert routing.provider_of("openai/gpt-4o-mini").name == "openai"
    assert routing.queue_prefix("openai/gpt-4o-mini") == "gen:openai"


def test_routing_rejects_a_model_off_the_allow_list() -> None:
    routing = Routing.build(["demo/fast"])
    with pytest.raises(ModelNotAllowedError) as info:
        routing.provider_of("openai/gpt-4o")
    assert info.value.model == "openai/gpt-4o"
    assert "demo/fast" in str(info.value)


def test_routing_pattern_allows_every_model_of_a_provider() -> None:
    routing = Routing.build(["demo/*"])
    assert routing.provider_of("demo/anything").name == "demo"
    with pytest.raises(ModelNotAllowedError):
        routing.provider_of("demo/")
    with pytest.raises(ModelNotAllowedError):
        routing.provider_of("demox/fast")


def test_routing_override_sends_a_model_to_another_provider_queue() -> None:
    routing = Routing.build(
        ["openai/gpt-4o-mini", "openai/gpt-4o"],
        model_providers={"openai/gpt-4o": "openai-batch"},
        concurrency={"openai-batch": 2},
        namespace="gen-test",
    )
    assert routing.queue_prefix("openai/gpt-4o-mini") == "gen-test:openai"
    batch = routing.provider_of("openai/gpt-4o")
    assert (batch.name, batch.queue_prefix, batch.concurrency) == (
        "openai-batch",
        "gen-test:openai-batch",
        2,
    )


def test_routing_each_provider_queue_has_its_own_hash_tag() -> None:
    from genq import Keys

    routing = Routing.build(["demo/fast", "openai/gpt-4o-mini"])
    tags = {Keys(p.queue_prefix).tag for p in routing.providers.values()}
    assert tags == {"{gen:demo}", "{gen:openai}"}


def test_routing_rejects_bad_configuration() -> None:
    with pytest.raises(ValueError, match="provider"):
        Routing.build(["gpt-4o"])
    with pytest.raises(ValueError, match="concurrency"):
        Routing.build(["demo/fast"], concurrency={"demo": 0})
    with pytest.raises(ValueError, match="namespace"):
        Routing.build(["demo/fast"], namespace="{x}")


def test_routing_check_params_accepts_demo_params_only_for_demo_models() -> None:
    routing = Routing.build(["demo/fast", "openai/gpt-4o-mini"])
    routing.check_params("demo/fast", {"temperature": 0.1, "demo_fault": "500"})
    routing.check_params("openai/gpt-4o-mini", {"max_tokens": 5})
    with pytest.raises(UnsupportedParamError, match="demo_fault"):
        routing.check_params("openai/gpt-4o-mini", {"demo_fault": "500"})
    with pytest.raises(UnsupportedParamError, match="api_key"):
        routing.check_params("demo/fast", {"api_key": "sk-stolen"})


def test_routing_settings_read_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GENQ_MODELS", "demo/*, openai/gpt-4o-mini")
    monkeypatch.setenv("GENQ_PROVIDER_CONCURRENCY", "openai=3")
    monkeypatch.setenv("GENQ_PROVIDER_API_BASES", '{"openai": "http://127.0.0.1:9/v1"}')
    monkeypatch.setenv("GENQ_PROVIDER_API_KEY_ENVS", "openai=MY_OPENAI_KEY")
    monkeypatch.setenv("GENQ_QUEUE_NAMESPACE", "t-ns")
    routing = RoutingSettings().routing()
    openai = routing.provider_of("openai/gpt-4o-mini")
    assert openai.concurrency == 3
    assert openai.api_base == "http://127.0.0.1:9/v1"
    assert openai.api_key_env == "MY_OPENAI_KEY"
    assert openai.queue_prefix == "t-ns:openai"
    assert routing.provider_of("demo/slow").concurrency == 8


def test_routing_module_does_not_import_litellm() -> None:
    code = (
        "import sys, genq_contract.routing, providers.retry_after, providers.redact; "
        "print('litellm' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_demo_models_are_on_the_default_allow_list_only_in_dev_mode(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("GENQ_DEV", "GENQ_MODELS"):
        monkeypatch.delenv(name, raising=False)
    production = RoutingSettings().routing()
    assert not any(m.startswith("demo/") for m in production.allowed_models)
    assert "demo" not in production.providers
    monkeypatch.setenv("GENQ_DEV", "1")
    dev = RoutingSettings().routing()
    assert {"demo/fast", "demo/slow"} <= set(dev.allowed_models)
    monkeypatch.setenv("GENQ_MODELS", "openai/gpt-4o-mini")
    assert RoutingSettings().routing().allowed_models == ["openai/gpt-4o-mini"]  # as configured
