"""examples/usechat (a React app on the AI SDK's ``useChat``) in Chromium, against the real
gateway, worker and Redis processes and the fake OpenAI server: the built app is served by
``vite preview``, whose proxy adds the API key, as a user would run it. Every control the app
has is used, and the server's side (the generation's record, the provider's requests) is
checked after each."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Iterator
from urllib.parse import parse_qs, urlparse

import httpx
import pytest
from playwright.sync_api import Locator, Page, expect

from tests.e2e.browser import DEV_KEY, ROOT, Proc, Stack, fake_openai_env, running_stack
from tests.fakes.openai_server import FakeOpenAI, Reply, reasoning_deltas, tool_call_deltas
from tests.polling import waited_for
from tests.ports import free_port

pytestmark = [pytest.mark.browser, pytest.mark.slow]

APP = ROOT / "examples" / "usechat"
VITE = APP / "node_modules" / "vite" / "bin" / "vite.js"
MODEL = "openai/gpt-4o-mini"  # served by the fake OpenAI server
LONG = 60_000  # ms: an answer plus, on a loaded machine, a worker's start-up

# Every distinct list of the assistant messages' texts the page showed, in order (JSON strings).
ANSWERS_SEEN = """
window.__answers = [];
new MutationObserver(() => {
  const answers = [...document.querySelectorAll(".message.assistant")].map((message) =>
    [...message.querySelectorAll(".text")].map((part) => part.textContent).join(""));
  const now = JSON.stringify(answers);
  if (window.__answers[window.__answers.length - 1] !== now) window.__answers.push(now);
}).observe(document, {subtree: true, childList: true, characterData: true});
"""


@contextlib.contextmanager
def usechat_app(stack: Stack) -> Iterator[str]:
    """``vite preview`` of the built example on a free port, proxying ``/v1`` to the stack's
    gateway with the dev key; yields the app's address."""
    node = shutil.which("node")
    assert node, "node is not installed (Node 20.19+ runs the useChat example)"
    if not (APP / "dist" / "index.html").is_file() or not VITE.is_file():
        pytest.fail("the useChat example is not built: run `make usechat` (make test does)")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GENQ_")}
    env.update(GENQ_URL=stack.base_url, GENQ_API_KEY=DEV_KEY)
    # Vite refuses a second preview of a project (a lock file); this one has a port of its
    # own, so a developer's `npm run preview` may run beside it.
    args = [node, str(VITE), "preview", "--host", "127.0.0.1", "--port", str(port)]
    args += ["--strictPort", "--bypass-lock"]
    preview = Proc("vite-preview", args, env, stack.log_dir / "vite-preview.log", cwd=APP).start()
    url = f"http://127.0.0.1:{port}/"

    def serving() -> bool:
        assert preview.alive, f"vite preview exited:\n{preview.log_tail()}"
        with contextlib.suppress(httpx.HTTPError):
            return httpx.get(url, timeout=1).status_code == 200
        return False

    try:
        assert waited_for(serving, 30, 0.1), f"vite preview not up:\n{preview.log_tail()}"
        yield url
    finally:
        preview.stop()
        print(f"--- vite preview ---\n{preview.log_tail()}")


def open_app(page: Page, url: str, model: str = MODEL) -> str:
    """Opens the app, picks ``model``; returns the chat id the app put in the address."""
    page.add_init_script(ANSWERS_SEEN)
    page.goto(url)
    expect(page.locator("#model option")).not_to_have_count(0)
    page.select_option("#model", model)
    return chat_id_of(page)


def chat_id_of(page: Page) -> str:
    ids = parse_qs(urlparse(page.url).query).get("chat")
    assert ids, f"the app shows no chat id in its address: {page.url}"
    return ids[0]


def send(page: Page, text: str) -> None:
    page.fill("#input", text)
    page.click("#send")
    expect(page.locator("#input")).to_have_value("")


def answer_text(message: Locator) -> str:
    return "".join(message.locator(".text").all_text_contents())


def generation_of(message: Locator) -> str:
    """The generation behind an answer (the ``start`` part's message metadata)."""
    generation = message.locator(".generation")
    expect(generation).to_have_count(1)
    return str(generation.get_attribute("data-generation-id"))


def answers_seen(page: Page) -> list[list[str]]:
    return [json.loads(seen) for seen in page.evaluate("window.__answers")]


def resume_status(stack: Stack, chat_id: str) -> int:
    """What ``useChat``'s resume gets for the chat now (204: nothing running)."""
    with stack.client() as client:
        return client.get(f"/v1/ui/chat/{chat_id}/stream").status_code


