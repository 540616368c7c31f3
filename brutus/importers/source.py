"""Reading a file to import and telling its format from its content (never from its name).

Rules:

- A gzip-compressed file (its bytes start with the gzip magic ``1f 8b``) is decompressed first, whatever its
  name; a corrupt or truncated one is refused with ``ImportFormatError`` naming the file. The rules below
  apply to what it holds.
- The bytes must be UTF-8 text (a leading BOM is allowed) without NUL bytes; an empty or blank file, binary
  data, text that is not JSON, and JSON of another shape are refused with ``ImportFormatError`` naming the
  file, and the line or position at fault.
- The registered importers (``brutus.importers.base``) are asked in order, each given the content as it
  ``reads`` it (a content that is not JSON is not offered to a JSON importer); the first whose ``detect``
  says yes reads the file. A file none takes is refused with what it is and what each looks for.
- JSON Lines (one JSON object is a one-line file): every non-blank line must be a JSON object (the first broken
  line is named); a text of one line, or whose first line is not an object, is not JSON Lines but invalid
  JSON. A broken line is refused with the whole file, except the last line when it is cut short (the JSON ends
  before its value does, as when the agent was killed mid-write): the file is read up to that line and the
  ``Document`` says so in its ``warnings``. A last line with other damage is refused like any other.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from functools import cached_property
from pathlib import Path
from typing import Any

from ..errors import ImportFormatError
from .base import Document, Format, Reads, importers

__all__ = ["detect_format", "parse_document", "read_document"]

Entry = tuple[int, dict[str, Any]]  # (line number, the line's object)
Lines = tuple[tuple[Entry, ...], tuple[str, ...]]  # the entries, and the warnings

_GZIP_MAGIC = b"\x1f\x8b"
_CUT_TOKEN = re.compile(r"[-+.eE0-9]*|.*\\u[0-9a-fA-F]{0,3}")


def read_document(path: str | Path) -> Document:
    """Read and parse the file at ``path``, decompressing it first when it is gzip-compressed
    (``ImportFormatError`` when it cannot be imported). A file of a SQLite database open in this process is
    refused before it is opened (``InvalidInput``): reading it would drop that database's locks."""
    from ..db.files import refuse_database_file

    refuse_database_file(path, doing="read")
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ImportFormatError(f"{path}: cannot read the file: {exc.strerror or exc}") from None
    if data.startswith(_GZIP_MAGIC):
        data = _gunzip(data, str(path))
    return parse_document(data, name=str(path))


