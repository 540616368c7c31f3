"""``brutus import FILE...`` and ``brutus export SESSION``: sessions in from recorded files, out as OpenCode JSON."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from .options import db_option, json_option, open_output, open_store, print_json, read_url_option


def register(cli: click.Group) -> None:
    cli.add_command(import_)
    cli.add_command(export)


@click.command("import")
@click.argument("files", nargs=-1, required=True, metavar="FILE...", type=click.Path(dir_okay=False, path_type=Path))
@db_option
@json_option
def import_(files: tuple[Path, ...], db: str | None, as_json: bool) -> None:
    """Import sessions from OpenCode export JSON or Claude Code JSONL files (the format is told from the
    content) and print the new session ids.

    All files go in one transaction: if one is malformed, nothing is imported. A session already in the
    store is skipped, so importing a file twice does not duplicate it; a Claude Code transcript that grew
    since is brought up to date (its new entries appended). A last line cut short by a crash is left out,
    with a warning on stderr."""
    from ..importers import import_documents, read_document

    documents = [read_document(path) for path in files]  # every file checked before the database is opened
    store = open_store(db)
    try:
        reports = _with_progress(store, documents, import_documents)
    finally:
        store.close()
    warnings = [w for r in reports for w in r.warnings]
    if warnings:  # on a terminal wrapped at spaces, like the report
        from .tables import console

        err = console(stderr=True)
        for warning in warnings:
            err.print(f"brutus: warning: {warning}", markup=False)
    if as_json:
        print_json(
            {
                "created": [i for r in reports for i in r.created],
                "updated": [i for r in reports for i in r.updated],
                "skipped": [i for r in reports for i in r.skipped],
                "warnings": [w for r in reports for w in r.warnings],
                "files": [
                    {
                        "path": r.path,
                        "format": r.format,
                        "created": r.created,
                        "updated": r.updated,
                        "skipped": r.skipped,
                        "messages": r.messages,
                        "warnings": r.warnings,
                    }
                    for r in reports
                ],
            }
        )
    else:
        _print_reports(reports)


def _with_progress(store: Any, documents: list[Any], import_documents: Any) -> list[Any]:
    """Import with a progress bar on stderr when there are several files and stderr is a terminal."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
    from rich.table import Column as Cell

    console = Console(stderr=True)
    if len(documents) < 2 or not console.is_terminal:
        return import_documents(store, documents)
    # the word, the bar and the count keep their widths; the file name takes the rest, cut with an ellipsis
    columns = (
        TextColumn("importing", table_column=Cell(no_wrap=True)),
        BarColumn(bar_width=20, table_column=Cell(no_wrap=True)),
        MofNCompleteColumn(table_column=Cell(no_wrap=True)),
        TextColumn("{task.description}", markup=False, table_column=Cell(ratio=1, no_wrap=True, overflow="ellipsis")),
    )
    with Progress(*columns, console=console, transient=True, expand=True) as progress:
        task = progress.add_task("", total=len(documents))
        advance = lambda report: progress.update(task, advance=1, description=Path(report.path).name)  # noqa: E731
        return import_documents(store, documents, progress=advance)


def _print_reports(reports: list[Any]) -> None:
    """One line per session, its id first (a table would not fit the long ids and file names); on a terminal
    a line wraps at its spaces, never inside an id or a file name."""
    from .tables import console

    out = console()

    def echo(line: str) -> None:
        out.print(line, markup=False)

    for report in reports:
        source = f"{Path(report.path).name}, {report.format}"
        if report.updated:  # a grown transcript: what changed, its main session first when it did
            echo(f"{report.updated[0]}  updated ({report.messages:,} messages written from {source}, which grew since)")
            for other in report.updated[1:]:
                echo(f"{other}  updated (a sub-agent session, from {source})")
            for child in report.created:
                echo(f"{child}  imported (a new sub-agent session, from {source})")
        elif report.created:
            sessions = f" in {len(report.created)} sessions" if len(report.created) > 1 else ""
            echo(f"{report.created[0]}  imported ({report.messages:,} messages{sessions} from {source})")
            for child in report.created[1:]:
                echo(f"{child}  imported (sub-agent session of {report.created[0]})")
        for skipped in report.skipped:
            echo(f"{skipped}  already imported, skipped ({source})")
        if not report.created and not report.skipped and not report.updated:
            echo(f"-  nothing to import: no conversation in {source}")


@click.command()
@click.argument("session_id", metavar="SESSION")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write to FILE instead of standard output.")
@db_option
@read_url_option
def export(session_id: str, output: Path | None, db: str | None, read_url: str | None) -> None:
    """Export a session's whole history as OpenCode export JSON (`brutus import` reads it back), with its
    times and its sub-agent sessions (under "children", which OpenCode ignores)."""
    from ..importers.export import write_export

    store = open_store(db, read_only=True, read_url=read_url)
    try:
        session_id = store.resolve_session(session_id)
        if output is None:
            sys.stdout.flush()
            write_export(store, session_id, sys.stdout.buffer)
            sys.stdout.buffer.flush()
            return
        with open_output(output) as file:
            exported = write_export(store, session_id, file)
    finally:
        store.close()
    children = exported.children
    also = f", {children} child session{'' if children == 1 else 's'}" if children else ""
    click.echo(f"exported {session_id} ({exported.messages} messages{also}) to {output}")
