"""What a replay's requests would cost (brutus.replay_cost): the shared prefix within the TTL read from the cache,
the rest written, checked by hand; ``replay --compare`` runs every policy on one recording."""

from __future__ import annotations

import json

import pytest

from brutus.models import Message, MessageTime, MessageWithParts, ToolPart, ToolState, ToolTime
from brutus.replay_cost import CostMeter
from brutus.replay_meter import Usage

from corpus_helpers import corpus_file
from cli_helpers import run

SONNET = (3.0, 15.0, 3.75, 0.3)  # input, output, 5m cache write, cache read per million


def message(i: int, pruned: bool = False) -> MessageWithParts:
    state = ToolState(status="completed", output="x", time=ToolTime(compacted=1 if pruned else None))
    return MessageWithParts(info=Message(id=f"m{i}", session_id="s", role="assistant", time=MessageTime(created=0)),
                            parts=[ToolPart(call_id=f"c{i}", tool="bash", state=state)])


def size(m: MessageWithParts) -> int:
    return 1_000


def test_the_shared_prefix_is_read_and_the_rest_written() -> None:
    meter = CostMeter("claude-sonnet-4-5")
    usage = Usage(fixed=10_000, ratio=1.0, output=500)
    view = [message(i) for i in range(3)]
    first = meter.request(view, usage, at=0, estimate=size)
    assert first == pytest.approx((13_000 * SONNET[2] + 500 * SONNET[1]) / 1e6)  # a cold start: all written
    second = meter.request([*view, message(3)], usage, at=60_000, estimate=size)  # appended: 13K read, 1K written
    assert second == pytest.approx((13_000 * SONNET[3] + 1_000 * SONNET[2] + 500 * SONNET[1]) / 1e6)
    pruned = [view[0], message(1, pruned=True), view[2], message(3)]  # a prune at message 1: read up to it
    third = meter.request(pruned, usage, at=120_000, estimate=size)
    assert third == pytest.approx((11_000 * SONNET[3] + 3_000 * SONNET[2] + 500 * SONNET[1]) / 1e6)
    late = meter.request(pruned, usage, at=120_000 + 6 * 60_000, estimate=size)  # the 5-minute cache expired
    assert late == pytest.approx((14_000 * SONNET[2] + 500 * SONNET[1]) / 1e6)
    assert meter.cost == pytest.approx(first + second + third + late)
    assert meter.read_share == pytest.approx((13_000 + 11_000) / (13_000 + 14_000 + 14_000 + 14_000))


def test_a_model_without_a_price_is_priced_as_sonnet() -> None:
    meter = CostMeter("gpt-5.3-codex", ttl="1h")
    assert meter.priced_as == "claude-sonnet-4-5"
    cost = meter.request([message(0)], Usage(fixed=0, ratio=1.0, output=0), at=0, estimate=size)
    assert cost == pytest.approx(1_000 * 6.0 / 1e6)  # a 1-hour write costs twice the input price


def test_compare_runs_every_policy(tmp_path) -> None:
    done = run("replay", corpus_file("quiet-meadow"), "--context-limit", "36000",
               "--compare", "--json", "--plot", tmp_path / "c.png", "--db", tmp_path / "c.db")
    assert done.returncode == 0, done.stderr
    table = json.loads(done.stdout)
    assert (tmp_path / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # the curves and the cumulative costs
    assert table["limit"] == 36_000 and table["default"] == "on-compaction"
    assert [p["policy"] for p in table["policies"]] == ["on-compaction", "after-turn", "off", "cold-cache"]
    for row in table["policies"]:
        assert set(row) == {"policy", "cost_usd", "cache_read_share", "peak_tokens", "compactions", "stalls", "pruned_tokens",
                            "session_id"}
        assert row["cost_usd"] > 0 and 0 < row["cache_read_share"] < 1 and row["peak_tokens"] < 36_000


def test_a_compaction_is_one_more_request_read_from_the_cache_unless_server_side() -> None:
    usage = Usage(fixed=10_000, ratio=1.0, output=500)
    view = [message(i) for i in range(3)]
    client = CostMeter("claude-sonnet-4-5")
    client.request(view, usage, at=0, estimate=size)  # 13,000 written
    cost = client.summary([*view, message(3)], usage, at=30_000, estimate=size, output=2_000)
    assert cost == pytest.approx((13_000 * SONNET[3] + 1_000 * SONNET[2] + 2_000 * SONNET[1]) / 1e6)
    assert client.tally.requests == 2
    after = client.request(view, usage, at=60_000, estimate=size)  # the summary call left the cache as it was
    assert after == pytest.approx((13_000 * SONNET[3] + 500 * SONNET[1]) / 1e6)
    server = CostMeter("claude-sonnet-4-5")
    server.request(view, usage, at=0, estimate=size)
    cost = server.summary([*view, message(3)], usage, at=30_000, estimate=size, output=2_000, server=True)
    assert cost == pytest.approx((14_000 * SONNET[0] + 2_000 * SONNET[1]) / 1e6)  # no breakpoint: all input


def test_compare_prices_the_what_ifs_beside_the_recording(tmp_path) -> None:
    from brutus.replay import load_recording
    from brutus.replay_recorded import recorded_bill

    path = corpus_file("d7d349f9")
    done = run("replay", path, "--context-limit", "70000", "--compare", "--json", "--db", tmp_path / "w.db")
    assert done.returncode == 0, done.stderr
    table = json.loads(done.stdout)
    keys = {"cost_usd", "cache_read_share", "peak_tokens", "compactions", "stalls", "pruned_tokens", "session_id"}
    by = {row["setting"]: row for row in table["what_ifs"]}
    assert list(by) == ["compact at 0.6", "compact at 0.7", "compact at 0.8", "compact at 0.9", "cache TTL 1h",
                        "server compaction"]
    assert all(set(row) == {"setting", *keys} for row in table["what_ifs"])
    assert by["compact at 0.8"] == {"setting": "compact at 0.8", **{k: table["policies"][0][k] for k in keys}}
    assert [by[f"compact at 0.{n}"]["compactions"] for n in (6, 7, 8, 9)] == [5, 4, 3, 2]  # a lower threshold: more
    assert by["cache TTL 1h"]["compactions"] == by["server compaction"]["compactions"] == 3
    assert by["cache TTL 1h"]["cost_usd"] > by["compact at 0.8"]["cost_usd"]  # every write at 2x, for nothing here
    assert by["server compaction"]["cache_read_share"] < by["compact at 0.8"]["cache_read_share"]
    bill = recorded_bill(load_recording(path).history)
    recorded = table["as_recorded"]
    assert set(recorded) == {*keys, "billed_usd", "ratio"} and recorded["compactions"] == 0
    assert bill is not None and recorded["billed_usd"] == bill.cost_usd
    assert recorded["ratio"] == round(recorded["cost_usd"] / bill.cost_usd, 4)
