"""``brutus search QUERY``: full-text search over every session's whole history.

On a terminal each hit is two lines under its session's line (id, title): the message id, role, time and
whether the model still sees the text (under the id when a long imported id leaves no room), then where it matched and a snippet with the matched words
highlighted, cut with an ellipsis at the terminal's width (ids are never cut). Piped, the same lines whole,
the matched words between ``**``. ``--json`` prints every field of every hit.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click

from .options import db_option, json_option, open_store, print_json, read_url_option

__all__ = ["register", "search"]


def register(cli: click.Group) -> None:
    cli.add_command(search)


def _since(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    if value is None:
        return None
    from .maintenance_commands import parse_before

    try:
        return parse_before(value)
    except click.BadParameter as exc:
        exc.param_hint = "--since"
        raise


@click.command()
@click.argument("query")
@click.option("--session", "session_id", metavar="SESSION", default=None, help="Only this session.")
@click.option("--role", type=click.Choice(["user", "assistant"]), default=None, help="Only messages of this role.")
@click.option("--tool", metavar="NAME", default=None, help="Only this tool's calls and outputs.")
@click.option("--since", metavar="DATE", default=None, callback=_since,
              help="Messages from this time on: 2025-01-31, 2025-01-31T12:00:00Z, now, or an age such as 30d.")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True, help="At most this many hits.")
@json_option
@db_option
@read_url_option
def search(
    query: str, session_id: str | None, role: str | None, tool: str | None, since: int | None, limit: int,
    as_json: bool, db: str | None, read_url: str | None,
) -> None:
    """Find QUERY's words in every session: turns before a compaction, summaries and pruned outputs included.

    Every word must appear in the same text (a message's text, a tool call or a tool output); newest first."""
    with open_store(db, create=False, read_url=read_url) as store:  # writable: indexes what was written (no replica)
        session_id = store.resolve_session(session_id) if session_id is not None else None
        hits = store.search(query, session_id=session_id, role=role, tool=tool, since=since, limit=limit)
    if as_json:
        print_json([hit.model_dump(mode="json") for hit in hits])
        return
    _print_hits(hits)


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M")


def _status(hit: Any) -> str:
    if hit.in_view:
        return "in view"
    return "pruned" if hit.pruned else "compacted"


def _where(hit: Any) -> str:
    if hit.field == "text":
        return "summary" if hit.summary else hit.part_type
    return f"{hit.tool} {hit.field}"


def _print_hits(hits: list[Any]) -> None:
    from rich.text import Text

    from .output import console
    from .tables import flat, is_plain

    out = console()
    plain = is_plain(out)
    if not hits:
        out.print("no hits") if not plain else out.out("no hits", highlight=False)
        return
    session = None
    for hit in hits:
        lines: list[Text] = []
        if hit.session_id != session:
            session = hit.session_id
            lines.append(Text(hit.session_id, style="bold") + Text("  " + flat(hit.session_title or ""), style="bold"))
        meta = Text(f"{hit.role:<9}  {_when(hit.time)}  ") + Text(_status(hit), style="green" if hit.in_view else "yellow")
        if plain or len(hit.message_id) + len(meta.plain) + 4 <= out.width:
            lines.append(Text(f"  {hit.message_id}  ") + meta)
        else:  # a long (imported) id: its details go under it rather than be cut
            lines += [Text(f"  {hit.message_id}"), Text("    ") + meta]
        snippet = Text(f"    {_where(hit)}: ", style="dim")
        offset = len(snippet.plain)
        if plain:
            cursor, parts = 0, []
            for start, end in hit.marks:
                parts += [hit.snippet[cursor:start], "**", hit.snippet[start:end], "**"]
                cursor = end
            snippet.append("".join(parts) + hit.snippet[cursor:])
        else:
            snippet.append(hit.snippet)
            for start, end in hit.marks:
                snippet.stylize("bold reverse", offset + start, offset + end)
        lines.append(snippet)
        for line in lines:
            if plain:
                out.out(line.plain.rstrip(), highlight=False)
            else:
                out.print(line, no_wrap=True, overflow="ellipsis", crop=True)
