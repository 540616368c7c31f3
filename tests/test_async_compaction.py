"""``await AsyncSessionStore.compact(...)``: the same compaction as the sync store, an async summarizer path,
one at a time, and cancellation leaving the session as a crash would."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator

import pytest

from brutus import AsyncSessionStore, CompactionInProgress, SessionStore
from brutus.models import TokenCounts
from brutus.summarizers import ExtractiveSummarizer, Summary, SummaryRequest

from builders import Msg, Tool, write_history

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class AsyncFake:
    """An async-only summarizer that can be held mid-call."""

    def __init__(self, text: str = "we fixed the bug; next: tests") -> None:
        self.text = text
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.hold = False
        self.calls = 0

    async def asummarize(self, request: SummaryRequest) -> Summary:
        self.calls += 1
        self.started.set()
        if self.hold:
            await self.release.wait()
        return Summary(text=self.text, model="claude-haiku-4-5", tokens=TokenCounts(input=500, output=20), cost=0.002)


def _spec() -> list[Msg]:
    spec: list[Msg] = []
    for i in range(3):
        spec += [Msg("user", text=f"fix bug {i}"), Msg("assistant", text="on it", tools=[Tool("read", output_bytes=8_000)])]
    return spec


@pytest.fixture
async def stores(store_url: str) -> AsyncIterator[tuple[SessionStore, AsyncSessionStore]]:
    sync = SessionStore.open(store_url)
    astore = await AsyncSessionStore.open(store_url)
    yield sync, astore
    await astore.close()
    sync.close()


async def test_async_compaction_matches_the_sync_one(stores) -> None:
    sync, astore = stores
    session_id = write_history(sync, _spec())
    before = sync.messages(session_id)
    result = await astore.compact(session_id, AsyncFake())
    assert result.fallback_used is None and result.pre_tokens > result.post_tokens
    view = await astore.filter_compacted(session_id)
    assert [m.info.id for m in view] == [view[0].info.id, result.summary_message.info.id]
    assert view[0].parts[0].type == "compaction"
    assert result.summary_message.parts[0].text == "we fixed the bug; next: tests"
    assert result.summary_message.info.tokens == TokenCounts(input=500, output=20)
    assert [m.info.id for m in sync.messages(session_id)[: len(before)]] == [m.info.id for m in before]
    assert [c.status for c in await astore.compactions(session_id)] == ["completed"]


async def test_a_failing_async_summarizer_falls_back(stores) -> None:
    sync, astore = stores
    session_id = write_history(sync, _spec())

    class Broken:
        async def asummarize(self, request):
            raise TimeoutError("provider timed out")

    result = await astore.compact(session_id, Broken())
    assert result.fallback_used == "extractive"


async def test_second_concurrent_compaction_is_refused(stores) -> None:
    sync, astore = stores
    session_id = write_history(sync, _spec())
    held = AsyncFake()
    held.hold = True
    first = asyncio.create_task(astore.compact(session_id, held))
    await held.started.wait()
    with pytest.raises(CompactionInProgress):
        await astore.compact(session_id, AsyncFake())
    held.release.set()
    await first
    assert [c.status for c in await astore.compactions(session_id)] == ["completed"]


async def test_cancelled_mid_summary_leaves_the_session_as_a_crash_would(stores) -> None:
    sync, astore = stores
    session_id = write_history(sync, _spec())
    view_before = sync.filter_compacted(session_id)
    full_before = sync.messages(session_id)
    held = AsyncFake()
    held.hold = True
    task = asyncio.create_task(astore.compact(session_id, held))
    await held.started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sync.filter_compacted(session_id) == view_before
    assert sync.messages(session_id) == full_before
    assert [c.status for c in sync.compactions(session_id)] == ["pending"]
    # the next compaction resolves the stale marker and succeeds
    result = await astore.compact(session_id, AsyncFake())
    records = await astore.compactions(session_id)
    assert [r.status for r in records] == ["failed", "completed"]
    assert records[0].error.startswith("abandoned") and records[1].id == result.compaction_id


async def test_the_loop_keeps_running_during_a_sync_only_summarizer(stores) -> None:
    sync, astore = stores
    session_id = write_history(sync, _spec())
    entered, released = threading.Event(), threading.Event()

    class Blocking:
        """Blocks until the event loop releases it: on the loop's own thread it would wait for itself."""

        def summarize(self, request):
            entered.set()
            if not released.wait(10):
                raise AssertionError("the event loop did not run while the summarizer blocked")
            return Summary(text="done", model="m")

    async def release_from_the_loop() -> None:
        await asyncio.to_thread(entered.wait, 10)
        released.set()

    releaser = asyncio.create_task(release_from_the_loop())
    result = await astore.compact(session_id, Blocking())
    await releaser
    assert released.is_set() and result.summary_message.info.summary


async def test_run_tiers_from_async_code(stores) -> None:
    sync, astore = stores
    spec: list[Msg] = []
    for i in range(30):
        spec += [Msg("user", text=f"task {i}"), Msg("assistant", text="done", tools=[Tool("read", output_bytes=12_000)])]
    session_id = write_history(sync, spec)
    report = await astore.run_tiers(session_id)
    expected_blocks = [m for m in sync.messages(session_id) if (m.info.metadata or {}).get("summarized")]
    assert expected_blocks, "the tool-call tier summarizes the old reads"
    assert report.session_id == session_id
    assert report.summaries == len(expected_blocks)
    assert report.tokens_after < report.tokens_before


async def test_async_run_tiers_drives_the_flow_itself_and_writes_what_the_sync_store_writes(
    stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The async store runs the tier flow on its own connections (no sync store in a thread): the same
    summaries, text and metadata, as the sync store writes for the same session."""
    sync, astore = stores
    spec: list[Msg] = []
    for i in range(30):
        spec += [Msg("user", text=f"task {i}"), Msg("assistant", text="done", tools=[Tool("read", output_bytes=12_000)])]
    with_sync, with_async = write_history(sync, spec), write_history(sync, spec)
    expected = sync.run_tiers(with_sync, ExtractiveSummarizer())

    def refused(*args, **kwargs):
        raise AssertionError("the async store ran the sync store's run_tiers")

    monkeypatch.setattr(SessionStore, "run_tiers", refused)
    report = await astore.run_tiers(with_async, ExtractiveSummarizer())

    def summaries(session_id: str) -> list[tuple]:
        return [(m.info.metadata["summarized"], m.info.metadata.get("summary_type"), [p.text for p in m.parts])
                for m in sync.messages(session_id) if (m.info.metadata or {}).get("summarized")]

    assert summaries(with_async) == summaries(with_sync) != []
    assert (report.summaries, report.tokens_before, report.tokens_after) == (
        expected.summaries, expected.tokens_before, expected.tokens_after)