def words(prefix: str, count: int) -> list[str]:
    return [f"{prefix}{n} " for n in range(count)]


def test_usechat_example_streams_resumes_after_a_reload_and_recovers_an_answer_ended_away(
    redis_url: str, page: Page, request: pytest.FixtureRequest
) -> None:
    first, second = words("one", 50), words("two", 30)
    with FakeOpenAI() as fake:
        fake.plan(Reply.stream(first, delay=0.1))
        fake.plan(Reply.stream(second, delay=0.05))
        env = fake_openai_env(fake.base_url)
        with running_stack(redis_url, request.node.name, **env) as stack, usechat_app(stack) as url:
            chat_id = open_app(page, url)
            send(page, "Count to fifty")
            answer = page.locator(".message.assistant").first

            # The text arrives while the provider is still sending: the proxy does not buffer.
            expect(answer.locator(".text")).to_contain_text("one3 ", timeout=LONG)
            assert fake.requests[0].finished_at is None, "the answer arrived only at its end"
            generation = generation_of(answer)

            # A reload mid-answer: the same chat, its question kept, the answer resumed from
            # genq and finished, its text shown once at every moment.
            page.reload()
            assert chat_id_of(page) == chat_id
            expect(page.locator(".message.user")).to_have_text(["Count to fifty"])
            expect(answer.locator(".text")).to_have_text("".join(first), timeout=LONG)
            expect(page.locator("#status")).to_have_text("ready")
            assert answer_text(answer) == "".join(first)
            assert generation_of(answer) == generation
            seen = [texts[0] for texts in answers_seen(page) if texts]
            assert all("".join(first).startswith(text) for text in seen), seen
            assert any(0 < len(text) < len("".join(first)) for text in seen), "no live resume"
            assert stack.result(generation)["text"] == "".join(first)
            assert resume_status(stack, chat_id) == 204
            assert fake.count() == 1, "the reload called the provider again"

            # The page goes away mid-answer and comes back after it ended: resume has nothing
            # (204), so the app sends the question again with its id, which re-attaches to the
            # same generation: the whole answer, the provider not called again.
            send(page, "Now to thirty")
            later = page.locator(".message.assistant").nth(1)
            expect(later.locator(".text")).to_contain_text("two1 ", timeout=LONG)
            generation = generation_of(later)
            page.goto("about:blank")
            assert stack.result(generation)["text"] == "".join(second)
            page.goto(f"{url}?chat={chat_id}")
            expect(page.locator(".message.user")).to_have_text(["Count to fifty", "Now to thirty"])
            expect(later.locator(".text")).to_have_text("".join(second).strip())
            expect(page.locator("#status")).to_have_text("ready")
            assert generation_of(later) == generation
            assert answer_text(page.locator(".message.assistant").first) == "".join(first)
            assert fake.count() == 2, "coming back called the provider again"
            sent = fake.requests[1].body["messages"]
            assert [m["role"] for m in sent] == ["user", "assistant", "user"]
            assert sent[1]["content"] == "".join(first), "the chat's history was not sent"


def test_usechat_example_stop_cancels_the_generation(
    redis_url: str, page: Page, request: pytest.FixtureRequest
) -> None:
    partial = ["Once ", "upon ", "a ", "time "]
    with FakeOpenAI() as fake:
        fake.plan(Reply.hang(after=len(partial), tokens=partial, delay=0.05))
        env = fake_openai_env(fake.base_url)
        with running_stack(redis_url, request.node.name, **env) as stack, usechat_app(stack) as url:
            chat_id = open_app(page, url)
            expect(page.locator("#stop")).to_be_disabled()
            send(page, "Tell me a story")
            answer = page.locator(".message.assistant")
            expect(answer.locator(".text")).to_have_text("Once upon a time", timeout=LONG)
            generation = generation_of(answer)

            page.click("#stop")
            expect(page.locator("#status")).to_have_text("ready", timeout=10_000)
            expect(page.locator("#stop")).to_be_disabled()
            assert stack.record(generation)["status"] == "cancelled"
            assert fake.requests[0].wait_disconnected(10), "the provider call was not cancelled"
            assert answer_text(answer) == "".join(partial), "the partial answer is gone"
            assert resume_status(stack, chat_id) == 204

            # Reloaded, the stopped answer stays as it was and nothing is sent again.
            page.reload()
            expect(page.locator(".message.user")).to_have_text(["Tell me a story"])
            expect(answer.locator(".text")).to_have_text("Once upon a time")
            expect(page.locator("#status")).to_have_text("ready")
            time.sleep(1)  # room for a resend that must not happen
            assert fake.count() == 1


