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
    """The rich console every command prints through. A reader that closed the pipe (``brutus show | head``)
    ends the command quietly with exit 0 (``main`` handles the ``BrokenPipeError``), where rich's own default
    exits 1."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:  # rich's documented hook
            raise BrokenPipeError

    return _Console(highlight=False, soft_wrap=True, stderr=stderr)


def _console() -> Any:
    return console()


def sessions_json(sessions: list[Session]) -> list[dict[str, Any]]:
    return [s.model_dump() for s in sessions]


def print_sessions(sessions: list[Session]) -> None:
    from rich.table import Table

    table = Table("title", "messages", "updated (UTC)", "parent")
    table.add_column("id", no_wrap=True)
    for s in sessions:
        table.add_row(s.title or "", str(s.message_count), _when(s.updated_at), s.parent_id or "", s.id)
    _console().print(table)


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


def print_history(history: list[MessageWithParts]) -> None:
    from rich.markup import escape

    console = _console()
    for entry in history:
        info = entry.info
        tag = "summary " if info.summary else ""
        tokens = info.tokens
        usage = f" in={tokens.input} out={tokens.output} cache={tokens.cache.read}/{tokens.cache.write}" if info.role == "assistant" else ""
        console.print(f"[bold]#{info.seq} {tag}{info.role}[/bold] {escape(info.id)} {_when(info.time.created)}{usage}")
        for part in entry.parts:
            console.print("   " + _part_line(part))
