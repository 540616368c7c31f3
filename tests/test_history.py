"""filter_compacted and compaction boundaries (OpenCode's filterCompacted, plus the verbatim tail)."""

from __future__ import annotations

import pytest
from history_builders import assistant, compaction, summary, text, tool, user
from corpus_helpers import load_export, opencode_files

from brutus.history import (
    CompletedCompaction,
    compaction_part,
    completed_compactions,
    filter_compacted,
    is_completed_summary,
)
from brutus.models import CompactionPart


def ids(history):
    return [message.info.id for message in history]


def test_no_compaction_returns_the_whole_history_as_a_new_list_of_the_same_objects():
    history = [user("u1", text("hi")), assistant("a1", text("hello"), parent="u1")]
    view = filter_compacted(history)
    assert ids(view) == ["u1", "a1"]
    assert view is not history
    assert all(a is b for a, b in zip(view, history))


def test_empty_history():
    assert filter_compacted([]) == []
    assert completed_compactions([]) == []


def test_completed_compaction_is_the_boundary_included():
    history = [
        user("u1", text("one")),
        assistant("a1", text("done"), parent="u1"),
        compaction("c1"),
        summary("s1", "we did one", parent="c1"),
        user("u2", text("two")),
        assistant("a2", text("ok"), parent="u2"),
    ]
    assert ids(filter_compacted(history)) == ["c1", "s1", "u2", "a2"]


@pytest.mark.parametrize(
    "broken",
    [
        {"finish": None},  # pending: the summary never finished
        {"error": {"name": "APIError", "data": {"message": "boom"}}},  # errored
        {"error": {"name": "MessageAbortedError", "data": {}}},  # aborted is an error too
        {"summary": False},  # not a summary
        {"finish": ""},  # an empty finish is not a finish
    ],
)
def test_pending_failed_or_errored_compactions_are_not_boundaries(broken):
    fields = {"summary": True, "finish": "stop", **broken}
    history = [
        user("u1", text("one")),
        compaction("c1"),
        assistant("s1", text("partial"), parent="c1", **fields),
        user("u2", text("two")),
    ]
    assert ids(filter_compacted(history)) == ["u1", "c1", "s1", "u2"]
    assert completed_compactions(history) == []


def test_summary_without_parent_or_with_a_parent_lacking_a_compaction_part_is_no_boundary():
    history = [
        user("u1", text("one")),
        assistant("s0", text("orphan"), summary=True),
        user("u2", text("plain user message")),
        summary("s1", "summary of a plain message", parent="u2"),
        user("u3", text("three")),
    ]
    assert ids(filter_compacted(history)) == ["u1", "s0", "u2", "s1", "u3"]


def test_a_summary_before_its_compaction_message_does_not_complete_it():
    history = [
        user("u1", text("one")),
        summary("s1", "too early", parent="c1"),
        compaction("c1"),
        user("u2", text("two")),
    ]
    assert ids(filter_compacted(history)) == ["u1", "s1", "c1", "u2"]
    assert completed_compactions(history) == []


def test_only_the_last_completed_boundary_counts():
    history = [
        user("u1", text("one")),
        compaction("c1"),
        summary("s1", "first", parent="c1"),
        user("u2", text("two")),
        compaction("c2"),
        summary("s2", "second", parent="c2"),
        user("u3", text("three")),
    ]
    assert ids(filter_compacted(history)) == ["c2", "s2", "u3"]
    assert completed_compactions(history) == [CompletedCompaction(1, 2, None), CompletedCompaction(4, 5, None)]


def test_a_pending_compaction_after_a_completed_one_is_kept_in_the_view():
    history = [
        user("u1", text("one")),
        compaction("c1"),
        summary("s1", "first", parent="c1"),
        user("u2", text("two")),
        assistant("a2", text("ok"), parent="u2"),
        compaction("c2"),  # pending: no summary yet
    ]
    assert ids(filter_compacted(history)) == ["c1", "s1", "u2", "a2", "c2"]


def test_a_failed_summary_then_a_completed_retry_completes_the_boundary():
    history = [
        user("u1", text("one")),
        compaction("c1"),
        assistant("s_bad", text("half"), parent="c1", summary=True, error={"name": "APIError"}),
        summary("s_ok", "done", parent="c1"),
        user("u2", text("two")),
    ]
    assert ids(filter_compacted(history)) == ["c1", "s_bad", "s_ok", "u2"]
    assert completed_compactions(history) == [CompletedCompaction(1, 3, None)]


