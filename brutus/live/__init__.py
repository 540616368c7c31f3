"""Live agents on the Anthropic Messages API: record responses losslessly, render requests append-only, and
run the context policy (prune, compact, recover) as a library call."""

from ..policy import ContextPolicy, plan_request
from .conversation import AsyncConversation, Conversation
from .core import RequestStats, is_prompt_too_long

__all__ = ["AsyncConversation", "ContextPolicy", "Conversation", "RequestStats", "is_prompt_too_long", "plan_request"]
