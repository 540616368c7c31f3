"""Issue 33: the live loop streams, as real agents do. The fake speaks the Messages API's streaming protocol
under the real SDK client; ``Conversation`` records a streamed response exactly as a created one, a plain
``create`` works with the default ``max_tokens`` too, and a stream that breaks off loses only that response.
``conv.last`` says the context before and after the policy ran; a session too small to gain is not compacted.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import pytest
from sqlalchemy import text

from brutus import AsyncSessionStore, ModelLimits, SessionStore
from brutus.live.core import request_timeout
from brutus.testing import FakeMessagesAPI, Reply
from brutus.testing import stream
from brutus.testing.stream import PIECE

from live_helpers import EVERY_BLOCK, MODEL, SYSTEM, THINKING, TOOLS, async_client, client

THINK = {"type": "thinking", "thinking": "The test reads a stale fixture; the file list will tell. " * 2}
TOOL = {"type": "tool_use", "id": "toolu_ls", "name": "bash", "input": {"command": "ls -la tests/", "limits": [1, 2.5, None, "ü"]}}
TOOL_TURN = [THINK, {"type": "text", "text": "Let me look at the tests directory first."}, TOOL]
DONE = [{"type": "thinking", "thinking": "Found it."}, {"type": "text", "text": "test_sync reads a fixture that CI never writes."}]


def counts(store: SessionStore) -> dict[str, int]:
    with store.engine.connect() as conn:
        return {t: conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one() for t in ("messages", "parts", "tool_states", "compactions")}


def streamed(sdk: anthropic.Anthropic, kwargs: dict[str, Any]) -> Any:
    with sdk.beta.messages.stream(**kwargs) as events:
        return events.get_final_message()


# -- the fake's streaming protocol ----------------------------------------------------------------------------


def test_the_fake_streams_the_events_the_api_sends() -> None:
    with FakeMessagesAPI([Reply(TOOL_TURN)]) as api:
        events = list(client(api).beta.messages.create(model=MODEL, max_tokens=1024, thinking=THINKING, stream=True,
                                                       messages=[{"role": "user", "content": "why?"}]))
        sent = api.requests[0].response
    kinds = [e.type for e in events]  # the SDK passes no ping on
    assert kinds[:2] == ["message_start", "content_block_start"] and kinds[-2:] == ["message_delta", "message_stop"]
    assert [e["type"] for e in stream.events(sent)][:2] == ["message_start", "ping"]
    assert events[0].message.content == [] and events[0].message.stop_reason is None and events[0].message.usage.output_tokens == 0
    deltas: dict[int, list[str]] = {}
    for event in events:
        if event.type == "content_block_delta":
            deltas.setdefault(event.index, []).append(event.delta.type)
    thinking_pieces = -(-len(THINK["thinking"]) // PIECE)
    assert deltas == {0: ["thinking_delta"] * thinking_pieces + ["signature_delta"],
                      1: ["text_delta"] * 2,
                      2: ["input_json_delta"] * -(-len(json.dumps(TOOL["input"])) // PIECE)}
    starts = [e.content_block.to_dict() for e in events if e.type == "content_block_start"]
    assert starts == [{"type": "thinking", "thinking": "", "signature": ""}, {"type": "text", "text": ""}, {**TOOL, "input": {}}]
    assert events[-2].delta.stop_reason == "tool_use"
    assert events[-2].usage.to_dict(warnings=False) == sent["usage"] and sent["usage"]["output_tokens"] > 0


def test_a_streamed_message_is_the_created_one() -> None:
    with FakeMessagesAPI([Reply(TOOL_TURN), Reply(TOOL_TURN), Reply(EVERY_BLOCK)]) as api:
        sdk = client(api)
        kwargs = dict(model=MODEL, max_tokens=1024, thinking=THINKING, messages=[{"role": "user", "content": "why?"}])
        created = sdk.beta.messages.create(**kwargs).to_dict()
        final = streamed(sdk, kwargs).to_dict(warnings=False)
        every = streamed(sdk, dict(kwargs, thinking={"type": "disabled"})).to_dict(warnings=False)
        assert [r.streamed for r in api.requests] == [False, True, True]
    assert final.pop("id") != created.pop("id")
    assert final.pop("stop_details") is None  # the SDK's accumulator sets it from message_delta
    assert final == created  # content (signatures included) and usage, to the byte
    assert every["content"] == EVERY_BLOCK  # server tools, citations, redacted thinking, an unknown block type


def test_the_fake_refuses_a_stream_as_it_refuses_a_request() -> None:
    with FakeMessagesAPI() as api:
        sdk = client(api)
        with pytest.raises(anthropic.BadRequestError, match="roles must alternate"):
            streamed(sdk, dict(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]))
        with pytest.raises(anthropic.BadRequestError, match="stream: Input should be a valid boolean"):
            sdk.beta.messages.create(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "a"}], extra_body={"stream": 1})
        assert [(r.status, r.streamed) for r in api.requests] == [(400, False), (400, False)]


# -- the live loop --------------------------------------------------------------------------------------------


def test_the_default_max_tokens_streams_and_creates(store: SessionStore) -> None:
    conv = store.conversation(store.create_session().id, model=MODEL, system=SYSTEM, tools=TOOLS, thinking=THINKING)
    conv.user("Why does test_sync fail?")
    with FakeMessagesAPI([Reply(TOOL_TURN), Reply(DONE)]) as api:
        sdk = client(api)
        kwargs = conv.request()
        assert (kwargs["max_tokens"], kwargs["timeout"]) == (32_000, 900.0)  # the SDK's 3,600 s per 128,000 tokens
        with pytest.raises(ValueError, match="Streaming is required"):  # what the timeout is for
            sdk.beta.messages.create(**{k: v for k, v in kwargs.items() if k != "timeout"})
        first = conv.record(streamed(sdk, kwargs))
        conv.tool_results([{"tool_use_id": "toolu_ls", "content": "test_sync.py"}])
        second = conv.record(sdk.beta.messages.create(**conv.request()))
        sent = [r.response for r in api.requests if r.accepted]
        assert [r.streamed for r in api.requests if r.accepted] == [True, False]
    history = store.messages(conv.session_id)
    assert [m.info.id for m in history if m.info.role == "assistant"] == [first.id, second.id]
    for message, response in zip((m for m in history if m.info.role == "assistant"), sent):
        assert message.info.metadata["anthropic"]["response"]["content"] == response["content"]
        assert message.info.tokens.output == response["usage"]["output_tokens"]
    assert [p.type for p in history[1].parts] == ["reasoning", "text", "tool"] and history[1].parts[2].state.input == TOOL["input"]
    assert conv.pending_calls() == []
    assert request_timeout(21_333) is None and request_timeout(4096) is None  # within 10 minutes: the SDK's own
    assert "timeout" not in store.conversation(conv.session_id, model=MODEL, max_tokens=4096).request()


def test_a_stream_cut_off_loses_only_that_response(store: SessionStore, store_url: str) -> None:
    conv = store.conversation(store.create_session().id, model=MODEL, system=SYSTEM, tools=TOOLS, thinking=THINKING)
    conv.user("Why does test_sync fail?")
    script = [Reply(TOOL_TURN, cut_after=6), Reply(TOOL_TURN), Reply(DONE, cut_after=5), Reply(DONE)]
    with FakeMessagesAPI(script) as api, SessionStore.open(store_url) as other:
        sdk = client(api)
        before = counts(store)
        with pytest.raises(Exception, match="incomplete chunked read"):  # the connection dropped mid-response
            conv.record(streamed(sdk, conv.request()))
        assert counts(store) == before  # nothing of it was kept, nothing half-written

        resumed = other.conversation(conv.session_id, model=MODEL, system=SYSTEM, tools=TOOLS, thinking=THINKING)
        assert resumed.pending_calls() == []  # the cut response's call was never recorded: nothing to run
        resumed.record(streamed(sdk, resumed.request()))
        assert api.requests[1].body["messages"] == api.requests[0].body["messages"]  # the same request again
        calls = resumed.pending_calls()
        assert [c["id"] for c in calls] == ["toolu_ls"]
        resumed.tool_results([{"tool_use_id": "toolu_ls", "content": "test_sync.py"}])

        after_results = counts(store)
        with pytest.raises(Exception, match="incomplete chunked read"):  # cut again, after the tool results
            resumed.record(streamed(sdk, resumed.request()))
        assert counts(store) == after_results
        again = store.conversation(conv.session_id, model=MODEL, system=SYSTEM, tools=TOOLS, thinking=THINKING)
        assert again.pending_calls() == []  # the results are kept: the call is not run twice
        final = again.record(streamed(sdk, again.request()))
        assert api.requests[3].body["messages"] == api.requests[2].body["messages"]
        assert [r.cut_after for r in api.requests] == [6, None, 5, None]
    assert final.finish == "end_turn"
    assert [m.info.role for m in store.messages(conv.session_id)] == ["user", "assistant", "assistant"]  # results live on the tool parts


@pytest.mark.anyio
async def test_the_async_conversation_streams(store_url: str) -> None:
    astore = await AsyncSessionStore.open(store_url)
    try:
        session = await astore.create_session()
        conv = astore.conversation(session.id, model=MODEL, system=SYSTEM, tools=TOOLS, thinking=THINKING)
        await conv.user("Why does test_sync fail?")
        with FakeMessagesAPI([Reply(TOOL_TURN, cut_after=9), Reply(TOOL_TURN), Reply(DONE)]) as api:
            async with async_client(api) as sdk:
                with pytest.raises(Exception, match="incomplete chunked read"):
                    async with sdk.beta.messages.stream(**await conv.request()) as events:
                        await conv.record(await events.get_final_message())
                assert await conv.pending_calls() == []
                while True:
                    if calls := await conv.pending_calls():
                        await conv.tool_results([{"tool_use_id": c["id"], "content": "ok"} for c in calls])
                    async with sdk.beta.messages.stream(**await conv.request()) as events:
                        message = await conv.record(await events.get_final_message())
                    if message.finish != "tool_use":
                        break
                sent = [r.response["content"] for r in api.requests[1:]]
        history = await astore.messages(session.id)
        assert [m.info.metadata["anthropic"]["response"]["content"] for m in history if m.info.role == "assistant"] == sent
    finally:
        await astore.close()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# -- conv.last and the too-small session ----------------------------------------------------------------------


def test_last_says_the_context_before_and_after_the_policy(store: SessionStore) -> None:
    conv = store.conversation(store.create_session().id, model=MODEL, system=SYSTEM, tools=TOOLS, max_tokens=4096,
                              limits=ModelLimits(context=60_000, output=8_000))
    script = [Reply([{"type": "tool_use", "id": f"toolu_{i}", "name": "bash", "input": {}}]) for i in range(12)]
    seen = []
    with FakeMessagesAPI(script, context_window=60_000) as api:
        sdk = client(api)
        conv.user("go")
        for _ in range(12):
            conv.record(streamed(sdk, conv.request()))
            seen.append((conv.last.compacted, conv.last.tokens_before, conv.last.tokens_after))
            conv.tool_results([{"tool_use_id": c["id"], "content": "w" * 20_000} for c in conv.pending_calls()])
    compacting = [s for s in seen if s[0]]
    assert compacting, seen
    for _, before, after in compacting:
        assert before > 41_600 > after  # over 80% of the usable 52,000 before, well under it after
    assert all(before == after for compacted, before, after in seen if not compacted)


def test_a_session_too_small_to_gain_is_not_compacted(store: SessionStore) -> None:
    class Counting:
        calls = 0

        def summarize(self, request: Any) -> Any:
            Counting.calls += 1
            raise AssertionError("a tiny session was sent to the summarizer")

    conv = store.conversation(store.create_session().id, model=MODEL, max_tokens=4096, summarizer=Counting())
    conv.user("hi")
    conv.request()
    cut = {"id": "msg_1", "type": "message", "role": "assistant", "model": MODEL, "stop_reason": "max_tokens", "stop_sequence": None,
           "content": [{"type": "tool_use", "id": "toolu_cut", "name": "bash", "input": {}}],
           "usage": {"input_tokens": 5, "output_tokens": 3}}
    conv.record(cut)  # a cut-short tool call asks for a compaction
    before = counts(store)
    kwargs = conv.request()  # no exception: the loop carries on sending
    assert conv.last.compacted is False
    assert conv.last.stalled and conv.last.stalled.startswith("the session is too small to gain from compaction (")
    assert Counting.calls == 0 and store.compactions(conv.session_id) == []
    assert counts(store)["compactions"] == before["compactions"]
    assert kwargs["messages"][-1]["role"] == "user"
