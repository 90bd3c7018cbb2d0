"""LiteLLM's per-stream work the worker turns off (providers/_litellm.py), and what stays on."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import tomllib
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from litellm.integrations.custom_logger import CustomLogger
from litellm.litellm_core_utils.streaming_handler import CustomStreamWrapper

import providers._litellm_patches as patches
from providers._litellm import litellm
from providers._litellm_patches import TESTED_VERSIONS, patched
from providers.litellm_adapter import Delta, stream_chat

ROOT = Path(__file__).resolve().parents[2]


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


async def collect(params: dict[str, Any], silence_timeout: float = 5.0) -> list[Delta]:
    stream = stream_chat("demo/instant", user("lean"), params, silence_timeout=silence_timeout)
    async with contextlib.aclosing(stream):
        return [d async for d in stream]


def test_switches_target_the_litellm_the_project_pins() -> None:
    """They replace private LiteLLM methods: an upgrade must re-check them (and move the pin)."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    pins = [d for d in pyproject["project"]["optional-dependencies"]["worker"] if "litellm" in d]
    assert pins == [f"litellm=={TESTED_VERSIONS['litellm']}"]
    assert patched()


async def test_stream_still_carries_text_and_finish_reason() -> None:
    deltas = await collect({"demo_tokens": 30})
    assert len("".join(d.text for d in deltas).split()) == 30
    assert [d.finish_reason for d in deltas if d.finish_reason] == ["stop"]
    # The demo reports no usage, and LiteLLM's own count of it is not passed off as a report.
    assert [d.usage for d in deltas if d.usage] == []


class Recorder(CustomLogger):
    def __init__(self) -> None:
        super().__init__()
        self.successes: list[Any] = []

    async def async_log_success_event(
        self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        self.successes.append(response_obj)


async def test_a_registered_success_callback_still_gets_the_whole_stream() -> None:
    """Success logging is skipped only while nobody listens: registering a callback (as an
    operator adding an observability integration would) brings it back."""
    recorder = Recorder()
    litellm.callbacks = [recorder]
    try:
        await collect({"demo_tokens": 7})
        async with asyncio.timeout(5):
            while not recorder.successes:
                await asyncio.sleep(0.01)
    finally:  # LiteLLM copied the callback into its other lists: empty them all
        litellm.logging_callback_manager._reset_all_callbacks()
    text = recorder.successes[0].choices[0].message.content
    assert len(re.findall(r"\S+", text)) == 7


async def test_silence_counts_only_the_wait_for_the_provider() -> None:
    """A consumer slower than the silence timeout between chunks (a slow Redis write) is not a
    silent provider."""
    stream = stream_chat(
        "demo/instant", user("slow consumer"), {"demo_tokens": 3}, silence_timeout=0.2
    )
    texts = []
    async with contextlib.aclosing(stream):
        async for delta in stream:
            texts.append(delta.text)
            await asyncio.sleep(0.3)
    assert len("".join(texts).split()) == 3


async def test_litellm_patches_another_litellm_turns_them_off_with_one_warning_and_streams_work(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    patched_creator = CustomStreamWrapper.model_response_creator
    monkeypatch.setitem(patches.TESTED_VERSIONS, "litellm", "0.0.1")
    try:
        with caplog.at_level(logging.WARNING, logger="providers"):
            assert patches.check() is False
        assert [r.getMessage() for r in caplog.records] == [
            f"litellm {version('litellm')} is not the tested 0.0.1: genq's LiteLLM patches are "
            "off; LiteLLM's own per-chunk bookkeeping runs (slower streams)"
        ]
        assert not patched() and patches.set_patched(True) is False
        assert CustomStreamWrapper.model_response_creator is not patched_creator
        deltas = await collect({"demo_tokens": 12})
        assert len("".join(d.text for d in deltas).split()) == 12
        assert [d.finish_reason for d in deltas if d.finish_reason] == ["stop"]
    finally:
        monkeypatch.undo()
        assert patches.check()
    assert CustomStreamWrapper.model_response_creator is patched_creator
