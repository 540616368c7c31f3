"""Small text helpers the offline summaries share: clean a text, cut it to a size, keep it within a token budget."""

from __future__ import annotations

import re

from ..tokens import estimate_tokens

__all__ = ["clean", "cut_middle", "fit_tokens", "one_line", "trim"]

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_BLANK_RUNS = re.compile(r"\n{3,}")
_SPACES = re.compile(r"\s+")


def clean(text: str) -> str:
    """Without terminal escapes and control characters, with ``\\n`` line ends, no trailing spaces, no runs
    of blank lines, stripped."""
    text = _CONTROL.sub("", _ANSI.sub("", text.replace("\r\n", "\n").replace("\r", "\n")))
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    return _BLANK_RUNS.sub("\n\n", text).strip()


def trim(text: str, limit: int) -> str:
    """``clean(text)``, cut after at most ``limit`` characters (at a space when one is near) with a note of
    how much was cut."""
    text = clean(text)
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = max(cut.rfind(" "), cut.rfind("\n"))
    if space >= limit * 0.8:
        cut = cut[:space]
    cut = cut.rstrip()
    return f"{cut} [… {len(text) - len(cut)} more characters]"


def one_line(text: str, limit: int) -> str:
    """``trim`` on the text with every run of whitespace made one space."""
    return trim(_SPACES.sub(" ", clean(text)), limit)


def cut_middle(text: str, limit: int) -> str:
    """At most about ``limit`` characters: the first two thirds and the last third of the budget, with a
    note of what was cut between them (the end of a command's output is where its errors are)."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[… {cut} characters cut …]\n{text[len(text) - tail:] if tail else ''}"


def fit_tokens(text: str, budget: int) -> str:
    """``text`` itself when its estimate is within ``budget`` tokens, else its longest prefix that fits,
    ending with `` […]`` when that fits too."""
    if estimate_tokens(text) <= budget:
        return text
    marker = " […]"
    low, high = 0, len(text)
    while low < high:  # the longest prefix that fits with the marker
        middle = (low + high + 1) // 2
        if estimate_tokens(text[:middle].rstrip() + marker) <= budget:
            low = middle
        else:
            high = middle - 1
    if low:
        return text[:low].rstrip() + marker
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if estimate_tokens(text[:middle]) <= budget:
            low = middle
        else:
            high = middle - 1
    return text[:low]
