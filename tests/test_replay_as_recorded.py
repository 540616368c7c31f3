"""``brutus replay FILE --as-recorded``: a recording replayed as it ran and priced by the cost meter, checked
against bills computed by hand on small Claude Code transcripts written here (a sub-agent, a model switch and
back, a TTL gap either side of the edge, a first request reading a prefix other sessions cached), the meter's
rule for typed prompts, and the whole corpus against what it was billed."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from brutus import InvalidInput, SessionStore
from brutus.models import Message, MessageTime, MessageWithParts, TextPart
from brutus.replay import load_recording, load_recordings, replay_file
from brutus.replay_recorded import as_recorded
from brutus.replay_cost import PROMPT_MISS, CostMeter
from brutus.replay_meter import Usage
from brutus.summarizers import ExtractiveSummarizer

from cli_helpers import run
from corpus_helpers import claude_code_files, corpus_file

OPUS = {"input": 15.0, "write": 18.75, "read": 1.5, "output": 75.0}  # Opus 4, per million tokens
SONNET = {"input": 3.0, "write": 3.75, "read": 0.3, "output": 15.0}  # Sonnet 4
OPUS_ID, SONNET_ID = "claude-opus-4-20250514", "claude-sonnet-4-20250514"
START = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)


def near(usd: float) -> Any:
    return pytest.approx(usd, abs=1e-6)  # reports round to the millionth of a dollar


def bill(price: dict[str, float], input: int = 0, write: int = 0, read: int = 0, output: int = 0) -> float:
    return (input * price["input"] + write * price["write"] + read * price["read"] + output * price["output"]) / 1e6


class Transcript:
    """A Claude Code session file built line by line: each line's parent is the chain's previous line."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []
        self.last: dict[bool, str | None] = {False: None, True: None}  # the main chain's and the sidechain's

    def _add(self, kind: str, at: float, message: dict[str, Any], side: bool) -> None:
        uuid = f"00000000-0000-4000-8000-{len(self.lines):012d}"
        self.lines.append({
            "type": kind, "uuid": uuid, "parentUuid": self.last[side], "isSidechain": side, "sessionId": "s-1",
            "cwd": "/work", "timestamp": (START + timedelta(seconds=at)).isoformat().replace("+00:00", "Z"),
            "message": message,
        })
        self.last[side] = uuid

    def user(self, at: float, text: str, side: bool = False) -> None:
        self._add("user", at, {"role": "user", "content": text}, side)

    def result(self, at: float, call: str, output: str, side: bool = False) -> None:
        block = {"type": "tool_result", "tool_use_id": call, "content": output}
        self._add("user", at, {"role": "user", "content": [block]}, side)

    def answer(self, at: float, model: str, usage: tuple[int, int, int, int], *, call: dict[str, Any] | None = None,
               side: bool = False) -> None:
        """An assistant response; ``usage`` is (input, cache write, cache read, output); ``call`` a tool_use."""
        uncached, write, read, output = usage
        content: list[dict[str, Any]] = [{"type": "text", "text": f"working on it ({len(self.lines)})"}]
        if call:
            content.append({"type": "tool_use", **call})
        message = {
            "id": f"msg_{len(self.lines):03d}", "role": "assistant", "model": model, "content": content,
            "stop_reason": "tool_use" if call else "end_turn",
            "usage": {"input_tokens": uncached, "cache_creation_input_tokens": write,
                      "cache_read_input_tokens": read, "output_tokens": output},
        }
        self._add("assistant", at, message, side)

    def write(self, path: Path) -> Path:
        path.write_text("".join(json.dumps(line) + "\n" for line in self.lines))
        return path


def bash(n: int) -> dict[str, Any]:
    return {"id": f"toolu_{n}", "name": "Bash", "input": {"command": f"make step{n}"}}


def replayed(path: Path, url: str) -> Any:
    with SessionStore.open(url) as store:
        return as_recorded(store, load_recordings(path), source=str(path), summarizer=ExtractiveSummarizer())


def test_a_sub_agent_is_replayed_through_the_same_meter(tmp_path: Path, store_url: str) -> None:
    """The main session on Opus calls a Task; its sub-agent (sidechain lines) runs two requests on Sonnet."""
    t = Transcript()
    t.user(0, "check the paper")
    task = {"id": "toolu_task", "name": "Task", "input": {"description": "Find the notation", "prompt": "find it"}}
    t.answer(4, OPUS_ID, (3, 2_000, 10_000, 50), call=task)  # reads the 10,000 other sessions cached
    t.user(5, "find it", side=True)
    t.answer(8, SONNET_ID, (4, 3_000, 0, 20), call=bash(1), side=True)
    t.result(10, "toolu_1", "found it", side=True)
    t.answer(12, SONNET_ID, (5, 500, 3_000, 30), side=True)
    t.result(20, "toolu_task", "the notation is in section 2")
    t.answer(25, OPUS_ID, (2, 600, 12_000, 80))
    report = replayed(t.write(tmp_path / "sub.jsonl"), store_url)

    main = bill(OPUS, input=3, write=2_000, read=10_000, output=50) + bill(OPUS, input=2, write=600, read=12_000, output=80)
    sub = bill(SONNET, input=4, write=3_000, output=20) + bill(SONNET, input=5, write=500, read=3_000, output=30)
    assert report.sessions == 2 and report.requests == 4
    assert [(r.sub_agent, r.requests) for r in report.replays] == [(False, 2), (True, 2)]
    assert report.replays[0].cost_usd == near(main) and report.replays[1].cost_usd == near(sub)
    assert report.cost_usd == near(main + sub)
    assert report.tokens == {"input": 14, "cache_read": 25_000, "cache_write": 6_100, "output": 180}
    assert report.billed is not None and report.billed.cost_usd == near(main + sub) and report.ratio == 1.0
    with SessionStore.open(store_url, read_only=True) as store:  # the sub-agent under the main session
        assert store.get_session(report.replays[1].session_id).parent_id == report.replays[0].session_id


