"""store.compact on SQLite and PostgreSQL: the lifecycle, rolling summaries, fallbacks, hooks, never loop,
one at a time."""

from __future__ import annotations

import threading

import pytest

from brutus import CompactionConfig, CompactionInProgress, CompactionStalled, InvalidInput, NothingToCompact, SessionStore
from brutus.compaction import Hooks
from brutus.render import to_anthropic, validate_anthropic
from brutus.summarizers import Summary, SummaryRequest
from brutus.models import TokenCounts

from builders import Msg, Tool, write_history


class FakeSummarizer:
    """Records its requests and answers a fixed text (or raises / calls a hook while it 'runs')."""

    def __init__(self, text: str = "We fixed the bug in sync.py; next: run the tests.", *, fail: Exception | None = None, during=None) -> None:
        self.text = text
        self.fail = fail
        self.during = during
        self.requests: list[SummaryRequest] = []

    def summarize(self, request: SummaryRequest) -> Summary:
        self.requests.append(request)
        if self.during is not None:
            self.during()
        if self.fail is not None:
            raise self.fail
        return Summary(text=self.text, model="claude-haiku-4-5", tokens=TokenCounts(input=900, output=40), cost=0.001)


def _work(turns: int = 3, output_bytes: int = 8_000, finish: str = "stop") -> list[Msg]:
    spec: list[Msg] = []
    for i in range(turns):
        spec.append(Msg("user", text=f"please fix bug {i}"))
        spec.append(Msg("assistant", text=f"looking at bug {i}", tools=[Tool("read", output_bytes=output_bytes)], finish=finish))
    return spec


def test_compaction_lifecycle(store: SessionStore) -> None:
    session_id = write_history(store, _work())
    before = store.messages(session_id)
    summarizer = FakeSummarizer()

    result = store.compact(session_id, summarizer)

    assert result.fallback_used is None
    assert result.pre_tokens > result.post_tokens > 0
    assert result.boundary["type"] == "system" and result.boundary["subtype"] == "compact_boundary"
    assert result.boundary["compact_metadata"] == {"trigger": "manual", "pre_tokens": result.pre_tokens, "post_tokens": result.post_tokens}
    assert result.boundary["session_id"] == session_id

    full = store.messages(session_id)
    assert [m.info.id for m in full[: len(before)]] == [m.info.id for m in before]  # nothing deleted
    user, summary = full[len(before):]
    assert user.info.role == "user" and [p.type for p in user.parts] == ["compaction"]
    assert user.parts[0].auto is False and user.parts[0].tail_start_id is None
    info = summary.info
    assert (info.role, info.summary, info.agent, info.mode, info.model_id) == ("assistant", True, "compaction", "compaction", "claude-haiku-4-5")
    assert info.parent_id == user.info.id and info.finish == "stop" and info.error is None
    assert info.tokens == TokenCounts(input=900, output=40) and info.cost == 0.001
    assert [p.text for p in summary.parts] == [summarizer.text]
    assert result.summary_message == summary

    assert [m.info.id for m in store.filter_compacted(session_id)] == [user.info.id, summary.info.id]
    [record] = store.compactions(session_id)
    assert (record.status, record.trigger, record.user_message_id, record.summary_message_id) == ("completed", "manual", user.info.id, summary.info.id)
    assert (record.pre_tokens, record.post_tokens, record.model, record.cost) == (result.pre_tokens, result.post_tokens, "claude-haiku-4-5", 0.001)
    assert record.boundary == result.boundary

    [request] = summarizer.requests
    assert [m.info.id for m in request.history] == [m.info.id for m in before]
    assert request.previous_summary is None and request.max_tokens == 4096
    body = to_anthropic(store.filter_compacted(session_id))
    validate_anthropic(body)
    assert body["messages"][0]["content"][0]["text"] == "What did we do so far?"


def test_rolling_summaries_and_each_load_stops_at_the_newest(store: SessionStore) -> None:
    session_id = write_history(store, _work())
    store.compact(session_id, FakeSummarizer("first summary"))
    u = store.append_message(session_id, "user")
    store.append_part(u.id, {"type": "text", "text": "now add a test"})
    a = store.append_message(session_id, "assistant", parent_id=u.id)
    store.append_part(a.id, {"type": "text", "text": "added test_sync.py " * 200})
    store.finish_message(a.id, finish="stop")
    second = FakeSummarizer("second summary")
    result = store.compact(session_id, second)
    [request] = second.requests
    assert request.previous_summary == "first summary"
    assert request.history[0].parts[0].type == "compaction"  # the request starts at the previous boundary
    view = store.filter_compacted(session_id)
    assert [m.info.id for m in view] == [view[0].info.id, result.summary_message.info.id]
    assert view[1].parts[0].text == "second summary"
    assert [c.status for c in store.compactions(session_id)] == ["completed", "completed"]


