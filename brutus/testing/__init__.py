"""A local fake of the Anthropic Messages API, to test agents offline through the real ``anthropic`` SDK.

Rules (each module states its own in full; the docs followed are the Messages API's own pages: "Preserved
thinking" with "Prefix checks on thinking blocks" and "Fix a thinking block bound to a different
conversation", "Troubleshooting thinking", "Thinking in tool and multi-turn workflows", "Prompt caching",
"Compaction" with "Compaction on demand", "Compaction at a token threshold" and "Compaction and preserved
thinking"):

- The fake refuses what the API refuses, with the API's status, error type and message: request shape and
  strict user/assistant alternation (``rules``), tool_use/tool_result pairing (``rules``), the context
  window (``engine``), tampered or conversation-bound thinking signatures (``signing``), tampered or
  misplaced compaction blocks (``compaction``), cache breakpoints (``cache``).
- What it produces is signed: a thinking block is bound to its prefix (``system``, ``tools``, the messages and
  blocks before it, never ``cache_control``); a compaction block to its content.
- Usage is counted deterministically (``prompt``: ceil(UTF-8 bytes of canonical JSON / 4) per block) and
  split by the prompt cache as the API splits it (``cache``), over an injected clock.
- Replies come from a script (``script``); every exchange is recorded (``FakeMessagesAPI.requests``) and
  summed (``FakeMessagesAPI.stats``).

Standard library only::

    from brutus.testing import FakeMessagesAPI, Reply

    with FakeMessagesAPI([Reply([{"type": "thinking", "thinking": "..."}, {"type": "text", "text": "Hi"}])]) as api:
        client = anthropic.Anthropic(base_url=api.base_url, api_key="test", max_retries=0)
        message = client.beta.messages.create(model="claude-fable-5-1", max_tokens=1024, messages=[...])
"""

from __future__ import annotations

from .engine import RequestRecord, Stats
from .script import Reply
from .server import FakeMessagesAPI

__all__ = ["FakeMessagesAPI", "Reply", "RequestRecord", "Stats"]
