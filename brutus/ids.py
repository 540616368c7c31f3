"""Time-ordered, prefixed identifiers (``ses_…``, ``msg_…``, ``prt_…``, ``cmp_…``), OpenCode's shape.

An id is the prefix, 12 hex digits of ``milliseconds * 4096 + counter`` and 14 random base62 characters, so
ids made later sort after ids made earlier, also within one millisecond in one process.
"""

from __future__ import annotations

import os
import threading
import time

__all__ = ["PREFIXES", "new_id"]

PREFIXES = {"session": "ses", "message": "msg", "part": "prt", "compaction": "cmp"}
_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_BYTE_TO_CHAR = bytes(ord(_ALPHABET[b % 62]) for b in range(256))  # random bytes -> base62 in one translate
_lock = threading.Lock()
_last = 0


def new_id(kind: str, now_ms: int | None = None) -> str:
    """A new id for ``kind`` (a key of ``PREFIXES``)."""
    global _last
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    with _lock:
        value = max(ms * 0x1000, _last + 1)
        _last = value
    body = format(value & 0xFFFF_FFFF_FFFF, "012x")
    rand = os.urandom(14).translate(_BYTE_TO_CHAR).decode("ascii")
    return f"{PREFIXES[kind]}_{body}{rand}"