def test_usechat_example_answers_its_clock_tool_and_shows_reasoning(
    redis_url: str, page: Page, request: pytest.FixtureRequest
) -> None:
    thought = "The user wants the time: ask the browser's clock, in French."
    arguments = json.dumps({"locale": "fr-FR"})
    with FakeOpenAI() as fake:
        deltas = [*reasoning_deltas(thought, piece=6)]
        deltas += tool_call_deltas([("call_clock", "get_local_time", arguments)], piece=4)
        fake.plan(Reply.deltas_of(deltas, delay=0.02, finish_reason="tool_calls"))
        fake.plan(Reply.stream(["Il est ", "l'heure."], delay=0.02))
        env = fake_openai_env(fake.base_url)
        with running_stack(redis_url, request.node.name, **env) as stack, usechat_app(stack) as url:
            open_app(page, url)
            page.check("#offer-clock")
            send(page, "What time is it?")

            answer = page.locator(".message.assistant")
            tool = answer.locator(".tool")
            expect(tool.locator(".tool-name")).to_have_text("get_local_time", timeout=LONG)
            expect(tool.locator(".tool-input")).to_have_text(
                json.dumps(json.loads(arguments), indent=2)
            )
            # The app ran the tool and useChat sent its output back: the answer goes on.
            expect(tool).to_have_attribute("data-state", "output-available")
            expect(tool.locator(".tool-state")).to_have_text("output-available")
            output = json.loads(str(tool.locator(".tool-output").text_content()))
            assert set(output) == {"time", "timeZone"}
            expect(answer.locator(".text")).to_have_text("Il est l'heure.", timeout=LONG)
            expect(page.locator("#status")).to_have_text("ready")

            reasoning = answer.locator(".reasoning")
            assert reasoning.get_attribute("open") is None, "the reasoning opened itself"
            reasoning.locator("summary").click()
            expect(reasoning).to_have_attribute("open", "")
            expect(reasoning.locator("p")).to_have_text(thought)

            # The provider was offered the tool, then got its call and the browser's answer.
            offered = fake.requests[0].body["tools"]
            assert [t["function"]["name"] for t in offered] == ["get_local_time"]
            history = fake.requests[1].body["messages"]
            assert [m["role"] for m in history] == ["user", "assistant", "tool"]
            assert history[1]["tool_calls"][0]["id"] == "call_clock"
            assert history[2]["tool_call_id"] == "call_clock"
            assert json.loads(history[2]["content"]) == output
            assert fake.count() == 2

            # A model that takes no tools: genq refuses the question before queueing it, and
            # the app says why.
            page.select_option("#model", "demo/fast")
            send(page, "And in Tokyo?")
            expect(page.locator("#status")).to_contain_text("error: ")
            expect(page.locator("#status")).to_contain_text("tools")
            assert fake.count() == 2


def test_usechat_example_shows_the_answer_once_after_its_worker_died(
    redis_url: str, page: Page, request: pytest.FixtureRequest
) -> None:
    lost, kept = ["Lost ", "words "], words("kept", 20)
    with FakeOpenAI() as fake:
        fake.plan(Reply.hang(after=len(lost), tokens=lost, delay=0.05))
        fake.plan(Reply.stream(kept, delay=0.15))
        env = fake_openai_env(fake.base_url)
        # A short lease, so the job is taken over seconds after its worker died.
        with (
            running_stack(redis_url, request.node.name, workers=0, GENQ_LEASE="2", **env) as stack,
            usechat_app(stack) as url,
        ):
            first_worker = stack.start_worker()
            open_app(page, url)
            send(page, "Say something")
            answer = page.locator(".message.assistant")
            expect(answer.locator(".text")).to_have_text("Lost words", timeout=LONG)
            generation = generation_of(answer)

            # The retried attempt streams in place of the lost one, whose parts useChat drops
            # (genq sends reset-step); the app notes the restart.
            first_worker.kill()
            stack.start_worker()
            expect(answer.locator(".text")).to_contain_text("kept1 ", timeout=LONG)
            expect(answer.locator(".restarted")).to_have_count(1)
            seen = [texts[0] for texts in answers_seen(page) if texts]
            assert not any("Lost" in text and "kept" in text for text in seen), seen
            assert "Lost" not in answer_text(answer)

            # A reload replays the stream from its start, to the same answer.
            page.reload()
            expect(answer.locator(".text")).to_have_text("".join(kept), timeout=LONG)
            expect(page.locator("#status")).to_have_text("ready")
            assert answer_text(answer) == "".join(kept)
            expect(answer.locator(".restarted")).to_have_count(1)
            assert stack.result(generation)["text"] == "".join(kept)
            assert stack.record(generation)["attempt"] >= 2
