"""``brutus sessions list`` and ``brutus show``: look at what the store holds."""

from __future__ import annotations

import click

from .app import db_option, json_option, open_store, print_json


def register(cli: click.Group) -> None:
    cli.add_command(sessions)
    cli.add_command(show)


@click.group()
def sessions() -> None:
    """List sessions."""


@sessions.command("list")
@db_option
@json_option
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Show at most this many sessions.")
def list_(db: str | None, as_json: bool, limit: int | None) -> None:
    """List sessions, most recently updated first."""
    from .output import print_sessions, sessions_json

    store = open_store(db, read_only=True)
    found = store.list_sessions(limit=limit)
    store.close()
    if as_json:
        print_json(sessions_json(found))
    else:
        print_sessions(found)


@click.command()
@click.argument("session_id", metavar="SESSION")
@click.option("--full", is_flag=True, help="The whole history, not only the view the model sees.")
@db_option
@json_option
def show(session_id: str, full: bool, db: str | None, as_json: bool) -> None:
    """Show a session: the view the model sees (back to the last compaction), or --full history."""
    from .output import history_json, print_history

    store = open_store(db, read_only=True)
    history = store.messages(session_id) if full else store.filter_compacted(session_id)
    store.close()
    if as_json:
        print_json(history_json(history))
    else:
        print_history(history)
