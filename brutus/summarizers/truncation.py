"""The last fallback when no summarizer gave a summary: seed 000's truncation text, which cannot fail."""

from __future__ import annotations

from collections.abc import Sequence

from ..models import MessageWithParts
from .facts import user_directions
from .text import one_line

__all__ = ["truncation_summary"]

_TOPIC_CHARS = 80


def truncation_summary(history: Sequence[MessageWithParts], *, max_topics: int = 5) -> str:
    """``[Context truncated. Earlier conversation contained N messages about: …]`` (seed 000).

    The topics are the first lines of the user's own words (``user_directions``: no local command output or
    caveat of Claude Code): the first one and the newest ones, at most ``max_topics``, each cut to 80
    characters. With no user text the sentence ends after the count.
    """
    topics: list[str] = []
    for message in history:
        for direction in user_directions(message):
            first = next(line for line in direction.splitlines() if line.strip())
            topic = one_line(first, _TOPIC_CHARS)
            if topic and topic not in topics[-1:]:
                topics.append(topic)
    if len(topics) > max_topics > 0:
        topics = topics[:1] + topics[len(topics) - max_topics + 1 :]
    count = f"{len(history)} message{'' if len(history) == 1 else 's'}"
    if not topics or max_topics <= 0:
        return f"[Context truncated. Earlier conversation contained {count}.]"
    return f"[Context truncated. Earlier conversation contained {count} about: {'; '.join(topics)}]"
