"""AnthropicSummarizer through the real ``anthropic`` SDK client: an httpx2 mock transport (the SDK's own httpx
fork) stands in for the Messages API, and a local HTTP server on 127.0.0.1 for the real network path."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anthropic
import httpx2
import pytest

from brutus.errors import InvalidInput, SummarizerError
from brutus.models import CacheTokens, TokenCounts
from brutus.render import validate_anthropic
from brutus.summarizers import (
    COMPACTION_SYSTEM_PROMPT,
    DEFAULT_SUMMARY_PROMPT,
    EPISODIC_SYSTEM_PROMPT,
    AnthropicSummarizer,
    AsyncSummarizer,
    Summarizer,
    SummaryRequest,
)
from brutus.summarizers.prompts import GOAL_BATCH_PROMPT, TOOL_CALL_PROMPT
from history_builders import assistant, compaction, summary, text, tool, user

MODEL = "claude-haiku-4-5"
ANSWERED_BY = "claude-haiku-4-5-20251001"


# -- the fake Messages API -------------------------------------------------------------------------------


def reply(
    text_: str | None = "I fixed the login bug in src/auth.py; next I run the full suite.",
    *,
    stop: str = "end_turn",
    usage: dict[str, Any] | None = None,
    content: list[dict[str, Any]] | None = None,
) -> httpx2.Response:
    if content is None:
        content = [] if text_ is None else [{"type": "text", "text": text_}]
    body = {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": ANSWERED_BY,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage or {"input_tokens": 1200, "output_tokens": 300, "cache_read_input_tokens": 100,
                           "cache_creation_input_tokens": 50},
    }
    return httpx2.Response(200, json=body)


def failure(status: int, kind: str, message: str) -> httpx2.Response:
    # retry-after-ms keeps the SDK's retry back-off at a millisecond
    return httpx2.Response(status, json={"type": "error", "error": {"type": kind, "message": message}},
                           headers={"retry-after-ms": "1"})


Answer = httpx2.Response | Callable[[httpx2.Request], httpx2.Response]


class FakeAPI:
    """Answers each request with the next scripted response (or raises the next scripted exception)."""

    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        answer = self.answers.pop(0)
        return answer(request) if callable(answer) else answer

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(request.content) for request in self.requests]


def timeout(request: httpx2.Request) -> httpx2.Response:
    raise httpx2.ReadTimeout("timed out", request=request)


def unreachable(request: httpx2.Request) -> httpx2.Response:
    raise httpx2.ConnectError("connection refused", request=request)


def summarizer(api: FakeAPI, *, max_retries: int = 2, **options: Any) -> AnthropicSummarizer:
    client = anthropic.Anthropic(
        api_key="sk-test", base_url="http://fake.anthropic", max_retries=max_retries, timeout=5.0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(api)),
    )
    return AnthropicSummarizer(client, **options)


def async_summarizer(api: FakeAPI, *, max_retries: int = 2) -> AnthropicSummarizer:
    client = anthropic.AsyncAnthropic(
        api_key="sk-test", base_url="http://fake.anthropic", max_retries=max_retries, timeout=5.0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(api)),
    )
    return AnthropicSummarizer(async_client=client)


def history() -> list:
    return [
        user("u1", text("Fix the login bug in src/auth.py.")),
        assistant("a1", tool("call_1", name="bash", input={"command": "pytest -q"}, output="1 failed"),
                  text("One test fails: test_login."), parent="u1"),
    ]


EXPECTED_USAGE = TokenCounts(input=1200, output=300, cache=CacheTokens(read=100, write=50))
EXPECTED_COST = (1200 * 1.0 + 300 * 5.0 + 50 * 1.25 + 100 * 0.1) / 1_000_000


# -- success: the exact request and the answer --------------------------------------------------------------


def test_success_sends_the_exact_request_and_returns_text_usage_and_cost() -> None:
    api = FakeAPI(reply())
    result = summarizer(api).summarize(SummaryRequest(history=history(), instructions="keep the test names"))

    [body] = api.bodies
    assert body == {
        "model": MODEL,
        "max_tokens": 4096,
        "system": COMPACTION_SYSTEM_PROMPT,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Fix the login bug in src/auth.py."}]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "call_1", "name": "bash", "input": {"command": "pytest -q"}},
                {"type": "text", "text": "One test fails: test_login."},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "1 failed"},
                {"type": "text", "text": DEFAULT_SUMMARY_PROMPT + "\n\nAdditional instructions: keep the test names"},
            ]},
        ],
    }
    assert "tools" not in body and "tool_choice" not in body
    validate_anthropic({"system": body["system"], "messages": body["messages"]})
    assert api.requests[0].url.path == "/v1/messages"
    assert api.requests[0].headers["anthropic-version"]

    assert result.text == "I fixed the login bug in src/auth.py; next I run the full suite."
    assert result.model == ANSWERED_BY
    assert result.tokens == EXPECTED_USAGE
    assert result.cost == pytest.approx(EXPECTED_COST)
    assert result.stop_reason == "end_turn"


def test_prompt_becomes_its_own_user_message_after_a_final_assistant_message() -> None:
    api = FakeAPI(reply())
    history_ = [user("u1", text("Rename the module.")), assistant("a1", text("Renamed it.  "), parent="u1")]
    summarizer(api).summarize(SummaryRequest(history=history_))
    messages = api.bodies[0]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"] == [{"type": "text", "text": "Renamed it."}]
    assert messages[2] == {"role": "user", "content": [{"type": "text", "text": DEFAULT_SUMMARY_PROMPT}]}


def test_an_empty_history_sends_the_prompt_alone() -> None:
    api = FakeAPI(reply())
    summarizer(api).summarize(SummaryRequest(history=[]))
    assert api.bodies[0]["messages"] == [{"role": "user", "content": [{"type": "text", "text": DEFAULT_SUMMARY_PROMPT}]}]


def test_previous_summary_is_sent_once() -> None:
    api = FakeAPI(reply(), reply())
    s = summarizer(api)
    s.summarize(SummaryRequest(history=history(), previous_summary="We set up the repository."))
    rolled = [compaction("c1"), summary("s1", "We set up the repository.", parent="c1"), *history()]
    s.summarize(SummaryRequest(history=rolled, previous_summary="We set up the repository."))

    first, second = (body["messages"][-1]["content"][-1]["text"] for body in api.bodies)
    assert first == ("The conversation continues from this earlier summary:\n<previous_summary>\n"
                     "We set up the repository.\n</previous_summary>\n\n" + DEFAULT_SUMMARY_PROMPT)
    assert second == DEFAULT_SUMMARY_PROMPT  # already in the history as the compaction pair
    assert api.bodies[1]["messages"][0]["content"] == [{"type": "text", "text": "What did we do so far?"}]
    assert api.bodies[1]["messages"][1]["content"] == [{"type": "text", "text": "We set up the repository."}]


def test_the_smaller_max_tokens_wins_and_the_model_is_configurable() -> None:
    api = FakeAPI(reply(), reply())
    summarizer(api, model="claude-sonnet-4-6", max_tokens=2048).summarize(SummaryRequest(history=history()))
    summarizer(api).summarize(SummaryRequest(history=history(), max_tokens=1000))
    assert [(b["model"], b["max_tokens"]) for b in api.bodies] == [("claude-sonnet-4-6", 2048), (MODEL, 1000)]


def test_tool_call_tier_uses_the_episodic_prompts() -> None:
    api = FakeAPI(reply("[SUMMARIZED]\n## Result\nI found the failing test."))
    result = summarizer(api).summarize(SummaryRequest(history=history(), kind="tool_call"))
    body = api.bodies[0]
    assert body["system"] == EPISODIC_SYSTEM_PROMPT
    assert body["messages"][-1]["content"][-1] == {"type": "text", "text": TOOL_CALL_PROMPT}
    assert result.text.startswith("[SUMMARIZED]")


def test_goal_batch_sends_the_adr_transcript_in_one_user_message() -> None:
    api = FakeAPI(reply("[GOAL BATCH]\n## Goal Arc\nI fixed login."))
    turns = [
        user("u1", text("Fix the login bug.")),
        assistant("s1", text("[SUMMARIZED]\n## Result\nI fixed it in src/auth.py."), parent="u1"),
        user("u2", text("Add a test, no mocks.")),
        assistant("s2", text("[SUMMARIZED]\n## Result\nI added tests/test_login.py."), parent="u2"),
    ]
    summarizer(api).summarize(SummaryRequest(history=turns, kind="goal_batch"))
    body = api.bodies[0]
    assert body["system"] == EPISODIC_SYSTEM_PROMPT
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": (
        GOAL_BATCH_PROMPT + "\n\nTurns to compact:\n\n"
        "--- Turn 1 ---\n[user]: Fix the login bug.\n[SUMMARIZED]: ## Result\nI fixed it in src/auth.py.\n\n"
        "--- Turn 2 ---\n[user]: Add a test, no mocks.\n[SUMMARIZED]: ## Result\nI added tests/test_login.py."
    )}]}]


# -- retries and errors ------------------------------------------------------------------------------------


def test_rate_limit_is_retried_then_succeeds() -> None:
    api = FakeAPI(failure(429, "rate_limit_error", "Number of requests has exceeded your rate limit"), reply())
    result = summarizer(api).summarize(SummaryRequest(history=history()))
    assert result.tokens == EXPECTED_USAGE
    assert len(api.requests) == 2
    assert [r.headers["x-stainless-retry-count"] for r in api.requests] == ["0", "1"]
    assert api.bodies[0] == api.bodies[1]


def test_overloaded_529_is_retried_then_succeeds() -> None:
    api = FakeAPI(failure(529, "overloaded_error", "Overloaded"), failure(529, "overloaded_error", "Overloaded"), reply())
    assert summarizer(api).summarize(SummaryRequest(history=history())).text
    assert len(api.requests) == 3


def test_server_error_raises_after_the_retries_are_spent() -> None:
    api = FakeAPI(*[failure(500, "api_error", "Internal server error")] * 3)
    with pytest.raises(SummarizerError) as caught:
        summarizer(api, max_retries=2).summarize(SummaryRequest(history=history()))
    assert len(api.requests) == 3
    assert caught.value.status_code == 500
    assert caught.value.model == MODEL
    assert not caught.value.context_overflow
    assert "HTTP 500: Internal server error" in str(caught.value)
    assert isinstance(caught.value.__cause__, anthropic.InternalServerError)


def test_prompt_too_long_is_not_retried_and_is_marked_as_context_overflow() -> None:
    api = FakeAPI(failure(400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"))
    with pytest.raises(SummarizerError) as caught:
        summarizer(api).summarize(SummaryRequest(history=history()))
    assert len(api.requests) == 1
    assert caught.value.status_code == 400
    assert caught.value.context_overflow


def test_authentication_error_is_not_retried() -> None:
    api = FakeAPI(failure(401, "authentication_error", "invalid x-api-key"))
    with pytest.raises(SummarizerError, match="HTTP 401: invalid x-api-key"):
        summarizer(api).summarize(SummaryRequest(history=history()))
    assert len(api.requests) == 1


def test_timeout_is_retried_then_raises() -> None:
    api = FakeAPI(timeout, timeout)
    with pytest.raises(SummarizerError, match="timed out") as caught:
        summarizer(api, max_retries=1).summarize(SummaryRequest(history=history()))
    assert len(api.requests) == 2
    assert isinstance(caught.value.__cause__, anthropic.APITimeoutError)


def test_timeout_then_success() -> None:
    api = FakeAPI(timeout, reply())
    assert summarizer(api, max_retries=1).summarize(SummaryRequest(history=history())).text


def test_unreachable_api_raises() -> None:
    api = FakeAPI(unreachable)
    with pytest.raises(SummarizerError, match="could not reach"):
        summarizer(api, max_retries=0).summarize(SummaryRequest(history=history()))


# -- answers that are not a summary ------------------------------------------------------------------------


@pytest.mark.parametrize("content", [[], [{"type": "text", "text": "  \n "}]], ids=["no-blocks", "blank-text"])
def test_empty_content_raises(content: list) -> None:
    api = FakeAPI(reply(content=content))
    with pytest.raises(SummarizerError, match="came back empty") as caught:
        summarizer(api).summarize(SummaryRequest(history=history()))
    assert caught.value.stop_reason == "end_turn"


def test_max_tokens_stop_without_text_raises() -> None:
    api = FakeAPI(reply(None, stop="max_tokens"))
    with pytest.raises(SummarizerError, match=r"stopped \(max_tokens\) before writing any summary") as caught:
        summarizer(api).summarize(SummaryRequest(history=history()))
    assert caught.value.stop_reason == "max_tokens"
    assert not caught.value.context_overflow


def test_context_window_stop_without_text_is_an_overflow() -> None:
    api = FakeAPI(reply(None, stop="model_context_window_exceeded"))
    with pytest.raises(SummarizerError) as caught:
        summarizer(api).summarize(SummaryRequest(history=history()))
    assert caught.value.context_overflow


def test_max_tokens_stop_with_text_is_returned_and_says_it_was_cut() -> None:
    api = FakeAPI(reply("I fixed the login bug and then", stop="max_tokens"))
    result = summarizer(api).summarize(SummaryRequest(history=history()))
    assert (result.text, result.stop_reason) == ("I fixed the login bug and then", "max_tokens")


def test_refusal_raises() -> None:
    api = FakeAPI(reply("I can't help with that.", stop="refusal"))
    with pytest.raises(SummarizerError, match="refused"):
        summarizer(api).summarize(SummaryRequest(history=history()))


def test_several_text_blocks_are_joined_and_thinking_counts_as_reasoning() -> None:
    usage = {"input_tokens": 10, "output_tokens": 40, "output_tokens_details": {"thinking_tokens": 15}}
    content = [{"type": "text", "text": "First part."}, {"type": "text", "text": " Second part. "}]
    result = summarizer(FakeAPI(reply(content=content, usage=usage))).summarize(SummaryRequest(history=history()))
    assert result.text == "First part.\n\nSecond part."
    assert result.tokens == TokenCounts(input=10, output=25, reasoning=15)
    assert result.cost == pytest.approx((10 * 1.0 + 40 * 5.0) / 1_000_000)


# -- construction --------------------------------------------------------------------------------------------


def test_protocols() -> None:
    s = AnthropicSummarizer(client=object())
    assert isinstance(s, Summarizer) and isinstance(s, AsyncSummarizer)


@pytest.mark.parametrize("kwargs", [{"model": ""}, {"max_tokens": 0}, {"max_tokens": True}, {"max_tokens": 1.5}])
def test_bad_arguments_are_refused_up_front(kwargs: dict) -> None:
    with pytest.raises(InvalidInput):
        AnthropicSummarizer(**kwargs)


def test_constructing_without_a_client_imports_nothing() -> None:
    code = ("import sys\nfrom brutus.summarizers import AnthropicSummarizer, default_summarizer\n"
            "AnthropicSummarizer(); default_summarizer({'ANTHROPIC_API_KEY': 'k'})\n"
            "print('anthropic' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# -- the real network path: a local HTTP server ----------------------------------------------------------------


class LocalAPI:
    """A Messages API on 127.0.0.1 that answers with ``reply()``, or hangs until released when ``hang`` is set."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.hang = False
        self.release = threading.Event()
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                api.bodies.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
                if api.hang:
                    api.release.wait(10)
                    return
                answer = reply()
                self.send_response(answer.status_code)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self) -> LocalAPI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def local_api() -> Iterator[LocalAPI]:
    with LocalAPI() as api:
        yield api


