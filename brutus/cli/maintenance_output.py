"""How ``stats``, ``check``, ``prune``, ``compact`` and ``gc`` print for people (rich tables)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any

from ..reports import CheckReport, GcResult, SessionStats
from ..models import CompactionResult, PruneResult
from .tables import Column, print_table

__all__ = [
    "console", "print_check", "print_compaction", "print_gc", "print_prune", "print_stats", "prune_reason", "when",
    "working",
]


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


def print_stats(stats: SessionStats) -> None:
    from rich.markup import escape

    out = console()
    out.print(f"[bold]{escape(stats.session_id)}[/bold] {escape(stats.title or '')}")
    out.print(
        f"{stats.messages:,} messages ({stats.user_messages:,} user, {stats.assistant_messages:,} assistant, "
        f"{stats.summary_messages:,} of them summaries); {stats.estimated_tokens:,} estimated tokens stored"
    )
    print_table(out, [Column("part type"), Column("parts", "number"), Column("est. tokens", "number")],
                [[p.type, _n(p.parts), _n(p.tokens)] for p in stats.part_types], title="By part type")
    if stats.tools:
        numbers = ("calls", "done", "errors", "est. tokens", "output tokens", "pruned", "pruned tokens")
        print_table(
            out,
            [Column("tool", least=16), *(Column(name, "number") for name in numbers)],
            [[t.tool, *map(_n, (t.calls, t.completed, t.errors, t.tokens, t.output_tokens, t.pruned_calls, t.pruned_tokens))]
             for t in stats.tools],
            title="By tool",
        )
    out.print(f"pruned: {stats.pruned_parts:,} parts, {stats.pruned_tokens:,} output tokens")
    if stats.compactions:
        columns = [Column("compaction", "whole"), Column("created (UTC)", "whole"), Column("pre tokens", "number"),
                   Column("post tokens", "number"), Column("trigger", "whole"), Column("status", least=20)]
        rows = []
        for c in stats.compactions:
            if c.refused:  # an older brutus recorded a refusal as failed
                rows.append([c.id, when(c.created_at), _n(c.pre_tokens), _n(c.post_tokens), c.trigger, "refused"])
                continue
            status = c.status + (f" ({c.fallback_used} fallback)" if c.fallback_used else "")
            status += f": {c.error}" if c.error else ""
            name = "(imported)" if c.imported else c.id  # its user message's id (in --json) is too long to show
            rows.append([name, when(c.created_at), _n(c.pre_tokens), _n(c.post_tokens), c.trigger, status])
        print_table(out, columns, rows, title="Compactions", fold=(4, 5))
        k = stats.compaction_counts
        pending = f", {k.pending:,} pending" if k.pending else ""
        imported = sum(c.imported for c in stats.compactions)
        imported_note = f" ({imported:,} imported)" if imported else ""
        out.print(f"compactions: {k.completed:,} completed{imported_note}, {k.failed:,} failed, {k.refused:,} refused "
                  f"(nothing to compact){pending}")
    else:
        out.print("compactions: none")
    t = stats.provider_tokens
    out.print(
        f"provider-reported usage: input {t.input:,}, output {t.output:,}, reasoning {t.reasoning:,}, "
        f"cache read {t.cache.read:,}, cache write {t.cache.write:,} (total {t.total:,})"
    )
    out.print(f"cost ${stats.cost:.4f}; {stats.cache_read_share:.1%} of the input read from the cache")
    u = stats.unpriced
    if u is not None:  # e.g. OpenCode on a subscription, or on a provider it does not price, records 0
        line = f"{_count(u.messages, 'response')} ({', '.join(u.models)}) recorded usage but no cost"
        if u.cost is not None:
            line += f": ${u.cost:.4f} at {' and '.join(u.priced_as)}'s list prices"
        if u.no_price:
            line += f"; brutus knows no price for {' or '.join(u.no_price)}"
        out.print(line)


def print_check(report: CheckReport) -> None:
    out = console()
    scope = f"{report.sessions:,} sessions, {report.messages:,} messages, {report.parts:,} parts"
    columns = [Column("problem", "whole"), Column("session", "whole"), Column("row", "whole"), Column("detail", least=30)]
    if report.repaired:
        if report.repairs:
            rows = [[r.kind, r.session_id or "-", r.row_id or "-", r.detail] for r in report.repairs]
            print_table(out, [Column("repaired", "whole"), *columns[1:]], rows,
                        title=f"{_count(len(report.repairs), 'repair')} made", fold=(1, 2, 3), wrap=True)
        else:
            out.print("repaired: nothing needed repair")
    if report.notices:
        rows = [[n.kind, n.session_id or "-", n.row_id or "-", n.detail] for n in report.notices]
        print_table(out, [Column("notice", "whole"), *columns[1:]], rows,
                    title=f"{_count(len(report.notices), 'notice')} (not problems)", fold=(1, 2, 3), wrap=True)
    if report.ok:
        notices = f", {_count(len(report.notices), 'notice')}" if report.notices else ""
        out.print(f"ok: {scope}, no problems{notices}")
        return
    rows = [[p.kind, p.session_id or "-", p.row_id or "-", p.detail] for p in report.problems]
    title = f"{_count(len(report.problems), 'problem')} in {scope}"
    print_table(out, columns, rows, title=title, fold=(1, 2, 3), wrap=True)


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def prune_reason(result: PruneResult) -> str:
    """Why a prune marked nothing, with its numbers (seed 004's rule: the newest ``protect`` tokens of tool
    output are kept, and prune commits only when more than ``minimum`` lie beyond them)."""
    if result.protect is None or result.minimum is None:
        return "nothing pruned: pruning is off"
    if result.total == 0:
        return ("nothing pruned: no tool output to prune (the two newest turns, outputs before the last "
                "compaction and those already pruned are never counted)")
    if result.total <= result.protect:
        return (f"nothing pruned: all {result.total:,} tokens of tool output are inside the "
                f"{result.protect:,}-token protect window")
    return (f"nothing pruned: {result.prunable:,} tokens of tool output beyond the {result.protect:,}-token "
            f"protect window, not over the {result.minimum:,}-token minimum")


def print_prune(session_id: str, result: PruneResult, *, dry_run: bool) -> None:
    out = console()
    verb = "would prune" if dry_run else "pruned"
    if not result.parts:
        out.print(f"{session_id}: {prune_reason(result)}")
        return
    out.print(f"{session_id}: {verb} {result.pruned:,} tokens in {len(result.parts):,} tool outputs "
              f"({result.total:,} scanned){' — dry run, nothing written' if dry_run else ''}")
    print_table(out, [Column("part", "whole"), Column("tool", least=16), Column("title")],
                [[part.id or "-", part.tool, part.state.title or ""] for part in result.parts])


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
    if result.bytes_free is None:  # PostgreSQL: VACUUM frees space for reuse, a plain one keeps the files' size
        out.print(f"vacuumed: the database {_bytes(result.bytes_before)} → {_bytes(result.bytes_after)} "
                  f"({_bytes(reclaimed)} returned to the system); {_bytes(result.bytes_reusable)} of dropped "
                  "output (as stored) freed for reuse")
        return
    done = "vacuumed" if result.vacuumed else "space"
    out.print(f"{done}: the database {_bytes(result.bytes_before)} → {_bytes(result.bytes_after)} "
              f"({_bytes(reclaimed)} returned to the system); {_bytes(result.bytes_reusable)} of pages freed "
              f"inside the file for later writes ({_bytes(result.bytes_free)} free in all)")
    if not result.vacuumed and result.bytes_free:
        out.print("`brutus gc --vacuum` shrinks the file: it rewrites the database, needing free disk its size")
