"""The demo provider: deterministic text through LiteLLM, and faults on request."""

from __future__ import annotations

import contextlib
import time

import pytest

from genq import RetryJobError, TerminalJobError
from providers.demo import FAULTS_ENABLED, DemoScript
from providers.errors import RateLimitedError
from providers.litellm_adapter import stream_chat

FAULTS = {FAULTS_ENABLED: True}
"""What the worker adds where fault injection is on (GENQ_DEMO_FAULTS, dev mode)."""


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


async def run(model: str, prompt: str, params: dict, silence_timeout: float = 5.0) -> str:
    stream = stream_chat(model, user(prompt), params, silence_timeout=silence_timeout)
    async with contextlib.aclosing(stream):
        return "".join([d.text async for d in stream])


def test_demo_script_is_deterministic_and_sized() -> None:
    a = DemoScript.from_request("demo/fast", user("tell me a story"), {"demo_tokens": 12})
    b = DemoScript.from_request("demo/fast", user("tell me a story"), {"demo_tokens": 12})
    assert a == b
    assert len(a.tokens) == 12
    assert a.text.startswith("Echo: tell me a story This answer")
    long = DemoScript.from_request("demo/fast", user("x"), {"demo_tokens": 500})
    assert len(long.tokens) == 500


def test_demo_speed_comes_from_the_model_name_or_params() -> None:
    assert DemoScript.from_request("demo/fast", user("x"), {}).delay == 0.02
    assert DemoScript.from_request("demo/slow", user("x"), {}).delay == 0.2
    assert DemoScript.from_request("demo/instant", user("x"), {}).delay == 0.0
    assert DemoScript.from_request("demo/slow", user("x"), {"demo_delay_ms": 5}).delay == 0.005


def test_demo_faults_from_prompt_markers_and_params() -> None:
    marker = DemoScript.from_request("demo/fast", user("hi [demo:429:7]"), FAULTS)
    assert (marker.fault, marker.retry_after) == ("429", 7.0)
    assert "[demo:" not in marker.text.split("This answer")[0]
    drop = DemoScript.from_request("demo/fast", user("[demo:drop:10]"), FAULTS)
    assert (drop.fault, drop.fault_after) == ("drop", 10)
    param = DemoScript.from_request(
        "demo/fast", user("[demo:500]"), {"demo_fault": "hang", **FAULTS}
    )
    assert (param.fault, param.fault_after) == ("hang", 3)
    with pytest.raises(ValueError, match="demo_fault"):
        DemoScript.from_request("demo/fast", user("x"), {"demo_fault": "explode"})


def test_demo_faults_are_ignored_unless_the_worker_enables_them() -> None:
    prompt = user("hi [demo:429:99999999]")
    asked = {"demo_fault": "429", "demo_retry_after": 99999999}
    assert DemoScript.from_request("demo/fast", prompt, FAULTS).fault == "429"
    for params in ({}, asked, {**asked, FAULTS_ENABLED: "yes"}, {FAULTS_ENABLED: 1}):
        script = DemoScript.from_request("demo/fast", prompt, params)
        assert script.fault is None, params
        assert script.text.startswith("Echo: hi [demo:429:99999999] This answer")


def test_demo_fault_hits_only_the_chosen_attempts() -> None:
    params = {"demo_fault": "500", "demo_fault_attempts": 2, **FAULTS}
    assert DemoScript.from_request("demo/x", user("x"), {**params, "demo_attempt": 2}).fault
    assert not DemoScript.from_request("demo/x", user("x"), {**params, "demo_attempt": 3}).fault


async def test_demo_streams_its_script_through_litellm() -> None:
    params = {"demo_tokens": 20, "demo_delay_ms": 0}
    text = await run("demo/anything", "hello", params)
    assert text == DemoScript.from_request("demo/anything", user("hello"), params).text


async def test_demo_streams_at_the_requested_speed() -> None:
    started = time.monotonic()
    await run("demo/fast", "x", {"demo_tokens": 6, "demo_delay_ms": 50})
    assert time.monotonic() - started >= 0.3


async def test_demo_429_carries_retry_after() -> None:
    with pytest.raises(RateLimitedError) as info:
        await run("demo/fast", "x", {"demo_fault": "429", "demo_retry_after": 4, **FAULTS})
    assert info.value.retry_after == 4.0
    assert info.value.provider_wide


async def test_demo_500_is_retryable_and_400_terminal() -> None:
    with pytest.raises(RetryJobError):
        await run("demo/fast", "[demo:500]", FAULTS)
    with pytest.raises(TerminalJobError):
        await run("demo/fast", "[demo:400]", FAULTS)


async def test_demo_drop_is_retryable_after_partial_output() -> None:
    seen: list[str] = []
    stream = stream_chat(
        "demo/instant", user("x"), {"demo_fault": "drop", "demo_after": 4, **FAULTS}
    )
    with pytest.raises(RetryJobError, match="dropped"):
        async with contextlib.aclosing(stream):
            async for delta in stream:
                seen.append(delta.text)
    assert len([t for t in seen if t]) == 4


async def test_demo_hang_trips_the_silence_timeout() -> None:
    started = time.monotonic()
    with pytest.raises(RetryJobError, match="silence timeout"):
        await run("demo/instant", "[demo:hang]", FAULTS, silence_timeout=0.3)
    assert time.monotonic() - started < 2


async def test_demo_fault_is_skipped_on_a_later_attempt() -> None:
    text = await run("demo/instant", "[demo:500]", {"demo_attempt": 2, "demo_tokens": 5, **FAULTS})
    assert text.startswith("Echo:")


@pytest.mark.parametrize(
    "params", [{"demo_fault": "explode"}, {"demo_tokens": 0}, {"demo_delay_ms": "soon"}]
)
async def test_demo_bad_params_are_terminal(params: dict) -> None:
    with pytest.raises(TerminalJobError, match="demo provider"):
        await run("demo/fast", "x", params)


async def test_demo_fault_params_stream_plain_text_when_faults_are_off() -> None:
    params = {"demo_fault": "429", "demo_retry_after": 99999999, "demo_tokens": 6}
    text = await run("demo/instant", "[demo:429:99999999]", params)
    assert text.startswith("Echo: [demo:429:99999999]")


async def test_demo_stops_at_max_tokens_unless_an_overrun_fault_is_on() -> None:
    bounded = {"max_tokens": 4, "demo_tokens": 30, "demo_delay_ms": 0}
    deltas = [d async for d in stream_chat("demo/instant", user("hi"), bounded)]
    assert "".join(d.text for d in deltas) == "Echo: hi This answer"
    assert deltas[-1].finish_reason == "length"
    overrun = {**bounded, "demo_fault": "overrun"}
    assert (await run("demo/instant", "hi", overrun)) == "Echo: hi This answer"  # faults off
    ignored = DemoScript.from_request("demo/x", user("hi"), {**overrun, **FAULTS})
    assert (len(ignored.tokens), ignored.finish_reason) == (30, "stop")
    marker = DemoScript.from_request("demo/x", user("hi [demo:overrun]"), {**bounded, **FAULTS})
    assert len(marker.tokens) == 30
    assert DemoScript.from_request("demo/x", user("hi"), {"demo_tokens": 30}).finish_reason == (
        "stop"
    )
