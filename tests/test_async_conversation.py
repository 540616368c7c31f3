"""``AsyncConversation`` over ``AsyncSessionStore`` and ``anthropic.AsyncAnthropic``: the same records, renders
and policy as ``Conversation`` (both write the same rows and send the same requests)."""

from __future__ import annotations

from typing import Any

import pytest

from brutus import AsyncConversation, AsyncSessionStore, ContextPolicy, ModelLimits, SessionStore
from brutus.testing import FakeMessagesAPI, Reply

from live_helpers import MODEL, SYSTEM, THINKING, TOOLS, async_client, client

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _script() -> list[Reply]:
    replies = []
    for i in range(8):
        replies.append(Reply([{"type": "thinking", "thinking": f"step {i}"},
                              {"type": "tool_use", "id": f"toolu_{i}", "name": "bash", "input": {"command": f"cat {i}"}}]))
    return replies + [Reply([{"type": "thinking", "thinking": "end"}, {"type": "text", "text": "Done."}])]


SETTINGS: dict[str, Any] = dict(system=SYSTEM, tools=TOOLS, thinking=THINKING, max_tokens=4096,
                                limits=ModelLimits(context=30_000, output=4_000), policy=ContextPolicy())


def _rows(history: list[Any]) -> list[Any]:
    """What each message holds, less ids and times (the fake's message ids differ from run to run)."""
    def part(p: Any) -> Any:
        return (p.type, p.tool, p.state.status, p.state.output) if p.type == "tool" else (p.type, getattr(p, "text", None))

    return [(m.info.role, m.info.finish, m.info.tokens, m.info.summary, [part(p) for p in m.parts]) for m in history]


async def run_async(conv: Any, sdk: Any) -> None:
    await conv.user("cat the files")
    for _ in range(9):
        message = await sdk.beta.messages.create(**await conv.request())
        await conv.record(message)
        calls = await conv.pending_calls()
        if calls:
            await conv.tool_results([{"tool_use_id": c["id"], "content": "q" * 12_000} for c in calls])


async def test_the_async_twin_writes_and_sends_what_the_sync_one_does(store_url: str) -> None:
    astore = await AsyncSessionStore.open(store_url)
    try:
        session = await astore.create_session(title="async")
        conv = astore.conversation(session.id, model=MODEL, **SETTINGS)
        assert isinstance(conv, AsyncConversation)
        with FakeMessagesAPI(_script(), context_window=30_000) as api:
            async with async_client(api) as sdk:  # closed on this loop: a client left to the collector closes on another
                await run_async(conv, sdk)
            async_requests = [r.body for r in api.requests]
            assert all(r.accepted for r in api.requests)
        async_history = await astore.messages(session.id)
        compactions = [c.status for c in await astore.compactions(session.id)]
    finally:
        await astore.close()

    with SessionStore.open(store_url) as store:
        twin = store.create_session(title="sync")
        conv = store.conversation(twin.id, model=MODEL, **SETTINGS)
        with FakeMessagesAPI(_script(), context_window=30_000) as api:
            sdk = client(api)
            conv.user("cat the files")
            for _ in range(9):
                conv.record(sdk.beta.messages.create(**conv.request()))
                calls = conv.pending_calls()
                if calls:
                    conv.tool_results([{"tool_use_id": c["id"], "content": "q" * 12_000} for c in calls])
            sync_requests = [r.body for r in api.requests]
        sync_history = store.messages(twin.id)
        assert [c.status for c in store.compactions(twin.id)] == compactions

    assert "completed" in compactions
    assert len(async_requests) == len(sync_requests) == 9
    assert [r["messages"] for r in async_requests][:3] == [r["messages"] for r in sync_requests][:3]
    assert _rows(async_history) == _rows(sync_history)
