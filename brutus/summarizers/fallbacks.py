"""Never crash: a summary whatever the summarizer does (shared by compaction and the tiers).

- ``summarize_with_fallbacks`` / ``asummarize_with_fallbacks``: the summarizer's summary, unless it fails
  (an error, a timeout, an empty text); then the offline extractive summary, and if that fails too, seed
  000's truncation text. Each returns the summary and which fallback wrote it (None: the summarizer).
- The async one awaits ``asummarize`` when the summarizer has it, else runs its sync ``summarize`` in a
  worker thread, so the event loop never blocks; cancellation propagates.
"""

from __future__ import annotations

import logging
from typing import Any

from .base import Summary
from .extractive import ExtractiveSummarizer
from .truncation import truncation_summary

__all__ = ["asummarize_with_fallbacks", "fallback_summary", "summarize_with_fallbacks"]

log = logging.getLogger("brutus.compaction")


def summarize_with_fallbacks(summarizer: Any, request: Any) -> tuple[Any, str | None]:
    """The summary and which fallback wrote it (None: the summarizer itself)."""
    try:
        return _kept(summarizer.summarize(request), summarizer, request)
    except Exception as exc:  # noqa: BLE001  never crash: any summarizer failure falls back
        return _failed(exc, summarizer, request)


async def asummarize_with_fallbacks(summarizer: Any, request: Any) -> tuple[Any, str | None]:
    """``summarize_with_fallbacks`` for asyncio: ``asummarize`` when the summarizer has it, else its sync
    ``summarize`` in a worker thread, so the event loop never blocks. Cancellation propagates."""
    import asyncio

    try:
        if hasattr(summarizer, "asummarize"):
            summary = await summarizer.asummarize(request)
        else:
            summary = await asyncio.to_thread(summarizer.summarize, request)
        return _kept(summary, summarizer, request)
    except Exception as exc:  # noqa: BLE001  (CancelledError is a BaseException: it goes through)
        return _failed(exc, summarizer, request)


def _kept(summary: Any, summarizer: Any, request: Any) -> tuple[Any, str | None]:
    if summary.text.strip():
        return summary, None
    log.warning("summarizer returned an empty summary; using the extractive summary")
    return fallback_summary(summarizer, request)


def _failed(exc: Exception, summarizer: Any, request: Any) -> tuple[Any, str]:
    log.warning("summarizer failed (%s: %s); using the extractive summary", type(exc).__name__, exc)
    return fallback_summary(summarizer, request)


def fallback_summary(summarizer: Any, request: Any) -> tuple[Any, str]:
    """The extractive summary, else seed 000's truncation text (both offline and quick)."""
    if not isinstance(summarizer, ExtractiveSummarizer):
        try:
            summary = ExtractiveSummarizer().summarize(request)
            if summary.text.strip():
                return summary, "extractive"
        except Exception as exc:  # noqa: BLE001
            log.warning("extractive summary failed (%s: %s); using the truncation text", type(exc).__name__, exc)
    return Summary(text=truncation_summary(request.history), model="brutus-truncation"), "truncation"
