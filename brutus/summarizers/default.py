"""Which summarizer ``store.compact`` uses when none is given: Claude when an API key is set, else offline."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping

from .anthropic_api import AnthropicSummarizer
from .base import Summarizer
from .extractive import ExtractiveSummarizer

__all__ = ["default_summarizer"]


def default_summarizer(environ: Mapping[str, str] | None = None) -> Summarizer:
    """``AnthropicSummarizer()`` when ``ANTHROPIC_API_KEY`` is set and the ``anthropic`` package is installed,
    else ``ExtractiveSummarizer()``. Nothing is imported or connected here: the client is built on first use."""
    env = os.environ if environ is None else environ
    if env.get("ANTHROPIC_API_KEY") and importlib.util.find_spec("anthropic") is not None:
        return AnthropicSummarizer()
    return ExtractiveSummarizer()