@pytest.mark.parametrize("finish, continued", [("tool-calls", True), (None, True), ("stop", False)])
def test_auto_compaction_continues_an_unfinished_turn(store: SessionStore, finish, continued) -> None:
    session_id = write_history(store, _work(finish=finish))
    store.compact(session_id, FakeSummarizer(), trigger="auto")
    view = store.filter_compacted(session_id)
    assert view[0].parts[0].auto is True
    if continued:
        last = view[-1]
        assert last.info.role == "user" and last.info.synthetic
        assert [(p.text, p.synthetic) for p in last.parts] == [("Continue if you have next steps", True)]
        assert len(view) == 3
    else:
        assert len(view) == 2


def test_manual_compaction_never_adds_a_continue_message(store: SessionStore) -> None:
    session_id = write_history(store, _work(finish="tool-calls"))
    store.compact(session_id, FakeSummarizer(), trigger="manual")
    assert len(store.filter_compacted(session_id)) == 2


def test_failing_summarizer_falls_back_to_extractive(store: SessionStore) -> None:
    session_id = write_history(store, _work())
    result = store.compact(session_id, FakeSummarizer(fail=TimeoutError("provider timed out")))
    assert result.fallback_used == "extractive"
    text = result.summary_message.parts[0].text
    assert "please fix bug 0" in text  # user directions verbatim
    assert store.compactions(session_id)[0].fallback_used == "extractive"


def test_empty_summary_falls_back(store: SessionStore) -> None:
    session_id = write_history(store, _work())
    assert store.compact(session_id, FakeSummarizer(text="   ")).fallback_used == "extractive"


def test_truncation_is_the_last_fallback(store: SessionStore, monkeypatch) -> None:
    import brutus.summarizers as summarizers

    def broken(self, request):
        raise RuntimeError("extractive broke too")

    monkeypatch.setattr(summarizers.ExtractiveSummarizer, "summarize", broken)
    session_id = write_history(store, _work())
    result = store.compact(session_id, FakeSummarizer(fail=RuntimeError("down")))
    assert result.fallback_used == "truncation"
    assert result.summary_message.parts[0].text.strip()


def test_back_to_back_compaction_is_refused_and_writes_nothing(store: SessionStore) -> None:
    session_id = write_history(store, _work())
    store.compact(session_id, FakeSummarizer())
    before = store.messages(session_id)
    summarizer = FakeSummarizer()
    with pytest.raises(NothingToCompact, match="nothing new since the previous compaction") as refused:
        store.compact(session_id, summarizer)
    assert isinstance(refused.value, CompactionStalled)
    assert store.messages(session_id) == before and summarizer.requests == []
    assert [r.status for r in store.compactions(session_id)] == ["completed"]  # refusals write no marker


def test_compaction_that_does_not_shrink_is_stalled(store: SessionStore) -> None:
    session_id = write_history(store, _work(turns=1, output_bytes=400))
    before = store.messages(session_id)
    with pytest.raises(CompactionStalled):
        store.compact(session_id, FakeSummarizer(text="long " * 5_000))
    assert store.messages(session_id) == before
    [record] = store.compactions(session_id)
    assert record.status == "failed" and record.pre_tokens and record.post_tokens >= 0.95 * record.pre_tokens


def test_second_caller_gets_compaction_in_progress(store: SessionStore) -> None:
    session_id = write_history(store, _work())
    seen: list[BaseException] = []

    def compete() -> None:
        def other() -> None:
            try:
                store.compact(session_id, FakeSummarizer())
            except BaseException as exc:  # noqa: BLE001
                seen.append(exc)

        thread = threading.Thread(target=other)
        thread.start()
        thread.join()

    store.compact(session_id, FakeSummarizer(during=compete))
    assert len(seen) == 1 and isinstance(seen[0], CompactionInProgress)
    assert [r.status for r in store.compactions(session_id)] == ["completed"]


def test_prune_runs_inside_the_compaction(store: SessionStore) -> None:
    spec = [Msg("user", text="go")] + [Msg("assistant", tools=[Tool("read", output_bytes=40_000)]) for _ in range(10)]
    spec += [Msg("user", text="turn 1"), Msg("assistant", text="a"), Msg("user", text="turn 0"), Msg("assistant", text="b")]
    session_id = write_history(store, spec)
    summarizer = FakeSummarizer()
    result = store.compact(session_id, summarizer)
    assert result.pruned == 60_000
    full = store.messages(session_id)
    marked = [p for m in full for p in m.parts if p.type == "tool" and p.state.time.compacted]
    assert len(marked) == 6
    # the summarizer saw the pruned parts as pruned
    seen = [p for m in summarizer.requests[0].history for p in m.parts if p.type == "tool" and p.state.time.compacted]
    assert len(seen) == 6


