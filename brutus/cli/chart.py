"""The context curve of a replay as a terminal chart, and as a PNG with matplotlib (optional: ``brutus-store[plot]``).

The terminal chart is plain text: columns of steps (a step spread over several columns when there is room,
steps bucketed at their peak when there is not), bars of block characters for the replayed view, ``·`` for the recorded
session (``↑`` when it is above the chart), a ``─`` line at the context limit and ``┄`` where compaction
starts, and a row of markers under the axis: ``p`` prune, ``c`` compaction, ``!`` stall. A column holds one
marker: a stall wins over a compaction (a compaction that leaves the view over the threshold is a stall too),
a compaction over a prune. ``legend`` says what each mark in a chart means, the marks it drew only.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..replay import ReplayPoint, ReplayReport

__all__ = ["ascii_chart", "compact_number", "legend", "require_matplotlib", "write_png"]

_BLOCKS = " ▁▂▃▄▅▆▇█"


def compact_number(value: int) -> str:
    """12,345 → ``12.3K``; 1,234,567 → ``1.23M``."""
    if abs(value) >= 1_000_000:
        return f"{value / 1_000_000:.2f}M"
    if abs(value) >= 1_000:
        return f"{value / 1_000:.1f}K"
    return str(value)


def _columns(points: Sequence[ReplayPoint], width: int) -> list[tuple[int, int, list[ReplayPoint]]]:
    """(view, recorded, steps) per column: a step spread over several columns when there is room (its first
    column shows the view before its prune / compaction, the others after), else buckets of steps at their peak."""
    count = len(points)
    if count <= width:
        span = width // count
        columns = []
        for p in points:
            columns.append((p.view_tokens, p.original_tokens, [p]))
            columns += [(p.after_tokens, p.original_tokens, [])] * (span - 1)
        return columns
    buckets = [list(points[i * count // width : (i + 1) * count // width]) for i in range(width)]
    return [(max(p.view_tokens for p in b), max(p.original_tokens for p in b), b) for b in buckets]


def _marker(bucket: list[ReplayPoint], stalls: set[int]) -> str:
    actions = "".join(p.action or "" for p in bucket)
    if "stalled" in actions or any(p.step in stalls for p in bucket):
        return "!"
    if "compact" in actions:
        return "c"
    if "prune" in actions:
        return "p"
    return " "


def ascii_chart(report: ReplayReport, *, width: int = 72, height: int = 12) -> list[str]:
    """The chart's lines (see the module docstring); empty for a report without steps."""
    points = report.curve
    if not points or width < 8 or height < 3:
        return []
    limit = report.limits.context
    top = max(limit, report.max_view_tokens, 1) * 1.1
    columns = _columns(points, width)
    views = [view for view, _, _ in columns]
    originals = [recorded for _, recorded, _ in columns]
    buckets = [steps for _, _, steps in columns]
    cells = height * 8

    def row_of(value: int) -> int:
        return min(height - 1, int(value / top * height))

    grid = [[" "] * len(buckets) for _ in range(height)]
    for column, value in enumerate(views):
        eighths = round(value / top * cells)
        for row in range(height):
            filled = max(0, min(8, eighths - row * 8))
            if filled:
                grid[row][column] = _BLOCKS[filled]
    for column, value in enumerate(originals):
        if value > top:
            grid[height - 1][column] = "↑"
        elif grid[row_of(value)][column] == " ":
            grid[row_of(value)][column] = "·"
    for value, char in ((report.compact_at, "┄"), (limit, "─")):
        if value:
            row = grid[row_of(value)]
            row[:] = [char if c == " " else c for c in row]
    label_width = 7
    labels = {row_of(limit): compact_number(limit)} if limit else {}
    if report.compact_at:
        labels.setdefault(row_of(report.compact_at), compact_number(report.compact_at))
    lines = []
    for row in range(height - 1, -1, -1):
        label = labels.get(row, "")
        lines.append(f"{label:>{label_width}} ┤{''.join(grid[row])}")
    lines.append(f"{'0':>{label_width}} └{'─' * len(buckets)}")
    stalls = {stall.step for stall in report.stalls}
    lines.append(f"{'':>{label_width}}  {''.join(_marker(b, stalls) for b in buckets)}")
    first, last = str(points[0].step), str(points[-1].step)
    lines.append(f"{'step':>{label_width}}  {first}{last:>{max(1, len(buckets) - len(first))}}")
    return lines


