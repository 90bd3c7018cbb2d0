"""README's configuration reference lists every GENQ_ setting of every process."""

from __future__ import annotations

from pathlib import Path

from gateway.settings import Settings
from genq_contract.routing import RoutingSettings
from workers.settings import WorkerSettings

README = Path(__file__).resolve().parents[2] / "README.md"


def test_docs_configuration_reference_lists_every_setting() -> None:
    text = README.read_text()
    assert text.startswith("# genq\n\n```sh\nmake dev")  # the two commands stay on top
    reference = text.split("## Configuration reference", 1)[1].split("\n## ", 1)[0]
    rows = {line.split("`")[1] for line in reference.splitlines() if line.startswith("| `GENQ_")}
    fields = set(RoutingSettings.model_fields) | set(Settings.model_fields)
    fields |= set(WorkerSettings.model_fields)
    assert rows == {f"GENQ_{name.upper()}" for name in fields}