def test_client_is_built_lazily_from_the_environment(local_api: LocalAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-from-env")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", local_api.url)
    result = AnthropicSummarizer().summarize(SummaryRequest(history=history()))
    assert result.tokens == EXPECTED_USAGE
    assert local_api.bodies[0]["model"] == MODEL


def test_missing_credentials_raise_a_summarizer_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_PROFILE", "ANTHROPIC_CONFIG_DIR",
                 "ANTHROPIC_IDENTITY_TOKEN", "ANTHROPIC_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    with pytest.raises(SummarizerError, match="no Anthropic credentials: set ANTHROPIC_API_KEY"):
        AnthropicSummarizer().summarize(SummaryRequest(history=history()))
    # a config directory without the profile: the SDK's own credentials error (its wording is its own), translated
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path))
    with pytest.raises(SummarizerError, match="^claude-haiku-4-5: "):
        AnthropicSummarizer().summarize(SummaryRequest(history=history()))


def test_a_real_socket_timeout(local_api: LocalAPI) -> None:
    local_api.hang = True
    client = anthropic.Anthropic(api_key="sk-test", base_url=local_api.url, max_retries=0, timeout=0.3)
    with pytest.raises(SummarizerError, match="timed out"):
        AnthropicSummarizer(client).summarize(SummaryRequest(history=history()))
    assert len(local_api.bodies) == 1


