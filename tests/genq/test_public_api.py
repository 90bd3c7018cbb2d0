import importlib

import genq

SPEC_NAMES = {
    "Queue",
    "Worker",
    "Job",
    "Event",
    "QueueStats",
    "Enqueued",
    "RetryJobError",
    "TerminalJobError",
    "JobLeaseLostError",
    "JobNotFoundError",
    "JobFailedError",
    "JobCancelledError",
    "JobExistsError",
}


def test_public_api_every_name_in_all_imports():
    module = importlib.import_module("genq")
    for name in module.__all__:
        assert getattr(module, name) is not None, name


def test_public_api_has_every_spec_name():
    assert set(genq.__all__) >= SPEC_NAMES


def test_public_api_errors_share_one_root():
    for name in SPEC_NAMES:
        obj = getattr(genq, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, genq.GenqError), name


def test_public_api_has_pull_ack():
    assert "PulledJob" in genq.__all__
    for method in ("pull", "ack", "nack", "extend", "push_events"):
        assert callable(getattr(genq.Queue, method)), method
