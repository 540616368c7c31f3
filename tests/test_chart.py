"""The replay's terminal chart (pure text) and its PNG writer's guard."""

from __future__ import annotations

import sys

import pytest

from brutus.cli.chart import ascii_chart, compact_number, require_matplotlib
from brutus.errors import MissingDependency
from brutus.models import ModelLimits
from brutus.replay import ReplayPoint, ReplayReport


def report(views: list[tuple[int, int, str | None]], *, limit: int = 1000) -> ReplayReport:
    curve = [
        ReplayPoint(step=i + 1, message_id=f"msg_{i}", role="assistant", view_tokens=v, after_tokens=a,
                    original_tokens=v + 100 * i, view_messages=i + 1, action=action)
        for i, (v, a, action) in enumerate(views)
    ]
    return ReplayReport(
        session_id="ses_x", limits=ModelLimits(context=limit, output=250), usable_tokens=750, compact_at=750,
        prune_protect=0, prune_minimum=0, summarizer="extractive", steps=len(curve), tool_calls=0, fixed_tokens=0,
        token_ratio=1.0, curve=curve, max_view_tokens=max(v for v, _, _ in views),
        max_original_tokens=max(p.original_tokens for p in curve),
    )


def test_chart_rows_lines_and_markers() -> None:
    points = [(100, 100, None), (500, 500, None), (800, 600, "prune"), (900, 200, "compact"), (300, 300, None),
              (990, 990, "stalled")]
    lines = ascii_chart(report(points), width=12, height=10)
    assert len(lines) == 10 + 3
    limit_row = next(line for line in lines if line.lstrip().startswith("1.0K ┤"))
    assert "─" in limit_row
    compact_row = next(line for line in lines if line.lstrip().startswith("750 ┤"))
    assert "┄" in compact_row
    axis, markers, steps = lines[-3:]
    assert axis.endswith("└" + "─" * 12)
    assert markers.strip() == "p c   !"  # each step spread over two columns, marked on its first
    assert steps.split() == ["step", "1", "6"]
    bottom = lines[-4]
    assert " " not in bottom.split("┤", 1)[1]  # every step has some view


def test_chart_buckets_long_sessions_at_their_peak() -> None:
    points = [(100 * (i % 10), 0, None) for i in range(200)]
    lines = ascii_chart(report(points), width=20, height=6)
    assert all(len(line.split("┤", 1)[1]) == 20 for line in lines if "┤" in line)
    assert ascii_chart(report(points), width=4, height=6) == []


def test_compact_number() -> None:
    assert [compact_number(n) for n in (999, 36_000, 1_250_000)] == ["999", "36.0K", "1.25M"]


def test_plot_without_matplotlib(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(MissingDependency, match=r"^--plot needs matplotlib: pip install 'brutus-store\[plot\]'$"):
        require_matplotlib()


def test_a_stall_on_a_compaction_step_is_shown_and_the_legend_says_so() -> None:
    from brutus.cli.chart import legend
    from brutus.replay import ReplayStall

    points = [(100, 100, None), (800, 700, "prune"), (900, 850, "compact"), (990, 990, None)]
    stalled = report(points).model_copy(update={"stalls": [ReplayStall(step=3, reason="still over")]})
    lines = ascii_chart(stalled, width=8, height=6)
    assert lines[-2].strip() == "p !"  # the compaction of step 3 left the view over: a stall, shown over its c
    assert ascii_chart(report(points), width=8, height=6)[-2].strip() == "p c"
    text = legend(stalled, lines)
    assert text.startswith("context per step, each step 2 columns wide")
    assert "p prune" in text and "! stall (shown over c and p in the same column)" in text
    assert "c compaction" not in text  # only the marks drawn
    assert "─ the context limit" in text and "┄ the compaction threshold" in text and "█ the replayed view" in text
    assert "↑ the recorded session above the chart" in text and "↑" in lines[0]  # step 4 recorded 1,290
    low = report([(100, 100, None), (200, 200, None)])
    assert "↑" not in legend(low, ascii_chart(low, width=8, height=6))