# -- async twin ----------------------------------------------------------------------------------------------


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_async_success_sends_the_same_request() -> None:
    sync_api, async_api = FakeAPI(reply()), FakeAPI(reply())
    request = SummaryRequest(history=history(), instructions="keep the test names")
    expected = summarizer(sync_api).summarize(request)
    result = await async_summarizer(async_api).asummarize(request)
    assert result == expected
    assert async_api.bodies == sync_api.bodies
    assert async_api.requests[0].headers["x-stainless-async"] != "false"


@pytest.mark.anyio
async def test_async_overloaded_is_retried() -> None:
    api = FakeAPI(failure(529, "overloaded_error", "Overloaded"), reply())
    assert (await async_summarizer(api).asummarize(SummaryRequest(history=history()))).text
    assert len(api.requests) == 2


@pytest.mark.anyio
async def test_async_server_error_and_empty_answer_raise() -> None:
    api = FakeAPI(failure(500, "api_error", "boom"), failure(500, "api_error", "boom"), reply(None))
    s = async_summarizer(api, max_retries=1)
    with pytest.raises(SummarizerError) as caught:
        await s.asummarize(SummaryRequest(history=history()))
    assert caught.value.status_code == 500
    with pytest.raises(SummarizerError, match="empty"):
        await s.asummarize(SummaryRequest(history=history()))
