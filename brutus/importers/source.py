"""Reading a file to import and telling its format from its content (never from its name).

Rules:

- A gzip-compressed file (its bytes start with the gzip magic ``1f 8b``) is decompressed first, whatever its
  name; a corrupt or truncated one is refused with ``ImportFormatError`` naming the file. The rules below
  apply to what it holds.
- The bytes must be UTF-8 text (a leading BOM is allowed) without NUL bytes; an empty or blank file, binary
  data, text that is not JSON, and JSON of another shape are refused with ``ImportFormatError`` naming the
  file, and the line or position at fault.
- A document that parses as one JSON value is an OpenCode export when it is an object with an ``info`` object
  and a ``messages`` array (what ``opencode export`` writes); an object that is one Claude Code entry is a
  one-line Claude Code session.
- Otherwise it is read as JSON Lines: every non-blank line must be a JSON object (the first broken line is
  named), and at least one must be a Claude Code entry (a ``type`` plus ``uuid``, ``sessionId`` or
  ``leafUuid``). A broken line is refused with the whole file, except the last line when it is cut short (the
  JSON ends before its value does, as when the agent was killed mid-write): the file is read up to that line
  and the ``Document`` says so in its ``warnings``. A last line with other damage is refused like any other.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..errors import ImportFormatError

__all__ = ["Document", "Format", "detect_format", "parse_document", "read_document"]

Format = Literal["opencode", "claude-code"]
Entry = tuple[int, dict[str, Any]]  # (line number, the line's object)

_CLAUDE_CODE_KEYS = ("uuid", "sessionId", "leafUuid")
_GZIP_MAGIC = b"\x1f\x8b"
_CUT_TOKEN = re.compile(r"[-+.eE0-9]*|.*\\u[0-9a-fA-F]{0,3}")


@dataclass(frozen=True)
class Document:
    """A parsed file: its name (for messages), its format, and its content.

    ``export`` holds an OpenCode export object; ``entries`` the numbered lines of a Claude Code session.
    """

    name: str
    format: Format
    export: dict[str, Any] | None = None
    entries: tuple[Entry, ...] = ()
    warnings: tuple[str, ...] = ()


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
    """``"opencode"`` or ``"claude-code"`` for a file's content (or a path to read); ``ImportFormatError``
    when it is neither."""
    if isinstance(data, Path):
        return read_document(data).format
    return parse_document(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data).format


def parse_document(data: bytes, *, name: str = "<input>") -> Document:
    """Parse a file's bytes into a ``Document`` whose format is told from the content."""
    text = _text(data, name)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return _json_lines(text, name, exc)
    if isinstance(value, dict):
        if _is_opencode_export(value, name):
            return Document(name=name, format="opencode", export=value)
        if _is_claude_code_entry(value):
            return Document(name=name, format="claude-code", entries=((1, value),))
        keys = ", ".join(sorted(map(str, value))[:8]) or "none"
        raise ImportFormatError(
            f"{name}: a JSON object that is neither an OpenCode export ({{info, messages}}) "
            f"nor a Claude Code session entry (its keys: {keys})"
        )
    raise ImportFormatError(
        f"{name}: a JSON {type(value).__name__}, not an OpenCode export ({{info, messages}}) "
        "nor a Claude Code session (JSON Lines)"
    )


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


def _is_opencode_export(value: dict[str, Any], name: str) -> bool:
    if "info" not in value or "messages" not in value:
        return False
    if not isinstance(value["info"], dict) or not isinstance(value["messages"], list):
        raise ImportFormatError(f"{name}: an OpenCode export needs an 'info' object and a 'messages' array")
    return True


def _is_claude_code_entry(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("type"), str) and any(k in value for k in _CLAUDE_CODE_KEYS)


def _json_lines(text: str, name: str, whole: json.JSONDecodeError) -> Document:
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
    if not any(_is_claude_code_entry(value) for _, value in entries):
        raise ImportFormatError(
            f"{name}: JSON Lines, but no line is a Claude Code session entry (a 'type' with 'uuid' or 'sessionId')"
        )
    return Document(name=name, format="claude-code", entries=tuple(entries), warnings=tuple(warnings))


def _ends_early(line: str, exc: json.JSONDecodeError) -> bool:
    """Whether a line's JSON is cut short (the text ends inside a value or between tokens) rather than damaged:
    what follows the point of failure is nothing, or the start of a literal, a number or a ``\\u`` escape."""
    if exc.msg.startswith("Unterminated string"):
        return True
    rest = line.rstrip()[exc.pos :]
    return any(word.startswith(rest) for word in ("true", "false", "null")) or bool(_CUT_TOKEN.fullmatch(rest))