_MEANINGS = (
    ("█", "the replayed view (▁ to ▇: its top, in eighths of a row)"),
    ("·", "the recorded session, which had no limit"),
    ("↑", "the recorded session above the chart"),
    ("─", "the context limit"),
    ("┄", "the compaction threshold"),
)
_MARKERS = (
    ("p", "prune"),
    ("c", "compaction"),
    ("!", "stall (shown over c and p in the same column)"),
)


def legend(report: ReplayReport, lines: list[str]) -> str:
    """What the marks of ``lines`` (``ascii_chart(report, …)``) mean, and how many steps a column holds."""
    if not lines:
        return ""
    body = "".join(line.split("┤", 1)[1] for line in lines if "┤" in line)
    markers = lines[-2]
    count, width = len(report.curve), len(lines[-3].split("└", 1)[1])
    if count <= width:
        span = width // count
        scale = "one column per step" if span == 1 else (
            f"each step {span} columns wide (its first column before its prune or compaction, the rest after)")
    else:
        scale = f"about {count / width:.1f} steps per column, each at its peak"
    seen = [f"{mark} {meaning}" for mark, meaning in _MEANINGS if mark in body or (mark == "█" and set(body) & set(_BLOCKS[1:]))]
    seen += [f"{mark} {meaning}" for mark, meaning in _MARKERS if mark in markers]
    return f"context per step, {scale}: " + "; ".join(seen)


def require_matplotlib() -> None:
    """Fail early, with the install command, when matplotlib is missing."""
    from ..extras import require

    require("--plot", {"matplotlib": "plot"})


def write_png(report: ReplayReport | list[ReplayReport], path: str | Path) -> None:
    """The context curve as a PNG: the replayed view (before and after each step's prune or compaction),
    the recorded session, the limit, the compaction threshold, markers where prune / compaction ran, and
    below it the cumulative cost of the requests. Several reports (``--compare``): one curve each. Never
    over a file of a database in use (``db.files``)."""
    from ..db.files import refuse_database_file

    refuse_database_file(path, doing="write")
    require_matplotlib()
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    reports = report if isinstance(report, list) else [report]
    first = reports[0]
    figure, (axes, money) = pyplot.subplots(2, 1, figsize=(10, 7), dpi=100, sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    try:
        axes.plot([p.step for p in first.curve], [p.original_tokens for p in first.curve], ":", color="grey",
                  label="recorded session (no limit)")
        for one in reports:
            steps, view = [], []
            for p in one.curve:
                steps += [p.step, p.step]
                view += [p.view_tokens, p.after_tokens]
            name = f" ({one.policy})" if len(reports) > 1 else ""
            axes.plot(steps, view, "-", label=f"replayed view{name}")
            money.plot([p.step for p in one.curve], [p.cost for p in one.curve], "-", label=f"${one.cost_usd:.3f}{name}")
        if first.limits.context:
            axes.axhline(first.limits.context, color="tab:red", label=f"context limit {first.limits.context:,}")
            label = f"compact at {first.compact_at:,}"
            axes.axhline(first.compact_at, color="tab:orange", linestyle="--", label=label)
        for kind, marker, color in (("prune", "v", "tab:green"), ("compact", "x", "tab:purple")):
            hits = [p for p in first.curve if p.action and kind in p.action]
            if hits:
                axes.scatter([p.step for p in hits], [p.view_tokens for p in hits], marker=marker, color=color,
                             zorder=3, label=kind)
        money.set_xlabel("step (recorded message)")
        axes.set_ylabel("tokens in the view")
        money.set_ylabel("cost so far (USD)")
        axes.set_title(f"brutus replay: {first.title or first.source or first.session_id}")
        axes.legend(loc="upper left", fontsize="small")
        money.legend(loc="upper left", fontsize="small")
        axes.grid(alpha=0.3)
        money.grid(alpha=0.3)
        figure.tight_layout()
        figure.savefig(str(path), format="png")
    finally:
        pyplot.close(figure)
