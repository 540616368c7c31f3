"""What an import format is to brutus (an ``Importer``: detect, read, plan) and the registry of those it knows.

Rules:

- An importer is given a file's content as it ``reads`` it: ``"json"`` (the whole text as one JSON value),
  ``"json-lines"`` (the numbered objects of a JSON Lines file; a file that is one JSON object is one line) or
  ``"text"``. Reading the bytes (gzip, UTF-8, the JSON) is ``brutus.importers.source``'s.
- ``detect`` tells from that content, never from the file name, whether the file is of the format; it does
  not raise. ``read`` checks what ``detect`` took and returns what ``plan`` gets (``ImportFormatError`` naming
  the file when it is malformed). ``plan`` turns a ``Document`` into ``ImportedSession``s, the main session
  first, without writing (``exists`` asks the store whether a session is there).
- ``update(store, planned, *, name)`` is for a format whose files grow after an import (a transcript still
  being written): it brings a session imported before up to the file's plan and returns the number of
  messages written; importing such a file again updates its sessions and creates its new ones. Without it
  (``None``), a file imported before is skipped.
- The registry holds the importers in the order they are asked: the built-in ones (OpenCode, Claude Code),
  then the user's (``register_importer``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol

from ..errors import ImportFormatError
from .plan import ImportedSession, SessionExists

__all__ = ["Document", "Format", "Importer", "Reads", "importer_for", "importers", "register_importer", "unregister_importer"]

Format = str  # an importer's name: "opencode", "claude-code", or a registered one
Reads = Literal["json", "json-lines", "text"]


@dataclass(frozen=True)
class Document:
    """A read file: its name (for messages), its format, what its importer read, and what was wrong with it
    but did not stop the import (a last line cut short)."""

    name: str
    format: Format
    data: Any
    warnings: tuple[str, ...] = ()


class Importer(Protocol):
    """One import format. Subclass it for the defaults (``read``: the content as it is; no ``update``)."""

    name: ClassVar[Format]
    reads: ClassVar[Reads]
    describes: ClassVar[str]  # what its files hold, for the error when no importer takes a file
    update: ClassVar[Callable[..., int] | None] = None

    def detect(self, data: Any) -> bool: ...

    def read(self, data: Any, *, name: str) -> Any:
        return data

    def plan(self, document: Document, *, exists: SessionExists) -> list[ImportedSession]: ...


_REGISTRY: dict[Format, Importer] = {}


def register_importer(importer: Importer) -> None:
    """Add an import format, asked after those registered before it (one of the same name is replaced where
    it stands)."""
    _REGISTRY[importer.name] = importer


def unregister_importer(name: Format) -> None:
    """Forget the import format ``name`` (``KeyError`` when there is none)."""
    del _REGISTRY[name]


def importers() -> list[Importer]:
    return list(_REGISTRY.values())


def importer_for(document: Document) -> Importer:
    """The importer of ``document``'s format."""
    try:
        return _REGISTRY[document.format]
    except KeyError:
        raise ImportFormatError(f"{document.name}: no importer for the format {document.format!r}") from None
