"""Replay: the meter's arithmetic, real corpus sessions driven through the store on SQLite and PostgreSQL
under small limits, the stall guard, and ``brutus replay`` through the real entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from corpus_helpers import corpus_file

from brutus.db.check_ops import check_database
from brutus.db.engine import describe
from brutus.db.stats_ops import session_stats
from brutus.errors import ImportFormatError, InvalidInput
from brutus.history import filter_compacted
from brutus.models import MessageWithParts, ModelLimits, TokenCounts
from brutus.estimates import context_size, estimate_message_tokens
from brutus.render import to_anthropic, validate_anthropic
from brutus.replay import ReplayReport, load_recording, replay, replay_file, replay_limits
from brutus.replay_meter import RecordedCalls, Usage, measure_view
from brutus.store import SessionStore
from brutus.summarizers import ExtractiveSummarizer, Summary
from brutus.flows import Tx
from cli_helpers import run as run_cli

def run(*args: str, code: str | None = None) -> Any:
    """``brutus ARGS`` in this process; with ``code``, that Python program in a process of its own (it
    changes what is importable) with ARGS as its arguments."""
    if code is None:
        return run_cli(*args)
    env = {k: v for k, v in os.environ.items() if k not in ("BRUTUS_DEBUG", "ANTHROPIC_API_KEY")}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=600)


# -- the meter --------------------------------------------------------------------------------------------


def message(role: str, index: int, text: str, tokens: TokenCounts | None = None) -> MessageWithParts:
    info = {"id": f"msg_{index}", "session_id": "ses_x", "role": role, "time": {"created": index}}
    if role == "assistant":
        info.update(parent_id="msg_0", finish="stop", tokens=(tokens or TokenCounts()).model_dump())
    return MessageWithParts.model_validate({"info": info, "parts": [{"type": "text", "text": text}]})


def test_recorded_calls_are_rebased_on_the_replayed_view() -> None:
    history = [
        message("user", 0, "u" * 400),  # 100 + 4 tokens
        message("assistant", 1, "a" * 200, TokenCounts(input=5104, output=50)),  # 50 + 4
        message("user", 2, "v" * 400),
        message("assistant", 3, "b" * 200, TokenCounts(input=5600, output=80)),
    ]
    recorded = RecordedCalls(history)
    calls = []
    for index in range(4):  # as the replay does: observe a message, then measure the recording there
        calls.append(recorded.observe(index))
        assert recorded.tokens_at(index) == context_size(filter_compacted(history[: index + 1]))  # = recorded usage
    first, second = calls[1], calls[3]
    assert calls[0] is None and calls[2] is None
    assert first == Usage(fixed=5000, ratio=1.0, output=50, uncached=5104)  # all its input uncached, as recorded
    assert second is not None and second.fixed == 5000 and second.ratio == pytest.approx(600 / 262)
    # a replayed view that lost the first turn: fixed + ratio x what is left before the call, + its output
    usage = {"msg_3": second}
    view = history[2:]
    assert measure_view(view, usage, second) == 5000 + round(600 / 262 * 104) + 80
    # no call since the last summary: the estimate of the view re-based with the latest call
    summary = message("assistant", 9, "summary " * 50)
    summary.info.summary = True
    rest = [history[2], summary]
    assert measure_view(rest, usage, second) == 5000 + round(600 / 262 * sum(map(estimate_message_tokens, rest)))
    assert measure_view(rest, usage, None) == sum(map(estimate_message_tokens, rest))


def test_replay_limits() -> None:
    history = load_recording(corpus_file("quiet-meadow")).history
    assert replay_limits(history) == ("gpt-5.3-codex", ModelLimits(context=400_000, input=272_000, output=128_000))
    assert replay_limits(history, context_limit=36_000) == ("gpt-5.3-codex", ModelLimits(context=36_000, output=9_000))
    assert replay_limits(history, model="claude-sonnet-4-5", context_limit=200_000)[1] == ModelLimits(
        context=200_000, output=32_000
    )
    with pytest.raises(InvalidInput):
        replay_limits(history, context_limit=0)


# -- corpus sessions through the store ----------------------------------------------------------------------

CASES = [("quiet-meadow", 36_000), ("hidden-river", 40_000), ("d7d349f9", 40_000)]  # 2 OpenCode, 1 Claude Code


def turn_of(report: ReplayReport, step: int) -> int:
    return sum(1 for p in report.curve[:step] if p.role == "user")


@pytest.mark.parametrize("name, limit", CASES, ids=[c[0] for c in CASES])
def test_replay_prunes_and_compacts_a_real_session(store: SessionStore, name: str, limit: int) -> None:
    path = corpus_file(name)
    recording = load_recording(path)
    report = replay_file(store, path, context_limit=limit, summarizer=ExtractiveSummarizer())

    assert report.steps == len(recording.history) == len(report.curve)
    assert [p.step for p in report.curve] == list(range(1, report.steps + 1))
    assert report.limits.context == limit and report.compactions  # the limit is small: it had to compact
    first_action = next(p.step for p in report.curve if p.action)
    for point in report.curve[: first_action - 1]:  # before any prune or compaction: exactly the recording
        assert point.view_tokens == point.original_tokens
    for c in report.compactions:
        assert c.view_before > report.compact_at and c.view_after < c.view_before
        assert c.trigger == "auto" and c.fallback_used is None and c.summary_model == "extractive"
    for p in report.prunes:
        assert p.view_after < p.view_before and p.pruned_tokens >= report.prune_minimum
    assert report.max_original_tokens > report.max_view_tokens
    assert len({turn_of(report, s.step) for s in report.stalls}) == len(report.stalls)  # never a stall loop

    records = store.compactions(report.session_id)
    assert [r.id for r in records if r.status == "completed"] == [c.compaction_id for c in report.compactions]
    assert all(r.trigger == "auto" for r in records)
    full = store.messages(report.session_id)
    continues = sum(m.info.synthetic for m in full) - sum(m.info.synthetic for m in recording.history)
    assert len(full) == report.steps + 2 * len(report.compactions) + continues
    recorded_states = Counter(p.state.status for m in recording.history for p in m.parts if p.type == "tool")
    stored_states = Counter(p.state.status for m in full for p in m.parts if p.type == "tool")
    assert stored_states == recorded_states

    stats = store.run(Tx(session_stats(report.session_id), write=False))
    assert stats.pruned_tokens == report.pruned_tokens  # prunes and compactions' own: one figure, both counts
    assert store.run(Tx(check_database(), write=False)).problems == []
    view = store.filter_compacted(report.session_id)
    assert len(view) == report.final_view_messages
    validate_anthropic(to_anthropic(view))


def test_without_a_limit_the_replay_is_the_recording(store: SessionStore) -> None:
    history = load_recording(corpus_file("shiny-nebula")).history
    report = replay(store, history, limits=ModelLimits(context=0))
    assert not report.prunes and not report.compactions and not report.stalls
    assert [p.view_tokens for p in report.curve] == [p.original_tokens for p in report.curve]
    assert report.final_view_messages == len(history)
    again = replay(store, history, limits=ModelLimits(context=0))  # new ids: a recording replays any number of times
    assert again.session_id != report.session_id and again.curve[-1].message_id != report.curve[-1].message_id


class Verbose:
    """A summarizer whose summaries are longer than what they summarize: every compaction stalls."""

    model = "verbose"

    def summarize(self, request: object) -> Summary:
        return Summary(text="blah " * 200_000, model=self.model, tokens=TokenCounts())


def test_a_stalling_compaction_is_recorded_and_not_retried_in_the_same_turn(store: SessionStore) -> None:
    path = corpus_file("kind-meadow")
    report = replay_file(store, path, context_limit=40_000, summarizer=Verbose())
    assert report.stalls and not report.compactions
    assert all("would not reduce the context" in s.reason for s in report.stalls)
    assert len({turn_of(report, s.step) for s in report.stalls}) == len(report.stalls)
    failed = [r for r in store.compactions(report.session_id) if r.status == "failed"]
    assert len(failed) == len(report.stalls)
    validate_anthropic(to_anthropic(store.filter_compacted(report.session_id)))


def test_a_file_with_no_conversation_is_refused(store: SessionStore, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="no conversation to replay"):
        replay_file(store, corpus_file("c001d2c0"))
    empty = tmp_path / "empty.json"
    empty.write_text("")
    with pytest.raises(ImportFormatError, match="empty"):
        replay_file(store, empty)
    assert store.list_sessions() == []


# -- brutus replay ------------------------------------------------------------------------------------------


def test_replay_command(store_url: str, tmp_path: Path) -> None:
    path = str(corpus_file("quiet-meadow"))
    result = run("replay", path, "--context-limit", "36000", "--db", store_url, "--json")
    assert result.returncode == 0, result.stderr
    report = ReplayReport.model_validate(json.loads(result.stdout))
    assert report.database == describe(store_url)  # the file's path, or the URL without its password
    assert report.steps == 23 and not report.prunes and report.compactions  # on-compaction: prune only inside
    assert run("check", "--db", store_url).returncode == 0
    view = json.loads(run("show", report.session_id, "--db", store_url, "--json").stdout)
    assert view[0]["parts"][0]["type"] == "compaction"

    people = run("replay", path, "--context-limit", "36000", "--policy", "after-turn", "--db", store_url)
    assert people.returncode == 0, people.stderr
    for fragment in ("replayed", "Compactions", "36.0K ┤───", "peak view", "policy after-turn, relieved above 21,600"):
        assert fragment in people.stdout
    listed = json.loads(run("sessions", "list", "--db", store_url, "--json").stdout)
    assert len(listed) == 2 and all(s["title"].startswith("replay: ") for s in listed)


def test_replay_plot(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    db = f"sqlite:///{tmp_path / 'plot.db'}"
    png = tmp_path / "curve.png"
    result = run("replay", str(corpus_file("nimble-pixel")), "--context-limit", "24000", "--plot", str(png), "--db", db)
    assert result.returncode == 0, result.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"drawn in {png}" in result.stdout


def test_replay_plot_without_matplotlib_is_a_clear_error(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "from brutus.cli.app import main; sys.exit(main(sys.argv[1:]))"
    )
    db = f"sqlite:///{tmp_path / 'none.db'}"
    result = run("replay", str(corpus_file("nimble-pixel")), "--plot", str(tmp_path / "x.png"), "--db", db, code=code)
    assert result.returncode == 1
    assert result.stderr.strip() == "brutus: error: --plot needs matplotlib: pip install 'brutus-store[plot]'"
    assert not (tmp_path / "none.db").exists()  # refused before any work


@pytest.mark.parametrize(
    "args, message",
    [
        (("replay", "/nonexistent/session.json"), "cannot read the file"),
        (("replay", str(corpus_file("c001d2c0"))), "no conversation to replay"),
        (("replay", str(corpus_file("nimble-pixel")), "--context-limit", "0"), "Invalid value for '--context-limit'"),
    ],
)
def test_replay_errors_are_one_line(args: tuple[str, ...], message: str, tmp_path: Path) -> None:
    result = run(*args, "--db", f"sqlite:///{tmp_path / 'e.db'}")
    assert result.returncode != 0 and message in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("mode", ["on-compaction", "after-turn", "off"])
def test_replay_runs_the_live_policy(store: SessionStore, mode: str) -> None:
    """Replay asks ``plan_request`` what to do, as ``Conversation`` does: ``off`` never prunes, not even in a
    compaction; every compaction starts above the policy's threshold; one compaction per user turn at most."""
    from brutus import ContextPolicy
    from brutus.policy import threshold

    report = replay_file(store, corpus_file("kind-meadow"), context_limit=40_000, summarizer=ExtractiveSummarizer(),
                         policy=ContextPolicy(prune=mode))
    assert report.policy == mode and report.compact_at == threshold(report.limits, ContextPolicy(prune=mode))
    assert report.compactions and all(c.view_before > report.compact_at for c in report.compactions)
    if mode == "off":
        assert not report.prunes and all(c.pruned_tokens == 0 for c in report.compactions)
    if mode == "on-compaction":
        assert not report.prunes
    turns = [turn_of(report, c.step) for c in report.compactions]
    assert len(turns) == len(set(turns)) or mode != "off"