def _gunzip(data: bytes, name: str) -> bytes:
    try:
        return gzip.decompress(data)
    except EOFError:
        raise ImportFormatError(f"{name}: a corrupt gzip file, cannot decompress it: it ends early (truncated?)") from None
    except (OSError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
        raise ImportFormatError(f"{name}: a corrupt gzip file, cannot decompress it: {exc}") from None


def detect_format(data: bytes | str | Path) -> Format:
    """The format of a file's content (or of the file at a path): ``"opencode"``, ``"claude-code"`` or a
    registered one; ``ImportFormatError`` when no importer takes it."""
    if isinstance(data, Path):
        return read_document(data).format
    return parse_document(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data).format


def parse_document(data: bytes, *, name: str = "<input>") -> Document:
    """Parse a file's bytes into a ``Document`` whose format is told from the content."""
    content = _Content(name, _text(data, name))
    for importer in importers():
        found = content.read_as(importer.reads)
        if found is not None and importer.detect(found[0]):
            return Document(name, importer.name, importer.read(found[0], name=name), found[1])
    raise content.unknown()


def _text(data: bytes, name: str) -> str:
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if not data.strip():
        raise ImportFormatError(f"{name}: the file is empty")
    if b"\x00" in data:
        raise ImportFormatError(f"{name}: binary data (NUL bytes), not a JSON or JSON Lines session file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ImportFormatError(f"{name}: not UTF-8 text (invalid byte at offset {exc.start}): binary data?") from None


class _Content:
    """A file's text, parsed once each way an importer may read it."""

    def __init__(self, name: str, text: str) -> None:
        self.name, self.text = name, text

    def read_as(self, reads: Reads) -> tuple[Any, tuple[str, ...]] | None:
        """The content as an importer ``reads`` it and the warnings, or None when it is not that."""
        if reads == "text":
            return self.text, ()
        if reads == "json":
            return None if isinstance(self.value, json.JSONDecodeError) else (self.value, ())
        return self.lines if isinstance(self.lines, tuple) else None

    @cached_property
    def value(self) -> Any:
        """The whole text as one JSON value, else the error saying why it is not one."""
        try:
            return json.loads(self.text)
        except json.JSONDecodeError as exc:
            return exc

    @cached_property
    def lines(self) -> Lines | ImportFormatError | None:
        """The text as JSON Lines (one JSON object is one line), else the error; None for other JSON."""
        if isinstance(self.value, dict):
            return ((1, self.value),), ()
        try:
            return _json_lines(self.text, self.name, self.value) if isinstance(self.value, json.JSONDecodeError) else None
        except ImportFormatError as exc:
            return exc

    def unknown(self) -> ImportFormatError:
        """The error for a content no importer takes: what it is, and what the importers look for."""
        every = " nor ".join(importer.describes for importer in importers())
        if isinstance(self.value, dict):
            keys = ", ".join(sorted(map(str, self.value))[:8]) or "none"
            return ImportFormatError(f"{self.name}: a JSON object that is neither {every}; its keys: {keys}")
        if not isinstance(self.value, json.JSONDecodeError):
            return ImportFormatError(f"{self.name}: a JSON {type(self.value).__name__}, not {every}")
        if isinstance(self.lines, ImportFormatError):
            return self.lines
        lines = " nor ".join(importer.describes for importer in importers() if importer.reads == "json-lines")
        return ImportFormatError(f"{self.name}: JSON Lines, but no line is {lines}")


def _json_lines(text: str, name: str, whole: json.JSONDecodeError) -> Lines:
    lines = [(number, line) for number, line in enumerate(text.splitlines(), start=1) if line.strip()]
    first_parses = False
    if len(lines) > 1:
        try:
            first_parses = isinstance(json.loads(lines[0][1]), dict)
        except json.JSONDecodeError:
            first_parses = False
    if not first_parses:
        body = text.strip()
        cut = body[:1] in ("{", "[") and (body[-1:] not in ("}", "]") or whole.pos >= len(body))
        truncated = " (the file ends early: truncated?)" if cut else ""
        raise ImportFormatError(
            f"{name}: invalid JSON{truncated}: {whole.msg} (line {whole.lineno}, column {whole.colno})"
        )
    entries: list[Entry] = []
    warnings: list[str] = []
    for number, line in lines:
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            if number == lines[-1][0] and _ends_early(line, exc):
                warnings.append(
                    f"{name}: line {number} is cut short (the file ends inside it: the agent was stopped "
                    f"mid-write?); read up to line {lines[-2][0]}"
                )
                break
            raise ImportFormatError(f"{name}: line {number}: invalid JSON: {exc.msg} (column {exc.colno})") from None
        if not isinstance(value, dict):
            raise ImportFormatError(f"{name}: line {number}: a JSON {type(value).__name__}, not an object")
        entries.append((number, value))
    return tuple(entries), tuple(warnings)


def _ends_early(line: str, exc: json.JSONDecodeError) -> bool:
    """Whether a line's JSON is cut short (the text ends inside a value or between tokens) rather than damaged:
    what follows the point of failure is nothing, or the start of a literal, a number or a ``\\u`` escape."""
    if exc.msg.startswith("Unterminated string"):
        return True
    rest = line.rstrip()[exc.pos :]
    return any(word.startswith(rest) for word in ("true", "false", "null")) or bool(_CUT_TOKEN.fullmatch(rest))
