"""How ``stats``, ``check``, ``prune``, ``compact`` and ``gc`` print for people (rich tables)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any

from ..maintenance import CheckReport, GcResult, SessionStats
from ..models import CompactionResult, PruneResult

__all__ = ["console", "print_check", "print_compaction", "print_gc", "print_prune", "print_stats", "when", "working"]


def console(*, stderr: bool = False) -> Any:
    from .output import console as make

    return make(stderr=stderr)


def when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _n(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _bytes(value: int | None) -> str:
    if value is None:
        return "-"
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if abs(value) >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value} B"


@contextmanager
def working(what: str) -> Iterator[None]:
    """A spinner on stderr while long work runs (only on a terminal)."""
    err = console(stderr=True)
    if not err.is_terminal:
        yield
        return
    with err.status(what):
        yield


def _table(*columns: str, title: str | None = None, numeric: int = 0) -> Any:
    """A table whose last ``numeric`` columns are right-aligned numbers."""
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for index, name in enumerate(columns):
        if index >= len(columns) - numeric:
            table.add_column(name, justify="right")
        else:
            table.add_column(name, overflow="fold")  # names and ids in full, folded when narrow
    return table


def print_stats(stats: SessionStats) -> None:
    from rich.markup import escape

    out = console()
    out.print(f"[bold]{escape(stats.session_id)}[/bold] {escape(stats.title or '')}")
    out.print(
        f"{stats.messages:,} messages ({stats.user_messages:,} user, {stats.assistant_messages:,} assistant, "
        f"{stats.summary_messages:,} of them summaries); {stats.estimated_tokens:,} estimated tokens stored"
    )
    parts = _table("part type", "parts", "est. tokens", title="By part type", numeric=2)
    for p in stats.part_types:
        parts.add_row(p.type, _n(p.parts), _n(p.tokens))
    out.print(parts)
    if stats.tools:
        tools = _table("tool", "calls", "done", "errors", "est. tokens", "output tokens", "pruned", "pruned tokens",
                       title="By tool", numeric=7)
        for t in stats.tools:
            tools.add_row(escape(t.tool), _n(t.calls), _n(t.completed), _n(t.errors), _n(t.tokens), _n(t.output_tokens),
                          _n(t.pruned_calls), _n(t.pruned_tokens))
        out.print(tools)
    out.print(f"pruned: {stats.pruned_parts:,} parts, {stats.pruned_tokens:,} output tokens")
    if stats.compactions:
        table = _table("compaction", "created (UTC)", "trigger", "status", "pre tokens", "post tokens",
                       title="Compactions", numeric=2)
        for c in stats.compactions:
            status = c.status + (f" ({c.fallback_used} fallback)" if c.fallback_used else "")
            status += f": {c.error[:80]}" if c.error else ""
            table.add_row(c.id, when(c.created_at), c.trigger, escape(status), _n(c.pre_tokens), _n(c.post_tokens))
        out.print(table)
    else:
        out.print("compactions: none")
    t = stats.provider_tokens
    out.print(
        f"provider-reported usage: input {t.input:,}, output {t.output:,}, reasoning {t.reasoning:,}, "
        f"cache read {t.cache.read:,}, cache write {t.cache.write:,} (total {t.total:,})"
    )
    out.print(f"cost ${stats.cost:.4f}; {stats.cache_read_share:.1%} of the input read from the cache")


def print_check(report: CheckReport) -> None:
    from rich.markup import escape

    out = console()
    scope = f"{report.sessions:,} sessions, {report.messages:,} messages, {report.parts:,} parts"
    if report.ok:
        out.print(f"ok: {scope}, no problems")
        return
    table = _table("problem", "session", "row", "detail", title=f"{len(report.problems)} problems in {scope}")
    for p in report.problems:
        table.add_row(p.kind, p.session_id or "-", p.row_id or "-", escape(p.detail))
    out.print(table)


def print_prune(session_id: str, result: PruneResult, *, dry_run: bool) -> None:
    from rich.markup import escape

    out = console()
    verb = "would prune" if dry_run else "pruned"
    if not result.parts:
        out.print(f"{session_id}: nothing to prune ({result.total:,} tokens of tool output scanned)")
        return
    out.print(f"{session_id}: {verb} {result.pruned:,} tokens in {len(result.parts):,} tool outputs "
              f"({result.total:,} scanned){' — dry run, nothing written' if dry_run else ''}")
    table = _table("part", "tool", "title")
    for part in result.parts:
        table.add_row(part.id or "-", escape(part.tool), escape(part.state.title or ""))
    out.print(table)


def print_compaction(result: CompactionResult) -> None:
    out = console()
    info = result.summary_message.info
    fallback = f", written by the {result.fallback_used} fallback" if result.fallback_used else ""
    out.print(
        f"compacted {info.session_id}: {result.pre_tokens:,} → {result.post_tokens:,} tokens "
        f"(prune reclaimed {result.pruned:,}); summary {info.id} by {info.model_id}{fallback}; "
        f"compaction {result.compaction_id}"
    )


def print_gc(result: GcResult) -> None:
    out = console()
    moment = when(result.before)
    if result.dry_run:
        out.print(f"would drop the output text of {result.parts:,} parts pruned before {moment} UTC "
                  f"({result.tokens:,} tokens, {_bytes(result.output_bytes)} of text) — dry run, nothing written")
        return
    out.print(f"dropped the output text of {result.parts:,} parts pruned before {moment} UTC "
              f"({result.tokens:,} tokens, {_bytes(result.output_bytes)} of text); metadata and token counts kept")
    reclaimed = result.bytes_reclaimed
    out.print(f"vacuumed: {_bytes(result.bytes_before)} → {_bytes(result.bytes_after)} "
              f"({_bytes(reclaimed)} reclaimed)")
