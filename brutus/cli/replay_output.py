"""How a replay report prints for people: the setting, prunes, compactions, stalls and the context curve."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..replay import ReplayPoint, ReplayReport
from .chart import ascii_chart
from .maintenance_output import console

__all__ = ["print_report", "progress"]


@contextmanager
def progress(label: str) -> Iterator[Callable[[ReplayPoint, int], None] | None]:
    """A progress bar on stderr (only on a terminal); yields the replay's ``on_step`` callback."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    err = console(stderr=True)
    if not err.is_terminal:
        yield None
        return
    columns = (
        TextColumn(label), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"), TimeElapsedColumn()
    )
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task("", total=None)

        def on_step(point: ReplayPoint, total: int) -> None:
            note = f"view {point.after_tokens:,} tokens" + (f" [{point.action}]" if point.action else "")
            bar.update(task, completed=point.step, total=total, description=note)

        yield on_step


def _table(*columns: str, title: str) -> Any:
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for index, name in enumerate(columns):
        text = name in ("summary by", "policy")
        table.add_column(name, justify="left" if text else "right", no_wrap=True, min_width=len(name) if text else None)
    return table


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def print_comparison(comparison: dict[str, Any]) -> None:
    """``replay --compare``: one row per policy."""
    table = _table("policy", "cost (USD)", "cache reads", "peak context", "compactions", "stalls",
                   title=f"Policies under a {comparison['limit']:,}-token context (default: {comparison['default']})")
    for row in comparison["policies"]:
        table.add_row(row["policy"], f"{row['cost_usd']:.4f}", f"{row['cache_read_share']:.1%}", f"{row['peak_tokens']:,}",
                      str(row["compactions"]), str(row["stalls"]))
    console().print(table)


def print_report(report: ReplayReport) -> None:
    from rich.markup import escape

    out = console()
    limits = report.limits
    source = escape(report.source or report.title or "a recording")
    out.print(f"[bold]replayed {source}[/bold] → session {report.session_id}")
    if limits.context:
        out.print(
            f"model {escape(report.model or 'unknown')}; limit {limits.context:,} tokens (output reserve "
            f"{limits.output:,}, usable {report.usable_tokens:,}); policy {report.policy}, relieved above {report.compact_at:,}; "
            f"summaries by {escape(report.summarizer)}"
        )
    else:
        out.print(f"model {escape(report.model or 'unknown')}: unlimited context, nothing to prune or compact")
    out.print(
        f"every recorded call carried {report.fixed_tokens:,} tokens besides the messages (system prompt, tools); "
        f"{report.token_ratio:.2f} real tokens per estimated token; prune protects {report.prune_protect:,}, "
        f"minimum {report.prune_minimum:,}"
    )
    out.print(
        f"{report.steps:,} steps, {report.tool_calls:,} tool calls: {_count(len(report.prunes), 'prune')} "
        f"({report.pruned_tokens:,} tokens), {_count(len(report.compactions), 'compaction')}, "
        f"{_count(len(report.stalls), 'stall')}"
    )
    out.print(
        f"cost with prompt caching ${report.cost_usd:,.4f} at {escape(report.priced_as or '?')}'s prices, "
        f"{report.cache_read_share:.1%} of the input read from the cache"
    )
    if report.prunes:
        table = _table("step", "pruned tokens", "outputs", "view", title="Prunes")
        for p in report.prunes:
            table.add_row(str(p.step), f"{p.pruned_tokens:,}", str(p.parts), f"{p.view_before:,} → {p.view_after:,}")
        out.print(table)
    if report.compactions:
        table = _table("step", "view", "store pre → post", "pruned", "summary by",
                       title="Compactions (store pre/post: from the recorded usage the stored messages carry)")
        for c in report.compactions:
            by = (c.summary_model or "-") + (f" ({c.fallback_used} fallback)" if c.fallback_used else "")
            table.add_row(str(c.step), f"{c.view_before:,} → {c.view_after:,}", f"{c.pre_tokens:,} → {c.post_tokens:,}",
                          f"{c.pruned_tokens:,}", escape(by))
        out.print(table)
    for stall in report.stalls:
        out.print(f"[yellow]stalled at step {stall.step}[/yellow]: {escape(stall.reason)}")
    width = max(20, min(100, shutil.get_terminal_size((100, 24)).columns - 12))
    chart = ascii_chart(report, width=width)
    if chart:
        out.print("context per step: █ replayed view, · recorded session, ─ limit, ┄ compaction threshold; "
                  "p prune, c compaction, ! stall")
        for line in chart:
            out.print(escape(line))
    limit = f" vs limit {limits.context:,}" if limits.context else ""
    out.print(
        f"peak view {report.max_view_tokens:,} tokens{limit} (the recording peaked at {report.max_original_tokens:,}); "
        f"final view {report.final_view_tokens:,} tokens in {report.final_view_messages:,} messages"
    )
