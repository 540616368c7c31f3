"""Compaction blocks: where they may stand, how they are signed, and what a compaction request may carry.

Rules (docs: "Compaction overview", "Compaction on demand", "Compaction at a token threshold",
"Compaction and preserved thinking"):

- On demand: a request with ``compaction: {"type": "summarize"}`` (beta ``compact-2026-09-04``, not combined
  with ``context_management``, no ``stop_sequences``, no ``output_config.format``, no ``tool_choice`` of type
  ``any`` or ``tool``, ``instructions`` of at most 16,384 characters) summarizes every message and is answered
  with a single signed ``compaction`` block, ``stop_reason: "compaction"``; nothing is sampled after it.
  Top-level ``usage`` input/output are 0 and ``usage.iterations`` holds one ``compaction`` entry.
- At a threshold: ``context_management.edits`` with ``compact_20260112`` (beta ``compact-2026-01-12``,
  ``trigger.value`` >= 50,000, default 150,000 input tokens). When the request's input reaches the trigger,
  the response starts with a signed ``compaction`` block and continues from it (``usage.iterations``: a
  ``compaction`` entry then a ``message`` entry), or stops after it with ``stop_reason: "compaction"`` under
  ``pause_after_compaction``. It cannot run on a request that carries an on-demand block.
  ``clear_thinking_20251015`` with ``keep: "all"`` clears nothing and is accepted; other context editing
  strategies are not simulated (400).
- A compaction block sent back must be exactly as produced: its ``signature`` must verify
  (``compaction_signature_invalid``) and match its ``content``/``encrypted_content``/``tool_changes``
  (``compaction_content_mismatch``). A block with ``content: null`` and no signature is a no-op.
- Position: an on-demand block must come first in ``messages`` (first block of the first message, user or
  assistant), else ``compaction_block_misplaced``; at most one per request. A threshold block must be the
  first block of an ``assistant`` message. The content before the last compaction block is dropped: the
  model reads from that block on, and the checked thinking prefix restarts there.
- Compaction blocks are content only with a compaction beta (``compact-2026-01-12`` or ``compact-2026-09-04``;
  an on-demand block needs the latter); without it the type is rejected like any unknown block type.
- The summary of a produced block is the script's (a ``compaction`` block in the reply, or its text) or a
  deterministic default naming the number of messages and tokens summarized.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import bad_request
from .prompt import blocks_of
from .signing import Chain, compaction_content_digest, seal, unseal

ON_DEMAND_BETA = "compact-2026-09-04"
THRESHOLD_BETA = "compact-2026-01-12"
COMPACTION_BETAS = frozenset({ON_DEMAND_BETA, THRESHOLD_BETA})
THRESHOLD_EDIT = "compact_20260112"
CLEAR_THINKING_EDIT = "clear_thinking_20251015"
DEFAULT_TRIGGER = 150_000
MIN_TRIGGER = 50_000
MAX_INSTRUCTIONS = 16_384


@dataclass
class Compactions:
    """The compaction blocks of a request, verified."""

    payloads: dict[tuple[int, int], dict[str, Any]] = field(default_factory=dict)
    start: tuple[int, int] = (0, 0)  # where the model starts reading: the last compaction block

    @property
    def has_on_demand_block(self) -> bool:
        return any(p.get("mode") == "summarize" for p in self.payloads.values())


@dataclass
class Threshold:
    """A ``compact_20260112`` edit."""

    trigger: int
    pause: bool


def leading_compaction(message: Any) -> bool:
    """Whether a message starts with a compaction block (it may then open ``messages`` in any role)."""
    blocks = blocks_of(message.get("content")) if isinstance(message, dict) else []
    return bool(blocks) and isinstance(blocks[0], dict) and blocks[0].get("type") == "compaction"


def inspect(body: dict[str, Any], betas: set[str]) -> Compactions:
    """Verify every compaction block of the request and find where the model starts reading."""
    found = Compactions()
    on_demand = 0
    for i, message in enumerate(body.get("messages") or []):
        for j, block in enumerate(blocks_of(message.get("content"))):
            if not isinstance(block, dict) or block.get("type") != "compaction":
                continue
            path = f"messages.{i}.content.{j}"
            if block.get("content") is None and block.get("signature") is None:
                continue  # a failed compaction, round-tripped: a no-op
            payload = unseal(block.get("signature"))
            if payload is None or payload.get("kind") != "compaction":
                raise bad_request(f"{path}: Invalid `signature` in `compaction` block. Send the block exactly as the API "
                                  "returned it, including its `signature`.", error_code="compaction_signature_invalid")
            if payload.get("content") != compaction_content_digest(block):
                raise bad_request(f"{path}: The `compaction` block was changed after the API returned it. Send the block "
                                  "exactly as returned.", error_code="compaction_content_mismatch")
            if payload.get("mode") == "summarize":
                if ON_DEMAND_BETA not in betas:
                    raise bad_request(f"{path}: Input tag 'compaction' found using 'type' does not match any of the "
                                      "expected tags for this request")
                on_demand += 1
                if on_demand > 1:
                    raise bad_request("messages: The request carries more than one `compaction` block. Send exactly "
                                      "one, the newest.")
                if (i, j) != (0, 0):
                    raise bad_request(f"{path}: Summarized messages remain in front of the `compaction` block. Remove "
                                      "them so that the block comes first in `messages`.",
                                      error_code="compaction_block_misplaced")
            elif j != 0 or message.get("role") != "assistant":
                raise bad_request(f"{path}: A `compaction` block must be the first block of the `assistant` message it "
                                  "was returned in; nothing may come before it.", error_code="compaction_block_misplaced")
            found.payloads[(i, j)] = payload
            found.start = (i, j)
    return found


def threshold_of(body: dict[str, Any], betas: set[str], compactions: Compactions) -> Threshold | None:
    """The request's threshold compaction edit, validated, or None."""
    management = body.get("context_management")
    if management is None:
        return None
    if not isinstance(management, dict) or not isinstance(management.get("edits", []), list):
        raise bad_request("context_management.edits: Input should be a valid list")
    threshold = None
    for e, edit in enumerate(management.get("edits") or []):
        kind = edit.get("type") if isinstance(edit, dict) else None
        if kind == CLEAR_THINKING_EDIT and edit.get("keep") == "all":
            continue  # keeps every thinking block, as the fake does anyway: a no-op (what Claude Code sends)
        if kind != THRESHOLD_EDIT:
            raise bad_request(f"context_management.edits.{e}.type: FakeMessagesAPI simulates only `{THRESHOLD_EDIT}` "
                              f"(threshold compaction); context editing strategy {kind!r} is not simulated")
        if THRESHOLD_BETA not in betas:
            raise bad_request(f"context_management.edits.{e}: `{THRESHOLD_EDIT}` requires anthropic-beta: {THRESHOLD_BETA}")
        trigger = edit.get("trigger") or {"type": "input_tokens", "value": DEFAULT_TRIGGER}
        if not isinstance(trigger, dict) or trigger.get("type") != "input_tokens":
            raise bad_request(f"context_management.edits.{e}.trigger.type: Input should be 'input_tokens'")
        value = trigger.get("value")
        if not isinstance(value, int) or isinstance(value, bool) or value < MIN_TRIGGER:
            raise bad_request(f"context_management.edits.{e}.trigger.value: Input should be greater than or equal to "
                              f"{MIN_TRIGGER}")
        threshold = Threshold(trigger=value, pause=bool(edit.get("pause_after_compaction")))
    if threshold is not None and compactions.has_on_demand_block:
        raise bad_request(f"context_management: `{THRESHOLD_EDIT}` cannot run on a request that carries a signed "
                          "`compaction` block from on-demand compaction")
    return threshold


