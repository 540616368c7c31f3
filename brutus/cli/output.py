"""How the CLI prints sessions and histories for people (rich) and for scripts (JSON)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from ..models import MessageWithParts, Session

__all__ = ["console", "history_json", "print_history", "print_sessions", "sessions_json"]

PREVIEW = 200


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def console(*, stderr: bool = False) -> Any:
    """The console every command prints through (``tables.console``: fitted to a terminal, plain when piped)."""
    from .tables import console as make

    return make(stderr=stderr)


def _console() -> Any:
    return console()


def _iso(ms: int | None) -> str | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="milliseconds")


def sessions_json(sessions: list[Session]) -> list[dict[str, Any]]:
    """Each session's fields (times in epoch milliseconds: ``created_at``, ``updated_at``) plus ``created`` and
    ``updated``, the same times in ISO 8601 UTC."""
    return [{**s.model_dump(), "created": _iso(s.created_at), "updated": _iso(s.updated_at)} for s in sessions]


def print_sessions(sessions: list[Session]) -> None:
    """Id, messages, updated (to the minute), parent, forked from and title; on a terminal, no parent column
    when no session has one; a "forked from" column only when a session is a fork; where the ids leave the
    title less than 20 columns, the parent, the fork's origin and the title go on a second line under the id."""
    from .tables import Column, is_plain, print_table

    out = _console()
    columns = [Column("id", "whole"), Column("messages", "number"), Column("updated (UTC)", "whole"),
               Column("parent", "whole"), Column("forked from", "whole"), Column("title", least=20)]
    rows = [[s.id, f"{s.message_count:,}", _when(s.updated_at)[:16], s.parent_id or "-", s.forked_from or "-", s.title or ""]
            for s in sessions]
    shown = [0, 1, 2]
    if is_plain(out) or any(s.parent_id for s in sessions):
        shown.append(3)
    if any(s.forked_from for s in sessions):
        shown.append(4)
    shown.append(5)
    print_table(out, [columns[i] for i in shown], [[row[i] for i in shown] for row in rows], fold=tuple(range(3, len(shown))))


def history_json(history: list[MessageWithParts]) -> list[dict[str, Any]]:
    return [m.model_dump(mode="json") for m in history]


def _preview(text: str | None) -> str:
    if not text:
        return ""
    flat = text.replace("\r", "").replace("\n", " ⏎ ")
    return flat if len(flat) <= PREVIEW else flat[:PREVIEW] + f"… ({len(text)} chars)"


def _part_line(part: Any) -> str:
    from rich.markup import escape

    if part.type in ("text", "reasoning"):
        return f"[dim]{part.type}[/dim] {escape(_preview(part.text))}"
    if part.type == "tool":
        state = part.state
        line = f"[cyan]tool[/cyan] {escape(part.tool)} " + escape(f"[{state.status}]")
        if state.time.compacted:
            line += " [yellow](pruned)[/yellow]"
        elif state.output is not None:
            line += " → " + escape(_preview(state.output))
        elif state.error:
            line += " ✗ " + escape(_preview(state.error))
        return line
    if part.type == "compaction":
        return f"[magenta]compaction[/magenta] auto={part.auto} overflow={part.overflow}"
    return f"[dim]{part.type}[/dim]"


def _part_full(part: Any) -> str:
    """A part with its texts, tool input and output whole (``show --full-text``), as rich markup."""
    import json

    from rich.markup import escape

    if part.type in ("text", "reasoning"):
        return f"[dim]{part.type}[/dim]\n{escape(part.text)}"
    if part.type != "tool":
        return _part_line(part)
    state = part.state
    title = f" {escape(state.title)}" if state.title else ""
    lines = [f"[cyan]tool[/cyan] {escape(part.tool)} " + escape(f"[{state.status}]") + title]
    lines.append("[dim]input[/dim] " + escape(json.dumps(state.input, ensure_ascii=False, indent=2)))
    if state.time.compacted:
        lines.append(f"[yellow](output pruned at {_when(state.time.compacted)})[/yellow]")
    if state.output is not None:
        lines.append("[dim]output[/dim]\n" + escape(state.output))
    if state.error:
        lines.append("[dim]error[/dim]\n" + escape(state.error))
    return "\n".join(lines)


def print_history(history: list[MessageWithParts], *, full_text: bool = False) -> None:
    """Each message's heading and its parts, indented: cut to a preview of 200 characters, or with
    ``full_text`` whole (tool inputs included)."""
    from rich.markup import escape
    from rich.padding import Padding

    console = _console()
    for entry in history:
        info = entry.info
        tag = "summary " if info.summary else ""
        tokens = info.tokens
        usage = f" in={tokens.input} out={tokens.output} cache={tokens.cache.read}/{tokens.cache.write}" if info.role == "assistant" else ""
        console.print(f"[bold]#{info.seq} {tag}{info.role}[/bold] {escape(info.id)} {_when(info.time.created)}{usage}")
        for part in entry.parts:  # indented, and on a terminal wrapped under that indent
            if full_text:  # whole lines, indented by hand: Padding would pad every line to the longest
                console.print("\n".join("   " + line for line in _part_full(part).split("\n")))
            else:
                console.print(Padding(_part_line(part), (0, 0, 0, 3), expand=False))