def test_a_model_switch_starts_cold_and_the_first_model_keeps_its_cache(tmp_path: Path) -> None:
    t = Transcript()
    t.user(0, "build it")
    t.answer(3, OPUS_ID, (3, 5_000, 10_000, 10), call=bash(1))
    t.result(10, "toolu_1", "ok")
    t.answer(14, SONNET_ID, (3, 15_100, 0, 10), call=bash(2))  # Opus's 15,000 cached are not Sonnet's
    t.result(20, "toolu_2", "ok")
    t.answer(24, OPUS_ID, (3, 700, 15_000, 10))  # back on Opus within its TTL: Opus's cache reads
    report = replayed(t.write(tmp_path / "switch.jsonl"), f"sqlite:///{tmp_path / 'r.db'}")

    first = bill(OPUS, input=3, write=5_000, read=10_000, output=10)
    switch = bill(SONNET, input=3, write=15_100, output=10)  # the recording's first Sonnet request read nothing
    back = bill(OPUS, input=3, write=700, read=15_000, output=10)
    assert report.cost_usd == near(first + switch + back) and report.ratio == 1.0
    assert report.tokens == {"input": 9, "cache_read": 25_000, "cache_write": 20_800, "output": 30}
    with SessionStore.open(str(tmp_path / "x.db")) as store:  # one session's replay prices both models
        single = replay_file(store, tmp_path / "switch.jsonl", context_limit=100_000_000)
    assert single.cost_usd == near(first + switch + back)
    assert single.priced_as == f"{OPUS_ID}, {SONNET_ID}"


def test_the_ttl_counts_from_send_to_send_with_the_apis_grace(tmp_path: Path) -> None:
    """The second request is sent 313 s after the first (its response came 5 s after its send): it reads. The
    third is sent 324 s after the second: the cache has expired, all of it is written."""
    t = Transcript()
    t.user(0, "run the benchmarks")
    t.answer(5, SONNET_ID, (2, 12_000, 0, 40), call=bash(1))
    t.result(313, "toolu_1", "done")
    t.answer(316, SONNET_ID, (2, 500, 12_000, 40), call=bash(2))
    t.result(637, "toolu_2", "done")
    t.answer(640, SONNET_ID, (2, 12_900, 0, 40))
    report = replayed(t.write(tmp_path / "ttl.jsonl"), f"sqlite:///{tmp_path / 'r.db'}")

    expected = (bill(SONNET, input=2, write=12_000, output=40) + bill(SONNET, input=2, write=500, read=12_000, output=40)
                + bill(SONNET, input=2, write=12_900, output=40))
    assert report.tokens == {"input": 6, "cache_read": 12_000, "cache_write": 25_400, "output": 120}
    assert report.cost_usd == near(expected) and report.ratio == 1.0


def test_a_first_request_reads_what_the_recording_shows_and_writes_only_what_is_new(tmp_path: Path) -> None:
    """The first request reads the 10,491-token system prompt and tools another session cached; each next one
    reads all the last one cached (its input less its uncached tokens) and writes what is new."""
    t = Transcript()
    t.user(0, "fix the build")
    t.answer(4, SONNET_ID, (4, 1_500, 10_491, 30), call=bash(1))
    t.result(9, "toolu_1", "error: missing header")
    t.answer(12, SONNET_ID, (6, 800, 11_991, 30), call=bash(2))
    t.result(20, "toolu_2", "built")
    t.answer(22, SONNET_ID, (3, 400, 12_791, 25))
    report = replayed(t.write(tmp_path / "first.jsonl"), f"sqlite:///{tmp_path / 'r.db'}")

    assert report.tokens == {"input": 13, "cache_read": 10_491 + 11_991 + 12_791, "cache_write": 1_500 + 800 + 400,
                             "output": 85}
    expected = bill(SONNET, input=13, read=35_273, write=2_700, output=85)
    assert report.cost_usd == near(expected)
    assert report.billed is not None and report.billed.cost_usd == near(expected) and report.ratio == 1.0


