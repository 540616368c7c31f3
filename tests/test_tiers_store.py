"""run_tiers and store_view on SQLite and PostgreSQL: summaries written through the public API, originals
kept, the same view as the pure run, and prefix compaction and prune still working around them."""

from __future__ import annotations

import logging

import pytest
from builders import Msg, Tool, write_history

from brutus.compaction.locks import compaction_lock
from brutus.errors import CompactionInProgress, NotFound
from brutus.history import filter_compacted
from brutus.render import anthropic_problems, to_anthropic
from brutus.store import SessionStore
from brutus.summarizers import ExtractiveSummarizer
from brutus.tiers import TierConfig, apply_tiers, run_tiers, store_view, tier_metadata, tier_view

CONFIG = TierConfig(
    tool_call_recent_messages=4,
    tool_call_min_tokens=500,
    threshold_tokens=1_000,
    threshold_recent_messages=4,
    min_turns_old_threshold=4,
)


def spec(turns: int) -> list[Msg]:
    """Turns of a user direction, a tool step (two reads of 4,000 bytes) and a closing reply."""
    messages = []
    for n in range(turns):
        messages += [
            Msg("user", text=f"turn {n}: fix module {n}"),
            Msg("assistant", text="reading", tools=[Tool("read"), Tool("bash")], finish="tool-calls"),
            Msg("assistant", text=f"fixed module {n}"),
        ]
    return messages


def shape(view):
    """A view as (role, summary type or None, covered ids) — comparable between runs with different ids."""
    ids = {}
    out = []
    for message in view:
        metadata = tier_metadata(message)
        if metadata is None:
            out.append((message.info.role, None, ids.setdefault(message.info.id, len(ids))))
        else:
            out.append((message.info.role, metadata.summary_type, metadata.turn_count, metadata.covered_messages))
    return out


def test_a_run_writes_summaries_and_keeps_the_originals(store: SessionStore):
    session_id = write_history(store, spec(8))
    before = store.messages(session_id)
    report = store.run_tiers(session_id, ExtractiveSummarizer(), CONFIG)
    assert [(s.kind, s.summaries) for s in report.strategies] == [("tool_call", 7), ("threshold", 6), ("goal_batch", 1)]
    assert report.session_id == session_id and report.turns_compacted == 6
    after = store.messages(session_id)
    assert after[: len(before)] == before  # nothing of the originals changed
    written = after[len(before) :]
    assert [m.info.id for m in written] == [i for s in report.strategies for i in s.summary_ids]
    for message in written:
        info, metadata = message.info, tier_metadata(message)
        assert metadata is not None and info.metadata["summarized"] is True
        assert (info.role, info.summary, info.synthetic, info.finish, info.agent) == ("assistant", False, True, "stop", "compaction")
        assert info.time.completed is not None and info.seq > before[-1].info.seq
        (part,) = message.parts
        assert part.text.startswith("[GOAL BATCH]" if metadata.summary_type == "goal_batch" else "[SUMMARIZED]")
        covers = metadata.covers
        assert {covers.from_id, covers.to_id} <= {m.info.id for m in before}
        seqs = {m.info.id: m.info.seq for m in before}
        assert (covers.from_seq, covers.to_seq) == (seqs[covers.from_id], seqs[covers.to_id])
    goal = written[-1]
    assert tier_metadata(goal).covers.from_id == before[0].info.id and tier_metadata(goal).turn_count == 6


def test_the_store_view_is_the_pure_view(store: SessionStore):
    session_id = write_history(store, spec(8))
    loaded = store.filter_compacted(session_id)
    pure, pure_report = apply_tiers(loaded, ExtractiveSummarizer(), CONFIG)
    report = run_tiers(store, session_id, ExtractiveSummarizer(), CONFIG)
    assert report.tokens_saved == pure_report.tokens_saved > 0
    view = store_view(store, session_id)
    assert shape(view) == shape(tier_view(pure))
    assert view == tier_view(store.filter_compacted(session_id))
    texts = [[p.text for p in m.parts] for m in view if tier_metadata(m)]
    assert texts == [[p.text for p in m.parts] for m in tier_view(pure) if tier_metadata(m)]  # deterministic
    assert anthropic_problems(to_anthropic(view, system="agent")) == []


def test_runs_converge_on_the_store(store: SessionStore):
    session_id = write_history(store, spec(14))
    for _ in range(10):
        if not run_tiers(store, session_id, ExtractiveSummarizer(), CONFIG).summaries:
            break
    else:
        pytest.fail("the tiers kept writing summaries")
    view = store_view(store, session_id)
    assert sum(m.info.role == "user" for m in view) < 5
    assert anthropic_problems(to_anthropic(view)) == []


def test_compaction_and_prune_still_work_after_tiers(store: SessionStore):
    session_id = write_history(store, spec(8))
    run_tiers(store, session_id, ExtractiveSummarizer(), CONFIG)
    result = store.compact(session_id, ExtractiveSummarizer())
    view = store_view(store, session_id)
    assert view == store.filter_compacted(session_id)  # every tier range is behind the new boundary now
    assert view[-1].info.id == result.summary_message.info.id
    write_more = [Msg("user", text="after"), Msg("assistant", text="x", tools=[Tool("read", output_bytes=200_000)])]
    for m in write_more:
        message = store.append_message(session_id, m.role)
        store.append_part(message.id, {"type": "text", "text": m.text})
    store.prune(session_id)
    assert anthropic_problems(to_anthropic(store_view(store, session_id))) == []


def test_one_run_at_a_time_with_compaction(store: SessionStore):
    session_id = write_history(store, spec(3))
    with compaction_lock(store.engine, session_id):
        with pytest.raises(CompactionInProgress):
            run_tiers(store, session_id, ExtractiveSummarizer(), CONFIG)


def test_an_unknown_session_is_not_found(store: SessionStore):
    with pytest.raises(NotFound):
        run_tiers(store, "ses_missing", ExtractiveSummarizer(), CONFIG)


def test_each_run_is_logged(store: SessionStore, caplog):
    caplog.set_level(logging.INFO, logger="brutus.tiers")
    session_id = write_history(store, spec(8))
    run_tiers(store, session_id, ExtractiveSummarizer(), CONFIG)
    lines = [r.getMessage() for r in caplog.records if r.name == "brutus.tiers"]
    assert [line.split(": ")[1].split(" ")[0] for line in lines] == ["tool_call", "threshold", "goal_batch"]
    assert all(session_id in line and "saved" in line for line in lines)


def test_the_default_summarizer_is_offline_without_a_key(store: SessionStore, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    session_id = write_history(store, spec(8))
    report = run_tiers(store, session_id, config=CONFIG)
    assert report.summaries and all(tier_metadata(m).model == "extractive" for m in store_view(store, session_id) if tier_metadata(m))


def test_filter_compacted_is_unchanged_and_holds_both(store: SessionStore):
    session_id = write_history(store, spec(8))
    before = store.filter_compacted(session_id)
    run_tiers(store, session_id, ExtractiveSummarizer(), CONFIG)
    after = store.filter_compacted(session_id)
    assert after[: len(before)] == before and len(after) > len(before)
    assert filter_compacted(store.messages(session_id)) == after
