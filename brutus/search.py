"""Full-text search over every session: what a hit is, how a query is read, and how a snippet is cut.

Rules:

- A query is words. Each whitespace-separated chunk is one word, matched whole (no stemming, no prefixes,
  case-insensitive); a chunk holding several tokens (``filter_compacted``, ``a.b``) matches them adjacent, as
  a phrase. Every word must appear in the same searchable text. Nothing in a query is syntax: quotes,
  ``AND``, ``(``, ``*`` and ``-`` are text, so no user input can make the index's query language fail; a query
  with no letter or digit at all is ``InvalidInput``.
- The searchable texts of a part (each its own document): a text or reasoning part's text (compaction
  summaries included), a tool call (its tool name, title, error and the string values of its input), a tool
  output. Each is read up to ``SEARCH_TEXT_LIMIT`` characters. An output dropped by ``gc`` is gone from search.
- A hit is in the model's view when its message is at or after the session's last completed compaction
  boundary (where ``filter_compacted`` starts) and, for a tool output, the part is not pruned.
- The snippet is cut from the stored text here (the same on SQLite and PostgreSQL): whitespace collapsed, some
  words before the first match, ``…`` where it was cut, and ``marks``: the spans of every matched word in it.

The query runs in ``brutus.db.search_ops``; ``SessionStore.search`` / ``AsyncSessionStore.search`` call it.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict

from .errors import InvalidInput

__all__ = ["SNIPPET_CHARS", "SearchHit", "make_snippet", "matches", "query_words", "word_tokens"]

SNIPPET_CHARS = 160  # the snippet's length before its ellipses
_BEFORE = 40  # characters of context kept before the first match
_TOKEN = re.compile(r"[^\W_]+")  # what both index tokenizers keep: runs of letters and digits


class SearchHit(BaseModel):
    """One matching text of one part: where it is, a snippet around the match, and whether the model sees it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    session_id: str
    session_title: str | None = None
    message_id: str
    part_id: str
    role: Literal["user", "assistant"]
    summary: bool = False  # the message is a compaction summary
    part_type: str  # "text", "reasoning" or "tool"
    field: Literal["text", "call", "output"]  # which text of the part matched
    tool: str | None = None
    snippet: str
    marks: tuple[tuple[int, int], ...] = ()  # [start, end) of each matched word in ``snippet``
    time: int  # the message's creation time, epoch ms
    in_view: bool
    pruned: bool = False  # a tool output marked pruned (its text kept, the model sees a placeholder)


def word_tokens(word: str) -> list[str]:
    """The index tokens of one query word, lowercased (``filter_compacted`` → ``filter``, ``compacted``)."""
    return [t.lower() for t in _TOKEN.findall(word)]


def matches(text: str | None, words: list[str]) -> bool:
    """Whether ``text`` holds every word of a query as the index reads it: each word's tokens, in a row."""
    if not text:
        return False
    tokens = [t.lower() for t in _TOKEN.findall(text)]
    for word in words:
        wanted = word_tokens(word)
        size = len(wanted)
        if not any(tokens[i : i + size] == wanted for i in range(len(tokens) - size + 1) if tokens[i] == wanted[0]):
            return False
    return True


def query_words(query: object) -> list[str]:
    """The words of a query (see the module rules): ``InvalidInput`` when there is nothing to search for."""
    if not isinstance(query, str):
        raise InvalidInput(f"the search query must be a string, got {type(query).__name__}")
    if "\x00" in query:
        raise InvalidInput("the search query holds a NUL character")
    words = [w for w in query.split() if word_tokens(w)]
    if not words:
        raise InvalidInput(f"nothing to search for in {query!r}: give at least one word of letters or digits")
    return words


def make_snippet(text: str | None, words: list[str], *, size: int = SNIPPET_CHARS) -> tuple[str, tuple[tuple[int, int], ...]]:
    """A snippet of ``text`` around the first match of ``words`` and the spans of the matches in it."""
    flat = " ".join((text or "").split())
    tokens = sorted({t for w in words for t in word_tokens(w)}, key=len, reverse=True)
    pattern = re.compile(r"(?<![^\W_])(?:" + "|".join(map(re.escape, tokens)) + r")(?![^\W_])", re.IGNORECASE)
    first = pattern.search(flat)
    start = 0
    if first is not None and first.start() > _BEFORE and len(flat) > size:
        start = min(first.start() - _BEFORE, len(flat) - size)
        space = flat.find(" ", start, first.start())
        start = space + 1 if space != -1 else start
    end = min(len(flat), start + size)
    if end < len(flat):
        space = flat.rfind(" ", max(start, first.end() if first else start), end)
        end = space if space > start else end
    prefix = "…" if start > 0 else ""
    suffix = "…" if end < len(flat) else ""
    body = flat[start:end]
    marks: list[tuple[int, int]] = []
    for match in pattern.finditer(body):
        begin, stop = match.start() + len(prefix), match.end() + len(prefix)
        if marks and begin - marks[-1][1] <= 1 and not body[marks[-1][1] - len(prefix) : begin - len(prefix)].isspace():
            marks[-1] = (marks[-1][0], stop)  # filter_compacted, a.b: one mark
        else:
            marks.append((begin, stop))
    return prefix + body + suffix, tuple(marks)
