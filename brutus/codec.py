"""Lossless text for both backends.

PostgreSQL refuses ``\\x00`` in TEXT and JSONB, and no UTF-8 database can hold a lone surrogate. brutus stores
such text escaped and gives it back exactly: the escape character ``U+E000`` (private use) is written as
``U+E000 U+E000``, NUL as ``U+E000 0`` and a surrogate as ``U+E000 s`` plus four hex digits. Text without
any of the three characters (nearly all text) is stored as it is, so plain SQL reads it unchanged.

JSON values are walked and every string (keys too) gets the same treatment; nesting deeper than
``MAX_JSON_DEPTH`` is refused with ``InvalidInput`` before anything is written.
"""

from __future__ import annotations

import json
import re
import zlib
from typing import Any

from .errors import DatabaseError, InvalidInput

__all__ = [
    "MAX_JSON_DEPTH",
    "JSONText",
    "decode_text",
    "dumps_json",
    "encode_json",
    "encode_text",
    "loads_json",
    "pack",
    "sqlar_uncompress",
    "unpack",
]

ESC = "\ue000"
MAX_JSON_DEPTH = 256


# json.dumps builds a new encoder per call when given options; one built once encodes the same text.
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False)
_encode = _ENCODER.encode


class JSONText(str):
    """A JSON value ``encode_json`` has serialized already: ``dumps_json`` (the engines' serializer) passes it
    through instead of serializing the value a second time."""

    __slots__ = ()

_NEEDS_ESCAPE = re.compile("[\x00\ue000\ud800-\udfff]")
_ESCAPED = re.compile("\ue000(\ue000|0|s[0-9a-f]{4})")
_ASCII_ESC, _ASCII_ESC_UPPER = "\\ue000", "\\uE000"  # the escape character as a JSON \u escape


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    if ch == "\x00":
        return ESC + "0"
    if ch == ESC:
        return ESC + ESC
    return f"{ESC}s{ord(ch):04x}"


def _unescape(match: re.Match[str]) -> str:
    code = match.group(1)
    if code == ESC:
        return ESC
    if code == "0":
        return "\x00"
    return chr(int(code[1:], 16))


def encode_text(text: str) -> str:
    """``text`` in a form every backend stores; ``decode_text`` gives it back."""
    if text.isascii() and "\x00" not in text:
        return text
    return _NEEDS_ESCAPE.sub(_escape, text)


def decode_text(text: str) -> str:
    if ESC not in text:
        return text
    return _ESCAPED.sub(_unescape, text)


def _walk(value: Any, fn: Any) -> Any:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        return {fn(k): _walk(v, fn) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(v, fn) for v in value]
    return value


def encode_json(value: Any) -> Any:
    """``value`` ready for a JSON column, strings encoded; ``InvalidInput`` for what JSON cannot hold.

    Checks by serializing once (the C encoder is fast); walks the value only when a string needs escaping.
    """
    if value is None:
        return None
    try:
        dumped = _encode(value)
    except RecursionError:
        raise InvalidInput("JSON value is nested too deeply to store") from None
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"not a JSON value: {exc}") from None
    if _nesting(dumped) > MAX_JSON_DEPTH:
        raise InvalidInput(f"JSON value is nested deeper than {MAX_JSON_DEPTH} levels")
    if "\\u0000" in dumped or _NEEDS_ESCAPE.search(dumped):
        return _walk(json.loads(dumped), encode_text)  # via loads: tuples become lists, keys strings
    return JSONText(dumped)


def _nesting(dumped: str) -> int:
    """Maximum bracket depth of a JSON text, ignoring brackets inside strings (cheap upper bound first)."""
    if dumped.count("[") + dumped.count("{") <= MAX_JSON_DEPTH:
        return 0
    depth = best = 0
    in_string = escaped = False
    for ch in dumped:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            best = max(best, depth)
        elif ch in "]}":
            depth -= 1
    return best


def dumps_json(value: Any) -> str:
    """The engines' JSON serializer: values reach it already encoded (``JSONText`` already serialized)."""
    if type(value) is JSONText:
        return value
    return _encode(value)


def loads_json(text: str | bytes) -> Any:
    """The engines' JSON deserializer: decodes escaped strings only when the text holds an escape; a packed
    value (``pack``) is unpacked first."""
    if isinstance(text, bytes):
        text = unpack(text)
    value = json.loads(text)
    if ESC in text or _ASCII_ESC in text or _ASCII_ESC_UPPER in text:  # JSON another client wrote as \ue000
        value = _walk(value, decode_text)
    return value


# -- packing: large values compressed on SQLite ------------------------------------------------------------------
# SQLite stores a large value of a packed column (kept metadata, tool outputs) zlib-compressed, with its size in
# the column beside it: the convention of SQLite's own archive format, so the ``sqlite3`` shell reads it with its
# built-in ``sqlar_uncompress(value, size)``. A value is packed only when that makes it smaller; its size column
# is NULL otherwise. PostgreSQL compresses large values itself (TOAST): nothing is packed there.

# Characters: shorter values are stored as they are. On the corpus, values of 4,096 or more hold 81% of the
# metadata bytes and 68% of the output bytes (packing them saves 7.0 and 1.5 MB, against 7.5 and 1.9 MB from
# 1,024 on); an agent's ordinary turn (outputs of a few KB) neither packs nor unpacks anything.
PACK_MIN = 4096
_PACK_LEVEL = 6  # zlib's default: level 1 leaves 15% more bytes for half the time (the corpus's metadata)
_ZLIB = b"x"  # the first byte of every zlib stream; no JSON text and no packed-column text starts with it as bytes


def pack(text: str) -> tuple[str | bytes, int | None]:
    """``text`` as SQLite stores it in a packed column, and the value of its size column: compressed bytes and
    the UTF-8 size when that is smaller, else ``text`` itself and None."""
    if len(text) < PACK_MIN:
        return text, None
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate codec escapes never reached: let the database refuse it as before
        return text, None
    packed = zlib.compress(raw, _PACK_LEVEL)
    if len(packed) >= len(raw):
        return text, None
    return packed, len(raw)


def unpack(value: bytes) -> str:
    """The text of a stored value read as bytes: a packed one decompressed, any other decoded as UTF-8;
    ``DatabaseError`` for bytes that are neither (a damaged value)."""
    if value[:1] == _ZLIB:
        try:
            value = zlib.decompress(value)
        except zlib.error:  # bytes another client wrote that only begin like a zlib stream
            pass
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise DatabaseError(f"a stored value of {len(value)} bytes is neither packed nor UTF-8 text") from None


def sqlar_uncompress(data: bytes | str | None, size: int | None) -> bytes | str | None:
    """The ``sqlite3`` shell's ``sqlar_uncompress(data, size)``, which brutus's SQLite connections get too (its
    views and search triggers read packed outputs with it): ``data`` decompressed when ``size`` says it is
    packed, else ``data`` itself."""
    if type(data) is not bytes or not size or size <= 0 or size == len(data):
        return data
    return zlib.decompress(data)