def _said(i: int, role: str, text: str) -> MessageWithParts:
    info = Message(id=f"m{i}", session_id="s", role=role, time=MessageTime(created=0))  # type: ignore[arg-type]
    return MessageWithParts(info=info, parts=[TextPart(text=text)])


def test_after_a_typed_prompt_the_measured_share_reads_only_the_system_prompt() -> None:
    meter = CostMeter(SONNET_ID, prompt_miss=PROMPT_MISS)
    usage = Usage(fixed=10_000, ratio=1.0, output=0)
    view = [_said(0, "user", "a"), _said(1, "assistant", "b")]
    meter.request(view, usage, at=0, estimate=lambda m: 1_000)
    prompted = [*view, _said(2, "user", "c")]
    meter.request(prompted, usage, at=60_000, estimate=lambda m: 1_000, prompted=True)
    read = 10_000 + round((1 - 21 / 57) * 2_000)  # the system prompt always, the messages 36 times in 57
    assert meter.tally.tokens == {"input": 0, "cache_read": read, "cache_write": 12_000 + 13_000 - read, "output": 0}


def test_an_unlimited_replay_is_the_same_run_as_the_main_session_as_recorded(tmp_path: Path) -> None:
    path = corpus_file("0a725fb5")
    with SessionStore.open(str(tmp_path / "same.db")) as store:
        whole = as_recorded(store, load_recordings(path), summarizer=ExtractiveSummarizer())
        alone = replay_file(store, path, context_limit=100_000_000, summarizer=ExtractiveSummarizer())
    assert len(load_recordings(path)) == 2 and load_recording(path).parent_id is None
    assert [r.sub_agent for r in whole.replays] == [False, True]
    assert alone.compactions == [] and alone.cost_usd == whole.replays[0].cost_usd
    assert alone.requests == whole.replays[0].requests == 201 and whole.requests == 212


# every corpus transcript with usage: the replayed bill over the billed one (benchmarks/cost.py prints the table)
RATIOS = {"0a725fb5": 0.98, "2cba43de": 1.05, "6dc88126": 1.10, "9dd861b1": 1.00, "d7d349f9": 1.02, "da4409c0": 0.98,
          "f6108699": 1.00, "f67ab274": 0.97}


def test_the_corpus_replays_within_ten_percent_of_its_bill_but_one(tmp_path: Path) -> None:
    """6dc88126 is 10.2% over: 3 typed prompts, none of which missed the cache, priced at the measured 21 in 57."""
    ratios = {}
    with SessionStore.open(str(tmp_path / "corpus.db")) as store:
        for path in claude_code_files():
            try:
                recordings = load_recordings(path)
            except InvalidInput:  # c001d2c0 holds no conversation
                continue
            report = as_recorded(store, recordings, summarizer=ExtractiveSummarizer())
            if report.billed is not None:
                ratios[path.name[:8]] = round(report.ratio or 0, 2)
    assert ratios == RATIOS


def test_the_command(tmp_path: Path) -> None:
    path = corpus_file("0a725fb5")
    done = run("replay", path, "--as-recorded", "--json", "--db", tmp_path / "c.db")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert {"cost_usd", "requests", "sessions", "tokens", "cost_by_kind", "billed", "ratio", "replays"} <= set(report)
    assert set(report["tokens"]) == set(report["cost_by_kind"]) == {"input", "cache_read", "cache_write", "output"}
    assert report["sessions"] == 2 and report["requests"] == report["billed"]["requests"] == 212
    assert report["ratio"] == round(report["cost_usd"] / report["billed"]["cost_usd"], 4)
    assert report["database"] == str(tmp_path / "c.db")

    people = run("replay", path, "--as-recorded", "--db", tmp_path / "c.db")
    flat = " ".join(people.stdout.split())
    assert f"2 sessions, 212 requests, ${report['cost_usd']:,.4f}; billed ${report['billed']['cost_usd']:,.4f}" in flat
    assert f": {report['ratio']:.2f}×" in flat and "sub-agent" in flat

    clash = run("replay", path, "--as-recorded", "--context-limit", "50000", "--db", tmp_path / "c.db")
    assert clash.returncode == 2 and "not with --context-limit" in clash.stderr


def test_as_recorded_writes_to_a_temporary_database_unless_told(tmp_path: Path) -> None:
    own = tmp_path / "own.db"
    with SessionStore.open(str(own)) as store:
        mine = store.create_session(title="my work").id
    env = {"BRUTUS_DATABASE_URL": f"sqlite:///{own}", "TMPDIR": str(tmp_path)}
    done = run("replay", corpus_file("9dd861b1"), "--as-recorded", "--json", env=env)
    assert done.returncode == 0, done.stderr
    written = json.loads(done.stdout)
    (where,) = list(tmp_path.glob("brutus-replay-*/replay.db"))
    assert written["database"] == str(where)
    with SessionStore.open(str(own), read_only=True) as store:
        assert [s.id for s in store.list_sessions()] == [mine]
    with SessionStore.open(str(where), read_only=True) as store:
        assert [s.id for s in store.list_sessions()] == [r["session_id"] for r in written["replays"]]
