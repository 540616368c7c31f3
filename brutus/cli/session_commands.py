"""``brutus sessions list|fork|delete`` and ``brutus show``: look at what the store holds, branch a session,
and remove one."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from .options import db_option, json_option, open_output, open_store, print_json, read_url_option, write_output


def register(cli: click.Group) -> None:
    cli.add_command(sessions)
    cli.add_command(show)


@click.group()
def sessions() -> None:
    """List, fork or delete sessions."""


@sessions.command("fork")
@click.argument("session_id", metavar="SESSION")
@click.option("--at", "message_id", metavar="MESSAGE", default=None, help="Copy up to this message, included (default: all).")
@click.option("--title", default=None, help="The new session's title (default: the original's).")
@db_option
@json_option
def fork(session_id: str, message_id: str | None, title: str | None, db: str | None, as_json: bool) -> None:
    """Copy SESSION up to a message into a new session, to try another path from there: its messages, tool
    outputs, prune marks and compactions, under new ids; the original stays as it is. Prints the new session
    (--json: its fields)."""
    from .output import sessions_json

    store = open_store(db, create=False)
    try:
        forked = store.fork(store.resolve_session(session_id), message_id, title=title)
    finally:
        store.close()
    if as_json:
        print_json(sessions_json([forked])[0])
    else:
        at = f" at {forked.forked_at}" if forked.forked_at else ""
        click.echo(f"forked {forked.forked_from}{at} into {forked.id} ({_count(forked.message_count, 'message')})")


@sessions.command("delete")
@click.argument("session_id", metavar="SESSION")
@click.option("--yes", is_flag=True, help="Delete without asking (needed when there is no terminal to ask on).")
@db_option
def delete(session_id: str, yes: bool, db: str | None) -> None:
    """Delete a session and everything in it: messages, parts, tool states, compactions, child sessions."""
    import sys

    from ..errors import InvalidInput

    store = open_store(db, create=False)
    try:
        session = store.get_session(session_id := store.resolve_session(session_id))  # NotFound before any question
        children = store.list_sessions(parent_id=session_id)
        if not yes:
            if not sys.stdin.isatty():
                raise InvalidInput(f"deleting {session_id} needs --yes when there is no terminal to ask on")
            click.echo(f"{session_id}: {_count(session.message_count, 'message')}{_children(children)}")
            click.confirm("delete it?", abort=True)
        store.delete_session(session_id)
    finally:
        store.close()
    click.echo(f"deleted {session_id}{_children(children)}")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _children(children: list) -> str:
    return f" and {_count(len(children), 'child session')}" if children else ""


@sessions.command("list")
@db_option
@json_option
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Show at most this many sessions (a page).")
@click.option("--after", metavar="ID", default=None, help="Start after this session (the previous page's last).")
@read_url_option
def list_(db: str | None, as_json: bool, limit: int | None, after: str | None, read_url: str | None) -> None:
    """List sessions, most recently updated first (ties by id). --limit N --after ID pages through them:
    --json then prints {"sessions": [...], "next": ID or null}, ID the cursor for the next page."""
    from .output import print_sessions, sessions_json

    store = open_store(db, read_only=True, read_url=read_url)
    try:
        found = store.list_sessions(limit=None if limit is None else limit + 1, after=after)
    finally:
        store.close()
    more = limit is not None and len(found) > limit
    found = found[:limit]
    if not as_json:
        print_sessions(found)
        if more:
            click.echo(f"more: --after {found[-1].id}", err=True)
    elif limit is None and after is None:
        print_json(sessions_json(found))  # the whole list: a list, as always
    else:
        print_json({"sessions": sessions_json(found), "next": found[-1].id if more else None})


@click.command()
@click.argument("session_id", metavar="SESSION")
@click.option("--full", is_flag=True, help="The whole history, not only the view the model sees.")
@click.option("--full-text", is_flag=True, help="Texts, tool inputs and outputs whole, not cut to 200 characters.")
@click.option("--markdown", is_flag=True, help="A Markdown transcript (with --full: pruned outputs' text too).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="With --markdown: write to FILE.")
@db_option
@json_option
def show(
    session_id: str, full: bool, full_text: bool, markdown: bool, output: Path | None, db: str | None, as_json: bool
) -> None:
    """Show a session: the view the model sees (back to the last compaction), or --full history.

    --markdown writes a readable transcript: a heading per message, tool calls with their input and output
    in fenced blocks, compaction boundaries and summaries marked, pruned outputs noted (their text only with
    --full)."""
    from ..errors import InvalidInput
    from .output import history_json, print_history

    if markdown and as_json:
        raise InvalidInput("--markdown and --json are two formats: choose one")
    if output is not None and not markdown:
        raise InvalidInput("-o/--output writes the Markdown transcript: use it with --markdown")
    store = open_store(db, read_only=True)
    try:
        session_id = store.resolve_session(session_id)
        if full:  # the whole history, chunk by chunk as it is read: memory holds one chunk
            _show_full(store, session_id, markdown=markdown, as_json=as_json, full_text=full_text, output=output)
            return
        history = store.filter_compacted(session_id)
        session = store.get_session(session_id) if markdown or not as_json else None
    finally:
        store.close()
    if markdown:
        from ..markdown import to_markdown

        _write_text(to_markdown(history, session=session), output)
        if output is not None:
            click.echo(f"wrote {session_id} ({len(history)} messages) to {output}")
    elif as_json:
        print_json(history_json(history))
    else:
        if session is not None and session.forked_from:
            click.echo(f"forked from {session.forked_from} at {session.forked_at}")
        print_history(history, full_text=full_text)


def _show_full(store: Any, session_id: str, *, markdown: bool, as_json: bool, full_text: bool, output: Path | None) -> None:
    """``show --full``: the history read in chunks in one read transaction (``history_ops.history_in_chunks``),
    each printed or written as it comes; the same output as the whole history printed at once."""
    from ..db.history_ops import consistent_reads, history_in_chunks
    from ..flows import Tx
    from .output import history_json, print_history

    def read(on_chunk: Any, on_session: Any = None) -> int:
        def op() -> Any:
            yield from consistent_reads(store.engine.dialect.name)
            return (yield from history_in_chunks(session_id, on_chunk, on_session=on_session))

        return store.run(Tx(op(), write=False))

    if not markdown and not as_json:
        read(lambda entries: print_history(entries, full_text=full_text))
        return
    if as_json:  # print_json's list, an entry at a time
        stream = _JsonList()
        read(lambda entries: stream.items(history_json(entries)))
        stream.close()
        return
    from ..markdown import MarkdownStream

    sys.stdout.flush()
    file = sys.stdout.buffer if output is None else open_output(output)
    try:
        writer = MarkdownStream(lambda text: file.write(text.encode("utf-8", "replace")), pruned_text=True)
        count = read(writer.messages, writer.header)
        writer.close()
    finally:
        file.flush()
        if output is not None:
            file.close()
    if output is not None:
        click.echo(f"wrote {session_id} ({count} messages) to {output}")


class _JsonList:
    """``print_json(list)`` echoed an item at a time: the text of ``json.dumps(items, indent=2,
    ensure_ascii=False)`` and a newline. An item holding text UTF-8 cannot carry (a lone surrogate, which
    made the whole print fail) is written with ``\\u`` escapes instead, which JSON readers read back the same."""

    def __init__(self) -> None:
        self.count = 0

    def items(self, values: list[Any]) -> None:
        for value in values:
            text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                text = json.dumps(value, indent=2, ensure_ascii=True, default=str)
            text = text.replace("\n", "\n  ")
            click.echo(f"{',' if self.count else '['}\n  {text}", nl=False)
            self.count += 1

    def close(self) -> None:
        click.echo("\n]" if self.count else "[]")


def _write_text(text: str, output: Path | None) -> None:
    """UTF-8 to FILE or standard output; text UTF-8 cannot carry (a lone surrogate) becomes "?"."""
    write_output(text.encode("utf-8", "replace"), output)