def test_tail_is_kept_verbatim(store: SessionStore) -> None:
    session_id = write_history(store, _work(turns=6, output_bytes=4_000))
    full = store.messages(session_id)
    result = store.compact(session_id, FakeSummarizer(), config=CompactionConfig(tail_tokens=2_500))
    view = store.filter_compacted(session_id)
    # the last two turns (two user+assistant pairs, ~1,000 tokens each) are kept before the compaction pair
    assert [m.info.id for m in view[:4]] == [m.info.id for m in full[-4:]]
    assert view[4].parts[0].type == "compaction" and view[4].parts[0].tail_start_id == full[-4].info.id
    assert view[5].info.id == result.summary_message.info.id
    body = to_anthropic(view)
    validate_anthropic(body)
    assert body["messages"][0]["content"][0]["text"] == "What did we do so far?"


def test_hooks_see_and_change_the_compaction(store: SessionStore) -> None:
    session_id = write_history(store, _work())
    calls: list[dict] = []

    def pre(payload: dict) -> str:
        calls.append(payload)
        return "focus on the failing test"

    hooks = Hooks(pre_compact=pre, session_start=calls.append, post_compact=calls.append)
    summarizer = FakeSummarizer()
    store.compact(session_id, summarizer, instructions="keep it short", hooks=hooks)
    assert calls[0] == {"hook_event_name": "PreCompact", "session_id": session_id, "trigger": "manual", "custom_instructions": "keep it short"}
    assert calls[1] == {"hook_event_name": "SessionStart", "session_id": session_id, "source": "compact"}
    assert calls[2] == {"hook_event_name": "PostCompact", "session_id": session_id, "trigger": "manual", "compact_summary": summarizer.text}
    assert summarizer.requests[0].instructions == "focus on the failing test"
    assert store.compactions(session_id)[0].instructions == "focus on the failing test"


def test_nothing_to_compact(store: SessionStore) -> None:
    session = store.create_session()
    with pytest.raises(NothingToCompact, match="has nothing to compact: it has no messages") as refused:
        store.compact(session.id, FakeSummarizer())
    assert isinstance(refused.value, InvalidInput)  # what an empty session raised before NothingToCompact
    assert store.compactions(session.id) == []  # refused: no marker
    with pytest.raises(InvalidInput):
        store.compact(session.id, FakeSummarizer(), trigger="whenever")


def test_a_stale_pending_marker_is_resolved_by_the_next_compaction(store: SessionStore) -> None:
    session_id = write_history(store, _work())

    class Crash(BaseException):
        pass

    with pytest.raises(GeneratorExit):
        # a cancelled compaction leaves its marker pending, as a crash would
        store.compact(session_id, FakeSummarizer(fail=GeneratorExit()))
    assert [r.status for r in store.compactions(session_id)] == ["pending"]
    result = store.compact(session_id, FakeSummarizer())
    records = store.compactions(session_id)
    assert [r.status for r in records] == ["failed", "completed"]
    assert records[0].error.startswith("abandoned")
    assert records[1].id == result.compaction_id


def test_the_summarizer_sees_tier_summaries_in_place_of_their_ranges(store: SessionStore) -> None:
    session_id = write_history(store, _work(turns=4))
    full = store.messages(session_id)
    first, last = full[1], full[3]  # the assistant reply of turn 0 through the reply of turn 1
    block = store.append_message(
        session_id,
        "assistant",
        synthetic=True,
        agent="compaction",
        mode="tool_call",
        metadata={
            "summarized": True,
            "summary_type": "tool_call",
            "turn_count": 1,
            "covers": {"from_id": first.info.id, "to_id": last.info.id, "from_seq": first.info.seq, "to_seq": last.info.seq},
        },
    )
    store.append_part(block.id, {"type": "text", "text": "[SUMMARIZED] read two files"})
    store.finish_message(block.id, finish="stop")
    summarizer = FakeSummarizer()
    store.compact(session_id, summarizer)
    sent = [m.info.id for m in summarizer.requests[0].history]
    assert block.id in sent and first.info.id not in sent and last.info.id not in sent
    assert sent.index(block.id) == 1  # where the covered range was
