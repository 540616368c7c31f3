"""Summarizers: what writes a compaction summary or a tier block from a history (DESIGN §3, §4).

``Summarizer`` / ``AsyncSummarizer`` are the protocols (``summarize(request) -> Summary``);
``AnthropicSummarizer`` asks a Claude model through the official SDK, ``ExtractiveSummarizer`` writes one
offline and deterministically, and ``truncation_summary`` is the text that cannot fail. ``shrink_request``
makes a request fit the summarizer's context before it is sent. Importing this package never imports
``anthropic``.

Floor: above the rules (``render``, ``blocks``, ``pricing``), below the flows that ask them (compaction,
tiers), which reach them only through the ``Summarize`` action: a new summarizer is one class with
``summarize`` (and ``asummarize``), passed to ``store.compact`` or a conversation.
"""

from __future__ import annotations

from ..errors import SummarizerError
from ..pricing import Price, cost_of, price_of  # re-exported: summarizers report costs in these terms
from .anthropic_api import DEFAULT_MODEL, AnthropicSummarizer, build_messages_request
from .base import SUMMARY_KINDS, AsyncSummarizer, Summarizer, Summary, SummaryKind, SummaryRequest
from .default import default_summarizer
from .facts import HistoryFacts, history_facts
from .extractive import EXTRACTIVE_MODEL, ExtractiveSummarizer, extractive_summary
from .server_compaction import AnthropicServerCompaction
from .prompts import (
    COMPACTION_SYSTEM_PROMPT,
    DEFAULT_SUMMARY_PROMPT,
    EPISODIC_SYSTEM_PROMPT,
    GOAL_BATCH_SECTIONS,
    GOAL_BATCH_TAG,
    SUMMARIZED_SECTIONS,
    SUMMARIZED_TAG,
    summary_prompt,
    system_prompt,
)
from .shrink import DEFAULT_CUT_CHARS, estimate_request_tokens, request_fits, shrink_request
from .truncation import truncation_summary

__all__ = [
    "AnthropicServerCompaction",
    "AnthropicSummarizer",
    "AsyncSummarizer",
    "COMPACTION_SYSTEM_PROMPT",
    "DEFAULT_CUT_CHARS",
    "DEFAULT_MODEL",
    "DEFAULT_SUMMARY_PROMPT",
    "EPISODIC_SYSTEM_PROMPT",
    "EXTRACTIVE_MODEL",
    "ExtractiveSummarizer",
    "GOAL_BATCH_SECTIONS",
    "GOAL_BATCH_TAG",
    "HistoryFacts",
    "Price",
    "SUMMARIZED_SECTIONS",
    "SUMMARIZED_TAG",
    "SUMMARY_KINDS",
    "Summarizer",
    "SummarizerError",
    "Summary",
    "SummaryKind",
    "SummaryRequest",
    "build_messages_request",
    "cost_of",
    "default_summarizer",
    "estimate_request_tokens",
    "extractive_summary",
    "history_facts",
    "price_of",
    "request_fits",
    "shrink_request",
    "summary_prompt",
    "system_prompt",
    "truncation_summary",
]
