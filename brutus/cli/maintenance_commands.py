"""``brutus stats``, ``check``, ``prune``, ``compact`` and ``gc``: look after what the store holds."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Any

import click

from .options import db_option, json_option, open_store, print_json, read_url_option

__all__ = ["ProblemsFound", "Refused", "parse_before", "register"]


def register(cli: click.Group) -> None:
    for command in (stats, check, prune, compact, gc):
        cli.add_command(command)


class ProblemsFound(click.ClickException):
    """Exit 1 after the report was printed, with one line on stderr."""

    exit_code = 1

    def show(self, file: Any = None) -> None:
        click.echo(f"brutus: {self.message}", err=True)


class Refused(ProblemsFound):
    """A command that had nothing to do and did nothing: one line on stderr, exit 1."""


@click.command()
@click.argument("session_id", metavar="SESSION")
@db_option
@read_url_option
@json_option
def stats(session_id: str, db: str | None, read_url: str | None, as_json: bool) -> None:
    """Token accounting of a session: estimates by part type and by tool, pruned parts and tokens,
    compactions (pre/post tokens, fallback, status), provider-reported usage and cost."""
    from .maintenance_output import print_stats

    store = open_store(db, read_only=True, read_url=read_url)
    try:
        found = store.stats(store.resolve_session(session_id))
    finally:
        store.close()
    if as_json:
        print_json(found.model_dump(mode="json"))
    else:
        print_stats(found)


@click.command()
@click.option("--repair", is_flag=True,
              help="Mark abandoned compactions failed; rebuild message counters, last_seq and boundary pointers.")
@db_option
@json_option
def check(repair: bool, db: str | None, as_json: bool) -> None:
    """Check the integrity of the whole database: orphan rows, tool states without a tool part, boundary
    pointers that disagree with the messages, seq gaps, stale counters. Exit 1 when it finds a problem.
    A compaction left pending by a process that stopped (or running now) is a notice, not a problem;
    --repair marks the abandoned ones failed and rebuilds what brutus derives from the rows, and says what it
    changed. Corruption it cannot fix still exits 1."""
    from .maintenance_output import print_check

    store = open_store(db, read_only=not repair, create=False)
    try:
        report = store.check(repair=repair)
    finally:
        store.close()
    if as_json:
        print_json(report.model_dump(mode="json"))
    else:
        print_check(report)
    if not report.ok:
        count = len(report.problems)
        left = " that --repair cannot fix" if repair else ""
        raise ProblemsFound(f"check found {count} problem{'s' if count != 1 else ''}{left}")


_DEFAULTS = (40_000, 20_000)  # seed 004: CompactionConfig's prune_protect / prune_minimum


@click.command()
@click.argument("session_id", metavar="SESSION")
@click.option("--protect", type=click.IntRange(min=0), default=_DEFAULTS[0], show_default=True, metavar="N",
              help="Tokens of the newest tool output never pruned.")
@click.option("--minimum", type=click.IntRange(min=0), default=_DEFAULTS[1], show_default=True, metavar="N",
              help="Prune only when more than N tokens lie beyond the protect window.")
@click.option("--dry-run", is_flag=True, help="Say what would be pruned, write nothing.")
@db_option
@json_option
def prune(session_id: str, protect: int, minimum: int, dry_run: bool, db: str | None, as_json: bool) -> None:
    """Prune a session's old tool outputs (seed 004: protect the newest 40K tokens, prune only above 20K;
    --protect and --minimum change them): they are marked, kept in the database, and render as a
    placeholder. When nothing is pruned it says why, with the numbers."""
    from ..models import CompactionConfig
    from .maintenance_output import print_prune, prune_reason

    config = CompactionConfig(prune_protect=protect, prune_minimum=minimum)
    store = open_store(db, create=False, read_only=dry_run)
    try:
        result = store.prune(session_id := store.resolve_session(session_id), config, dry_run=dry_run)
    finally:
        store.close()
    if as_json:
        parts = [{"id": p.id, "tool": p.tool, "call_id": p.call_id, "title": p.state.title} for p in result.parts]
        summary = {"session_id": session_id, "dry_run": dry_run, "pruned": result.pruned, "total": result.total,
                   "prunable": result.prunable, "protect": protect, "minimum": minimum,
                   "reason": None if result.parts else prune_reason(result)}
        print_json({**summary, "parts": parts})
    else:
        print_prune(session_id, result, dry_run=dry_run)


@click.command()
@click.argument("session_id", metavar="SESSION")
@click.option("--instructions", metavar="TEXT", default=None, help="What the summary should keep or focus on.")
@db_option
@json_option
def compact(session_id: str, instructions: str | None, db: str | None, as_json: bool) -> None:
    """Compact a session now: prune, summarize the view (Claude when ANTHROPIC_API_KEY is set, else the
    offline extractive summary), store the summary and move the boundary. A session with nothing to compact
    (no messages, or nothing new since its last compaction) is refused with exit 1, and nothing is written."""
    from ..errors import NothingToCompact
    from ..summarizers import default_summarizer
    from .maintenance_output import print_compaction, working

    store = open_store(db, create=False)
    try:
        session_id = store.resolve_session(session_id)
        summarizer = default_summarizer()
        with working(f"compacting {session_id} with {getattr(summarizer, 'model', 'the summarizer')}"):
            result = store.compact(session_id, summarizer, trigger="manual", instructions=instructions)
    except NothingToCompact as exc:
        raise Refused(f"refused, nothing written: {exc}") from None
    finally:
        store.close()
    if as_json:
        print_json(result.model_dump(mode="json"))
    else:
        print_compaction(result)


_DURATION = re.compile(r"^(\d+)\s*([mhdw])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_before(value: str, *, now: datetime | None = None) -> int:
    """``--before``: an ISO date or date-time (UTC when it names no zone), ``now``, or an age such as ``30d``,
    ``12h``, ``90m``, ``2w``; epoch milliseconds."""
    now = now or datetime.now(timezone.utc)
    text = value.strip()
    match = _DURATION.match(text.lower())
    if match:
        moment = now - timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
    elif text.lower() == "now":
        moment = now
    else:
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise click.BadParameter(
                f"{value!r} is not a date: use 2025-01-31, 2025-01-31T12:00:00, now, or an age such as 30d or 12h",
                param_hint="--before",
            ) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1000)


@click.command()
@click.option("--before", "before", required=True, metavar="DATE",
              help="Parts pruned before this: 2025-01-31, 2025-01-31T12:00:00Z, now, or an age such as 30d.")
@click.option("--dry-run", is_flag=True, help="Count what would be dropped, delete nothing, no VACUUM.")
@click.option("--vacuum", is_flag=True,
              help="Then rewrite the database to shrink its file (SQLite VACUUM: needs free disk the size of the "
                   "database, and time to copy all of it; PostgreSQL: VACUUM FULL of the outputs).")
@db_option
@json_option
def gc(before: str, dry_run: bool, vacuum: bool, db: str | None, as_json: bool) -> None:
    """Drop the output text of parts pruned before DATE (their tool state, metadata and token counts stay), in
    chunks: time and extra disk follow what is dropped. The space is reused by later writes (SQLite: the file's
    free pages, given back to the system on a file with auto_vacuum=INCREMENTAL; PostgreSQL: VACUUM ANALYZE);
    --vacuum rewrites the database to shrink it."""
    from .maintenance_output import print_gc, working

    moment = parse_before(before)
    store = open_store(db, create=False)
    doing = "dropping pruned outputs" + (", then VACUUM (needs free disk the size of the database)" if vacuum else "")
    try:
        with working(doing if not dry_run else "counting pruned outputs"):
            result = store.gc(moment, dry_run=dry_run, vacuum=vacuum)
    finally:
        store.close()
    if as_json:
        print_json(result.model_dump(mode="json"))
    else:
        print_gc(result)
