"""How a replay report prints for people: the setting, prunes, compactions, stalls and the context curve."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..replay import ReplayPoint, ReplayReport
from ..replay_recorded import AsRecordedReport
from .chart import ascii_chart, legend
from .tables import Column, console, is_plain, print_table

__all__ = [
    "print_as_recorded", "print_comparison", "print_report", "print_written", "progress", "pruned_line", "usable_line"
]

CHART_WIDTH = 100  # columns of steps at most (and in a pipe, where no terminal limits it)


@contextmanager
def progress(label: str) -> Iterator[Callable[[ReplayPoint, int], None] | None]:
    """A progress bar on stderr (only on a terminal); yields the replay's ``on_step`` callback."""
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Column as Cell

    err = console(stderr=True)
    if not err.is_terminal:
        yield None
        return
    # the counts, the view and the time keep their widths (about 40 columns); of the rest the label may take
    # three fifths (cut with an ellipsis), and the bar takes what is left
    room = max(12, (err.width - 40) * 3 // 5)
    columns = (
        TextColumn(escape(label), table_column=Cell(width=min(len(label), room), no_wrap=True, overflow="ellipsis")),
        BarColumn(bar_width=None, table_column=Cell(ratio=1)),
        MofNCompleteColumn(table_column=Cell(no_wrap=True)),
        TextColumn("{task.description}", table_column=Cell(no_wrap=True, min_width=len("view 999,999 compact"))),
        TimeElapsedColumn(table_column=Cell(no_wrap=True)),
    )
    with Progress(*columns, console=err, transient=True, expand=True) as bar:
        task = bar.add_task("", total=None)

        def on_step(point: ReplayPoint, total: int) -> None:
            note = f"view {point.after_tokens:,}" + (f" {escape(point.action)}" if point.action else "")
            bar.update(task, completed=point.step, total=total, description=note)

        yield on_step


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def print_comparison(comparison: dict[str, Any]) -> None:
    """``replay --compare``: one row per policy."""
    columns = [Column("policy", "whole"), *(Column(name, "number") for name in
               ("cost (USD)", "cache reads", "peak context", "compactions", "stalls"))]
    rows = [[row["policy"], f"{row['cost_usd']:.4f}", f"{row['cache_read_share']:.1%}", f"{row['peak_tokens']:,}",
             f"{row['compactions']:,}", f"{row['stalls']:,}"] for row in comparison["policies"]]
    title = f"Policies under a {comparison['limit']:,}-token context (default: {comparison['default']})"
    print_table(console(), columns, rows, title=title)
    if "what_ifs" not in comparison:
        return
    recorded = comparison["as_recorded"]
    billed = f"; billed ${recorded['billed_usd']:.4f}" if recorded.get("billed_usd") is not None else ""
    columns[0] = Column("setting", "whole")
    rows = [[row["setting"], f"{row['cost_usd']:.4f}", f"{row['cache_read_share']:.1%}", f"{row['peak_tokens']:,}",
             f"{row['compactions']:,}", f"{row['stalls']:,}"] for row in comparison["what_ifs"]]
    rows.append(["as recorded", f"{recorded['cost_usd']:.4f}", f"{recorded['cache_read_share']:.1%}",
                 f"{recorded['peak_tokens']:,}", f"{recorded['compactions']:,}", f"{recorded['stalls']:,}"])
    print_table(console(), columns, rows,
                title=f"What-ifs with the default policy; as recorded: its own compactions, no limit{billed}")


KIND_NAMES = {"input": "input", "cache_read": "cache reads", "cache_write": "cache writes", "output": "output"}


def print_as_recorded(report: AsRecordedReport, *, temporary: bool) -> None:
    """``replay --as-recorded``: the replayed bill by kind of token beside the recorded one, then each session."""
    from rich.markup import escape

    out = console()
    bill = report.billed
    beside = f"; billed ${bill.cost_usd:,.4f} by its recorded usage: {report.ratio:.2f}×" if bill and report.ratio else ""
    out.print(
        f"[bold]replayed {escape(report.source or 'a recording')} as recorded[/bold]: "
        f"{_count(report.sessions, 'session')}, {_count(report.requests, 'request')}, ${report.cost_usd:,.4f}{beside}"
    )
    columns = [Column("tokens", "whole"), *(Column(name, "number") for name in
               ("replayed", "replayed (USD)", "billed", "billed (USD)"))]
    rows = [[KIND_NAMES[kind], f"{report.tokens[kind]:,}", f"{report.cost_by_kind[kind]:.4f}",
             f"{bill.tokens[kind]:,}" if bill else "-", f"{bill.cost_by_kind[kind]:.4f}" if bill else "-"]
            for kind in KIND_NAMES]
    rows.append(["all", f"{report.requests:,} requests", f"{report.cost_usd:.4f}",
                 f"{bill.requests:,} requests" if bill else "-", f"{bill.cost_usd:.4f}" if bill else "-"])
    print_table(out, columns, rows, title=f"Cost with prompt caching, {report.cache_read_share:.1%} of the input read")
    note = "\n(a new temporary database; --db chooses one)" if temporary else ""
    out.print(f"\nsessions written to {escape(report.database or '?')}{note}:")
    for row in report.replays:
        billed = f", billed ${row.billed_usd:,.4f}" if row.billed_usd is not None else ""
        kind = "sub-agent" if row.sub_agent else "main"
        out.print(f"  {kind:<9}  {row.session_id}  {_count(row.requests, 'request')}")
        under = f"${row.cost_usd:,.4f}{billed}" + (f" · {' '.join(row.title.split())}" if row.title else "")
        room = max(20, (out.width or 80) - 13)  # a line of its own under the id, the title cut to the width
        out.print(f"{'':13}{escape(under if len(under) <= room else under[: room - 1] + '…')}", soft_wrap=True)


def pruned_line(report: ReplayReport) -> str:
    """What was pruned in all (``report.pruned_tokens``), and where: by prunes of their own (the policy's, the
    "Prunes" table) and inside compactions (the "pruned" column of the compactions)."""
    inside = sum(c.pruned_tokens for c in report.compactions)
    alone = report.pruned_tokens - inside
    if not report.pruned_tokens:
        return "no tool output pruned"
    by_prunes = f"by {_count(len(report.prunes), 'prune')} outside compactions"
    if not inside:
        where = by_prunes
    elif not alone:
        where = "inside compactions"
    else:
        where = f"{alone:,} {by_prunes}, {inside:,} inside compactions"
    return f"{report.pruned_tokens:,} tokens of tool output pruned ({where})"


def print_written(where: str, sessions: list[tuple[str, str]], *, temporary: bool) -> None:
    """Where the replay wrote, and each session it wrote: (what it replayed, its id)."""
    from rich.markup import escape

    out = console()
    note = "\n(a new temporary database; --db chooses one)" if temporary else ""
    out.print(f"\nsessions written to {escape(where)}{note}:")
    for label, session_id in sessions:
        out.print(f"  {escape(label):<17}  {session_id}")


def usable_line(report: ReplayReport) -> str:
    """The limit, what of it the prompt may use, and why: the output reserve ``is_overflow`` keeps (seed 004)."""
    from ..limits import DEFAULT_MODEL_LIMITS, OUTPUT_TOKEN_MAX, model_limits

    limits = report.limits
    head = f"limit {limits.context:,} tokens, usable {report.usable_tokens:,}"
    if limits.input:
        return f"{head}: the model's input limit (its {limits.output:,} output tokens come on top)"
    reserve = limits.context - report.usable_tokens
    own = (model_limits(report.model) if report.model else DEFAULT_MODEL_LIMITS).output or OUTPUT_TOKEN_MAX
    if limits.output and limits.output > OUTPUT_TOKEN_MAX:
        why = f"the model's {limits.output:,} output tokens, capped at {OUTPUT_TOKEN_MAX:,} as is_overflow does (seed 004)"
    elif reserve < min(own, OUTPUT_TOKEN_MAX):
        why = "a quarter of the limit, as --context-limit sets it"
    elif not limits.output:
        why = f"is_overflow's {OUTPUT_TOKEN_MAX:,} when the model names no output limit (seed 004)"
    else:
        why = "the model's output limit"
    return f"{head}: {limits.context:,} less an output reserve of {reserve:,}, {why}"


def print_report(report: ReplayReport) -> None:
    from rich.markup import escape

    out = console()
    limits = report.limits
    source = escape(report.source or report.title or "a recording")
    out.print(f"[bold]replayed {source}[/bold] → session {report.session_id}")
    if limits.context:
        out.print(f"model {escape(report.model or 'unknown')}; {escape(usable_line(report))}")
        share = report.compact_at / report.usable_tokens if report.usable_tokens else 0
        out.print(
            f"policy {report.policy}, relieved above {report.compact_at:,} ({share:.0%} of usable); "
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
        f"{report.steps:,} steps, {report.tool_calls:,} tool calls: {_count(len(report.compactions), 'compaction')}, "
        f"{_count(len(report.stalls), 'stall')}; {pruned_line(report)}"
    )
    out.print(
        f"cost with prompt caching ${report.cost_usd:,.4f} at {escape(report.priced_as or '?')}'s prices, "
        f"{report.cache_read_share:.1%} of the input read from the cache"
    )
    if report.prunes:
        columns = [Column(name, "number") for name in ("step", "pruned tokens", "outputs", "view")]
        rows = [[f"{p.step:,}", f"{p.pruned_tokens:,}", f"{p.parts:,}", f"{p.view_before:,} → {p.view_after:,}"]
                for p in report.prunes]
        print_table(out, columns, rows, title="Prunes outside compactions")
    if report.compactions:
        columns = [*(Column(name, "number") for name in ("step", "view", "store pre → post", "pruned")),
                   Column("summary by")]
        rows = [[f"{c.step:,}", f"{c.view_before:,} → {c.view_after:,}", f"{c.pre_tokens:,} → {c.post_tokens:,}",
                 f"{c.pruned_tokens:,}", (c.summary_model or "-") + (f" ({c.fallback_used} fallback)" if c.fallback_used else "")]
                for c in report.compactions]
        print_table(out, columns, rows,
                    title="Compactions (store pre → post: from the recorded usage the stored messages carry)")
    for stall in report.stalls:
        out.print(f"[yellow]stalled at step {stall.step}[/yellow]: {escape(stall.reason)}")
    width = CHART_WIDTH if is_plain(out) else max(20, min(CHART_WIDTH, out.width - 12))
    chart = ascii_chart(report, width=width)
    if chart:
        out.print(escape(legend(report, chart)))
        for line in chart:
            out.print(escape(line), soft_wrap=True)
    limit = f" vs limit {limits.context:,}" if limits.context else ""
    out.print(
        f"peak view {report.max_view_tokens:,} tokens{limit} (the recording peaked at {report.max_original_tokens:,}); "
        f"final view {report.final_view_tokens:,} tokens in {report.final_view_messages:,} messages"
    )
