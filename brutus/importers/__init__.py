"""Importing recorded agent sessions: OpenCode export JSON, Claude Code session JSONL, and any format
registered with ``register_importer``.

Rules:

- The format is told from the content, never from the file name (``detect_format``).
- All or nothing: every file is read and checked before anything is written, and the writes of one call run
  in one ``store.batch()``; a malformed file raises ``ImportFormatError`` and leaves the database unchanged.
- Importing the same file twice does not duplicate: a session whose id is already in the store (OpenCode
  ids are kept; a Claude Code session's id is derived from its ``sessionId``) is skipped and reported.
  A file of a format whose files grow (a Claude Code transcript) is brought up to date instead, by its
  importer's ``update`` (``grown``): its new entries are appended, and the report lists the session as
  ``updated``.
- A Claude Code file whose last line was cut short (the agent killed mid-write) is imported up to that line;
  the report carries the warning.
- An export's ``children`` (brutus's export of sub-agent sessions) are imported as child sessions.
- A file with no conversation in it (a Claude Code file holding only ``summary`` lines) imports nothing.

To add a format: write one module with an ``Importer`` (``brutus.importers.base``: its ``name``, what it
``reads``, ``detect`` from the content, ``read``, ``plan`` to ``ImportedSession``s, and ``update`` if its files
grow) and call ``register_importer(YourImporter())``; ``import_files``, ``brutus import``, ``brutus replay``
and the reports then take its files. ``opencode.py`` and ``claude_code.py`` are the two built in;
``tests/test_importer_registry.py`` registers a small one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

from ..errors import ImportFormatError, InvalidInput, NotFound
from ..store import SessionStore
from .base import Document, Format, Importer, importer_for, importers, register_importer, unregister_importer
from .claude_code import ClaudeCodeImporter
from .opencode import OpenCodeImporter
from .plan import ImportedSession, session_exists, write_session
from .source import detect_format, parse_document, read_document

__all__ = [
    "Document",
    "Format",
    "ImportReport",
    "ImportedSession",
    "Importer",
    "detect_format",
    "import_documents",
    "import_file",
    "import_files",
    "importers",
    "parse_document",
    "plan_document",
    "read_document",
    "register_importer",
    "unregister_importer",
]

Progress = Callable[["ImportReport"], None]

register_importer(OpenCodeImporter())
register_importer(ClaudeCodeImporter())


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
    return importer_for(document).plan(document, exists=exists)


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
    importer = importer_for(document)
    exists = partial(session_exists, store)
    sessions = importer.plan(document, exists=exists)
    report = ImportReport(path=document.name, format=document.format, warnings=list(document.warnings))
    again = bool(sessions) and exists(sessions[0].id)
    if again and importer.update is None:
        report.skipped.extend(session.id for session in sessions if exists(session.id))
        return report
    written = 0
    for session in sessions:
        if again and exists(session.id):  # a growing file imported before: brought up to date
            count = _write(document, session, "update", lambda: importer.update(store, session, name=document.name))
            (report.updated if count else report.skipped).append(session.id)
        else:
            count = _write(document, session, "import", lambda: write_session(store, session), tenant=store.tenant)
            report.created.append(session.id)
        written += count
    return replace(report, messages=written)


def _write(
    document: Document, session: ImportedSession, doing: str, write: Callable[[], int], *, tenant: str | None = None
) -> int:
    """``write()``, a refusal by the store named as the file's. In a tenant's store an id the tenant cannot see
    but the database holds is another tenant's: ids are global (``brutus.db.tenants``), so it says so."""
    try:
        return write()
    except ImportFormatError:
        raise
    except (InvalidInput, NotFound) as exc:
        if tenant is not None and _duplicate(exc):
            raise ImportFormatError(
                f"{document.name}: cannot {doing} session {session.id} into tenant {tenant!r}: another tenant of "
                "this database holds its ids (ids are global: a file is imported into one tenant only)"
            ) from exc
        raise ImportFormatError(f"{document.name}: cannot {doing} session {session.id}: {exc}") from exc


def _duplicate(error: BaseException) -> bool:
    """Whether the store refused ``error``'s write as a duplicate key (PostgreSQL's unique_violation)."""
    cause = getattr(error.__cause__, "orig", None)
    return getattr(cause, "sqlstate", None) == "23505"
