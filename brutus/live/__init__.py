"""Live agents on the Anthropic Messages API: record responses losslessly, render requests append-only, and
run the context policy (prune, compact, recover) as a library call.

Floor: above the rules it applies (``brutus.policy``, ``brutus.render``, ``brutus.blocks``) and the database
operations and compaction flow its calls yield; below the stores, which it never imports (a conversation runs
its calls on whatever store it is given: ``store.run``). A new call is one ``@work`` method of
``ConversationCalls`` over a flow in ``flows.py``."""

from ..policy import ContextPolicy, plan_request
from .conversation import AsyncConversation, Conversation
from .core import RequestStats, is_prompt_too_long

__all__ = ["AsyncConversation", "ContextPolicy", "Conversation", "RequestStats", "is_prompt_too_long", "plan_request"]