def validate_request(body: dict[str, Any], betas: set[str]) -> None:
    """The restrictions on a request that sets the ``compaction`` parameter."""
    config = body.get("compaction")
    if ON_DEMAND_BETA not in betas:
        raise bad_request(f"compaction: the `compaction` parameter requires anthropic-beta: {ON_DEMAND_BETA}")
    if not isinstance(config, dict) or config.get("type") != "summarize":
        raise bad_request("compaction.type: Input should be 'summarize'")
    instructions = config.get("instructions")
    if instructions is not None and (not isinstance(instructions, str) or len(instructions) > MAX_INSTRUCTIONS):
        raise bad_request(f"compaction.instructions: String should have at most {MAX_INSTRUCTIONS} characters")
    if body.get("context_management") is not None:
        raise bad_request("`compaction` cannot be combined with `context_management`")
    if body.get("stop_sequences"):
        raise bad_request("`stop_sequences` cannot be used with `compaction`")
    if (body.get("output_config") or {}).get("format") is not None:
        raise bad_request("`output_config.format` cannot be used with `compaction`")
    if (body.get("tool_choice") or {}).get("type") in ("any", "tool"):
        raise bad_request("`tool_choice` of type `any` or `tool` cannot be used with `compaction`")


def nothing_to_summarize(body: dict[str, Any]) -> bool:
    return not any(isinstance(m, dict) and m.get("role") in ("user", "assistant") for m in body.get("messages") or [])


def default_summary(body: dict[str, Any], tokens: int) -> str:
    """A deterministic summary: how much was summarized, and the last user text."""
    messages = body.get("messages") or []
    last_user = ""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            texts = [b.get("text", "") for b in blocks_of(message.get("content")) if isinstance(b, dict) and b.get("type") == "text"]
            if texts:
                last_user = " ".join(texts)
                break
    summary = f"Summary of the conversation so far ({len(messages)} messages, {tokens} input tokens)."
    if last_user:
        summary += f" The last user message was: {last_user[:200]}"
    return summary


def sign_on_demand(block: dict[str, Any], chain: Chain) -> None:
    """Sign an on-demand block: it records the chain state of the messages it summarizes."""
    if "signature" not in block:
        block["signature"] = seal({"v": 1, "kind": "compaction", "mode": "summarize",
                                   "content": compaction_content_digest(block), "base": chain.base, "state": chain.state})


def sign_threshold(block: dict[str, Any]) -> None:
    """Sign a block produced at the start of a response."""
    if "signature" not in block:
        block["signature"] = seal({"v": 1, "kind": "compaction", "mode": "threshold",
                                   "content": compaction_content_digest(block)})
