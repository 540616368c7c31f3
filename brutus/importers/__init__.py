"""Importing recorded agent sessions: OpenCode export JSON and Claude Code session JSONL.

Rules:

- The format is told from the content, never from the file name (``detect_format``).
- All or nothing: every file is read and checked before anything is written, and the writes of one call run
  in one ``store.batch()``; a malformed file raises ``ImportFormatError`` and leaves the database unchanged.
- Importing the same file twice does not duplicate: a session whose id is already in the store (OpenCode
  ids are kept; a Claude Code session's id is derived from its ``sessionId``) is skipped and reported.
  A Claude Code transcript that grew since is brought up to date instead (``grown``): its new entries are
  appended, and the report lists the session as ``updated``.
- A Claude Code file whose last line was cut short (the agent killed mid-write) is imported up to that line;
  the report carries the warning.
- An export's ``children`` (brutus's export of sub-agent sessions) are imported as child sessions.
- A file with no conversation in it (a Claude Code file holding only ``summary`` lines) imports nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

from ..errors import ImportFormatError, InvalidInput, NotFound
from ..store import SessionStore
from .claude_code import plan_claude_code
from .grown import bring_up_to_date
from .opencode import plan_opencode
from .plan import ImportedSession, session_exists, write_session
from .source import Document, Format, detect_format, parse_document, read_document

__all__ = [
    "Document",
    "Format",
    "ImportReport",
    "ImportedSession",
    "detect_format",
    "import_documents",
    "import_file",
    "import_files",
    "parse_document",
    "plan_document",
    "read_document",
]

Progress = Callable[["ImportReport"], None]


@dataclass(frozen=True)
class ImportReport:
    """What importing one file did: the sessions it created (the main one first), those it brought up to date
    (a grown transcript) and those it skipped because they were already in the store as the file has them,
    with the number of messages written and what was wrong with the file but did not stop the import."""

    path: str
    format: Format
    created: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    messages: int = 0
    updated: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def plan_document(document: Document, *, exists: Callable[[str], bool] = lambda _id: False) -> list[ImportedSession]:
    """The sessions a parsed file describes (main session first, then its children), without writing."""
    if document.format == "opencode":
        assert document.export is not None
        return plan_opencode(document.export, name=document.name, session_exists=exists)
    return plan_claude_code(list(document.entries), name=document.name)


def import_file(store: SessionStore, path: str | Path) -> list[str]:
    """Import one file; the ids of the sessions it created (none when it was imported before)."""
    return import_files(store, [path])[0].created


def import_files(store: SessionStore, paths: Sequence[str | Path], *, progress: Progress | None = None) -> list[ImportReport]:
    """Import several files in one transaction: all of them, or (on any error) none."""
    return import_documents(store, [read_document(path) for path in paths], progress=progress)


def import_documents(store: SessionStore, documents: Sequence[Document], *, progress: Progress | None = None) -> list[ImportReport]:
    """Import parsed files in one transaction; ``progress`` is called after each one. Then the store settles
    (``SessionStore.settle``: the search index takes in what was imported, PostgreSQL's statistics are
    renewed when the import grew the tables by a tenth) (nothing inside the caller's own batch)."""
    reports = []
    with store.batch():
        for document in documents:
            report = _import(store, document)
            reports.append(report)
            if progress is not None:
                progress(report)
    store.settle(messages=sum(report.messages for report in reports))
    return reports


def _import(store: SessionStore, document: Document) -> ImportReport:
    exists = partial(session_exists, store)
    sessions = plan_document(document, exists=exists)
    report = ImportReport(path=document.name, format=document.format, warnings=list(document.warnings))
    if sessions and exists(sessions[0].id):
        if document.format != "claude-code":
            report.skipped.extend(session.id for session in sessions if exists(session.id))
            return report
        return _update(store, document, sessions, report)
    for session in sessions:
        _write(store, document, session)
    report.created.extend(session.id for session in sessions)
    return replace(report, messages=sum(len(session.history) for session in sessions))


def _update(store: SessionStore, document: Document, sessions: list[ImportedSession], report: ImportReport) -> ImportReport:
    """A Claude Code transcript imported before: each session brought up to date, new sidechains created."""
    written = 0
    for session in sessions:
        if not session_exists(store, session.id):
            _write(store, document, session)
            report.created.append(session.id)
            written += len(session.history)
            continue
        try:
            count = bring_up_to_date(store, session, name=document.name)
        except ImportFormatError:
            raise
        except (InvalidInput, NotFound) as exc:
            raise ImportFormatError(f"{document.name}: cannot update session {session.id}: {exc}") from exc
        (report.updated if count else report.skipped).append(session.id)
        written += count
    return replace(report, messages=written)


def _write(store: SessionStore, document: Document, session: ImportedSession) -> None:
    try:
        write_session(store, session)
    except (InvalidInput, NotFound) as exc:
        raise ImportFormatError(f"{document.name}: cannot import session {session.id}: {exc}") from exc
