"""deploy/ and compose.yaml's ``observability`` profile, checked without Docker: the files'
shapes and their names agree with one another, and every metric the Grafana dashboard queries
is one a live gateway and worker really export."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.e2e.browser import DEV_ADMIN_KEY, running_stack
from tests.ops.test_compose import compose, interpolate
from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
PROFILE = "observability"
METRIC = re.compile(r"\b(?:genq|gen_ai)_[a-z0-9_]+")
LABELS = re.compile(r"by \([^)]*\)|\{[^}]*\}")
"""What in a query names labels, not metrics: ``by (...)`` and ``{...}`` selectors."""


def load(path: Path) -> dict[str, Any]:
    return dict(yaml.safe_load(path.read_text()))


def dashboard_exprs() -> list[str]:
    dashboard = json.loads((DEPLOY / "grafana" / "genq-dashboard.json").read_text())
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def test_the_observability_profile_adds_a_collector_jaeger_prometheus_and_grafana() -> None:
    services = compose()["services"]
    extra = {name for name, s in services.items() if PROFILE in s.get("profiles", [])}
    assert extra == {"otel-collector", "jaeger", "prometheus", "grafana"}
    assert not any(services[name].get("profiles") for name in ("redis", "gateway", "worker"))
    for name in extra:
        for volume in services[name].get("volumes", []):
            source = interpolate(volume, {}).split(":")[0]
            assert (ROOT / source).exists(), f"{name} mounts {source}, which is missing"
    # Off unless an endpoint is given: the core services pass the variable through, empty.
    for name in ("gateway", "worker"):
        env = services[name]["environment"]
        assert interpolate(env["OTEL_EXPORTER_OTLP_ENDPOINT"], {}) == ""


def test_the_collector_sends_traces_to_jaeger_and_metrics_to_prometheus() -> None:
    config = load(DEPLOY / "otel-collector.yaml")
    assert config["receivers"]["otlp"]["protocols"]["http"]["endpoint"].endswith(":4318")
    pipelines = config["service"]["pipelines"]
    for pipeline in pipelines.values():
        for part in ("receivers", "processors", "exporters"):
            for name in pipeline[part]:
                assert name in config[part], f"{name} is used but not defined"
    (traces_to,) = pipelines["traces"]["exporters"]
    assert config["exporters"][traces_to]["endpoint"].split(":")[0] == "jaeger"
    (metrics_to,) = pipelines["metrics"]["exporters"]
    scraped = load(DEPLOY / "prometheus.yaml")["scrape_configs"]
    collector_port = config["exporters"][metrics_to]["endpoint"].rsplit(":", 1)[1]
    targets = {t for job in scraped for c in job.get("static_configs", []) for t in c["targets"]}
    assert targets == {"gateway:8000", f"otel-collector:{collector_port}"}
    worker_env = compose()["services"]["worker"]["environment"]
    first_port = int(interpolate(worker_env["GENQ_METRICS_PORT"], {}))
    worker_job = next(job for job in scraped if job["job_name"] == "genq-worker")
    assert first_port in {c["port"] for c in worker_job["dns_sd_configs"]}


def test_the_dashboard_queries_metrics_genq_exports(
    redis_url: str, request: pytest.FixtureRequest
) -> None:
    wanted = {name for expr in dashboard_exprs() for name in METRIC.findall(LABELS.sub("", expr))}
    assert len(wanted) >= 12
    port = free_port()
    env = {"GENQ_METRICS_PORT": str(port)}
    with running_stack(redis_url, request.node.name, **env) as stack:
        job = stack.submit({"model": "demo/fast", "prompt": "dashboard"})
        assert stack.result(job["id"])["status"] == "completed"
        gateway = httpx.get(
            f"{stack.base_url}/metrics", headers={"Authorization": f"Bearer {DEV_ADMIN_KEY}"}
        )
        gateway.raise_for_status()
        worker = httpx.get(f"http://127.0.0.1:{port}/metrics")
        worker.raise_for_status()
    exported = {
        name
        for line in (gateway.text + worker.text).splitlines()
        if line.startswith("# TYPE ")
        for name in [line.split()[2]]
    }
    histograms = {name + "_bucket" for name in exported}
    missing = {name for name in wanted if name not in exported | histograms}
    assert not missing, f"the dashboard queries metrics nobody exports: {sorted(missing)}"