def test_the_compaction_part_may_sit_among_other_parts():
    history = [
        user("u1", text("one")),
        user("c1", text("please compact"), CompactionPart(auto=True)),
        summary("s1", "sum", parent="c1"),
    ]
    assert ids(filter_compacted(history)) == ["c1", "s1"]


def test_tail_start_id_keeps_walking_back_to_that_message():
    history = [
        user("u1", text("one")),
        assistant("a1", tool("t1", tokens=10), parent="u1"),
        user("u2", text("two")),
        assistant("a2", text("ok"), parent="u2"),
        compaction("c1", tail_start_id="u2"),
        summary("s1", "sum", parent="c1"),
        user("u3", text("three")),
    ]
    assert ids(filter_compacted(history)) == ["u2", "a2", "c1", "s1", "u3"]
    assert completed_compactions(history) == [CompletedCompaction(4, 5, 2)]


@pytest.mark.parametrize("tail", ["missing", "c1", "u3"])
def test_a_tail_start_that_is_missing_or_not_before_the_boundary_is_ignored(tail):
    history = [
        user("u1", text("one")),
        compaction("c1", tail_start_id=tail),
        summary("s1", "sum", parent="c1"),
        user("u3", text("three")),
    ]
    assert ids(filter_compacted(history)) == ["c1", "s1", "u3"]
    assert completed_compactions(history) == [CompletedCompaction(1, 2, None)]


def test_the_tail_of_a_pending_compaction_is_not_used():
    history = [
        user("u1", text("one")),
        user("u2", text("two")),
        compaction("c1", tail_start_id="u2"),
    ]
    assert ids(filter_compacted(history)) == ["u1", "u2", "c1"]


def test_filter_is_idempotent():
    history = [
        user("u1", text("one")),
        user("u2", text("two")),
        compaction("c1", tail_start_id="u2"),
        summary("s1", "sum", parent="c1"),
        user("u3", text("three")),
    ]
    once = filter_compacted(history)
    assert ids(filter_compacted(once)) == ids(once) == ["u2", "c1", "s1", "u3"]


def test_compaction_part_and_is_completed_summary():
    part = CompactionPart(overflow=True)
    assert compaction_part(user("u", text("x"), part)) is part
    assert compaction_part(user("u", text("x"))) is None
    assert compaction_part(assistant("a", part)) is None  # only user messages hold boundaries
    assert is_completed_summary(summary("s", "x", parent="c"))
    assert not is_completed_summary(assistant("a", text("x"), summary=True, finish=None))
    assert not is_completed_summary(user("u", text("x"), summary=True))


# -- the real corpus -------------------------------------------------------------------------------------

CORPUS_SIZES = {
    "clever-cabin": 18,
    "crisp-garden": 47,
    "curious-harbor": 50,
    "curious-sailor": 40,
    "hidden-river": 48,
    "kind-meadow": 77,
    "nimble-pixel": 8,
    "quick-falcon": 80,
    "quiet-meadow": 23,
    "shiny-nebula": 22,
    "silent-nebula": 17,
    "silent-panda": 64,
}


def _slug(path):
    return path.name.split("__")[1]


def test_corpus_is_all_there():
    assert sorted(_slug(path) for path in opencode_files()) == sorted(CORPUS_SIZES)


@pytest.mark.parametrize("path", opencode_files(), ids=_slug)
def test_filter_compacted_on_the_corpus(path):
    history = load_export(path)
    assert len(history) == CORPUS_SIZES[_slug(path)]
    view = filter_compacted(history)
    if _slug(path) == "curious-sailor":  # the one real OpenCode compaction: a manual /compact at the end
        assert ids(view) == ["msg_c648e17e6001YM54MG29gGQBfQ", "msg_c648e17ec0017ewG6GOaVULORx"]
        assert completed_compactions(history) == [CompletedCompaction(38, 39, None)]
        assert view[0].parts[0].type == "compaction" and view[1].info.summary
    else:
        assert ids(view) == ids(history)
        assert completed_compactions(history) == []
