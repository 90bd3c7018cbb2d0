"""A tenant's budget as the settings give it (genq_contract.budget_limits): ``GENQ_TENANT_BUDGETS``
read as JSON numbers only, and the limits it makes."""

from __future__ import annotations

import pytest

from genq_contract.budget_limits import Limits, configured_limits
from genq_contract.settings import CommonSettings


def test_tenant_budgets_setting_reads_json_and_refuses_bad_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GENQ_TENANT_BUDGETS", '{"acme": {"daily_usd": 5}, "b": {}}')
    settings = CommonSettings(_env_file=None)  # type: ignore[call-arg]
    assert configured_limits(settings, "acme") == Limits(5_000_000_000, None)
    assert configured_limits(settings, "b") is None  # neither limit: no budget
    monkeypatch.setenv("GENQ_TENANT_BUDGETS", '{"acme": {"daily_usd": -1}}')
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        CommonSettings(_env_file=None)  # type: ignore[call-arg]
    monkeypatch.setenv("GENQ_TENANT_BUDGETS", '{"acme": {"weekly_usd": 1}}')
    with pytest.raises(ValueError, match="weekly_usd"):
        CommonSettings(_env_file=None)  # type: ignore[call-arg]


@pytest.mark.parametrize("amount", ['"1"', "true", '"5.0"'])
def test_tenant_budgets_setting_takes_json_numbers_only(
    monkeypatch: pytest.MonkeyPatch, amount: str
) -> None:
    monkeypatch.setenv("GENQ_TENANT_BUDGETS", f'{{"acme": {{"monthly_usd": {amount}}}}}')
    with pytest.raises(ValueError, match="monthly_usd"):
        CommonSettings(_env_file=None)  # type: ignore[call-arg]
    monkeypatch.setenv("GENQ_TENANT_BUDGETS", '{"acme": {"monthly_usd": 5, "daily_usd": null}}')
    settings = CommonSettings(_env_file=None)  # type: ignore[call-arg]
    assert configured_limits(settings, "acme") == Limits(None, 5_000_000_000)
