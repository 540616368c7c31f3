"""The request a live conversation sends: its view rendered append-only, with thinking kept valid.

Rules:

- A recorded response is sent back exactly as received (``brutus.blocks``): its content blocks deep-equal, in
  order, less a ``tool_use`` block a ``max_tokens`` stop cut short. Its tool results follow in the next user
  message, in the order of its ``tool_use`` blocks: the exact block the agent gave, or, once pruned, the
  same block with its content ``[Old tool result content cleared]``; a call without a result is an error
  result ``[Tool execution was interrupted]``. A user message recorded by ``Conversation.user`` is its
  content as text / content blocks. Anything else (imported history, compaction messages, summaries)
  renders as ``to_anthropic`` renders it: the request is its walk (``brutus.render.Walk``) with these two
  overrides, less its final trim (what a conversation sends never ends with the assistant: a user message
  follows, the turn's continuation or a summary's instruction).
- The store edits what was sent only at two kinds of points: a prune mark (a tool result's content) and a
  compaction boundary (the view starts again). The prefix of a message is ``system``, ``tools`` and the
  messages before it, ``cache_control`` left out (a moved breakpoint is no edit); its hash is a running
  SHA-256 of their canonical JSON. A recorded response keeps the hash of the prefix it answered.
- A thinking block is valid only while that prefix is unchanged. When it changed, the thinking and
  redacted thinking blocks of that response are stripped (and so those after it, whose prefix includes
  it), or, with ``thinking_mismatch="drop_block"``, kept and the request asks the API to drop them
  (``thinking.block_binding.prefix_mismatch_behavior``, beta ``thinking-binding-controls-2026-08-01``).
  A tool loop in progress (the last message carries tool results) must keep the thinking block that starts
  its last assistant message, so a mismatch there always asks for ``drop_block`` instead of stripping.
- ``first_change`` is the first message that differs from the previous render's (None on the first render
  and when the previous request is a prefix of this one: nothing was edited, only appended).
- A recorded response that opens with a ``compaction`` block (the API compacted at a threshold) is where the
  request starts: the API reads from that block on, so nothing before it is sent, and the thinking after it
  is bound from there.
- Prompt caching: at most three breakpoints, the end of system (or of the tools when there is no system),
  the newest summary in the view, and the conversation's end (the top-level ``cache_control``), each with
  the policy's TTL.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from ..models import MessageWithParts, ToolPart
from ..render import CLEARED_TOOL_OUTPUT, INTERRUPTED_TOOL_OUTPUT, Walk, tool_result
from ..blocks import BINDING_BETA, COMPACTION_BETA, KEY, canonical, json_copy, recorded_response, stored_tool_result

__all__ = ["BINDING_BETA", "COMPACTION_BETA", "THINKING_TYPES", "Hashes", "Rendered", "prefix_seed", "render_messages", "without_cache_control"]

THINKING_TYPES = ("thinking", "redacted_thinking")

Block = dict[str, Any]


class Rendered(NamedTuple):
    """A rendered view: the messages, the prefix hash before each, and what happened to thinking."""

    messages: list[dict[str, Any]]
    prefixes: list[str]  # prefixes[i]: hash of system, tools and messages[:i]; the last: of them all
    stripped: list[str]  # paths (messages.i.content.j, in the request as it was before stripping) removed
    mismatched: list[str]  # paths of thinking blocks sent for the API to drop (drop_block)
    drop_block: bool
    first_change: int | None
    summary_index: int | None  # the message holding the newest summary, for its cache breakpoint
    hashes: Hashes  # what the next render may skip (``render_messages``' ``last``)


def without_cache_control(value: Any) -> Any:
    """``value`` with every ``cache_control`` key removed, at any depth."""
    if isinstance(value, Mapping):
        return {k: without_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [without_cache_control(v) for v in value]
    return value


def hashed(value: Any) -> bytes:
    """``canonical(without_cache_control(value))``, without copying ``value`` when it holds no
    ``cache_control`` key (rendered messages hold one only when the caller's own content blocks did)."""
    data = canonical(value)
    return canonical(without_cache_control(value)) if b'"cache_control"' in data else data


def prefix_seed(system: Any, tools: Any) -> Any:
    """The running hash of a request's prefix before its first message."""
    return hashlib.sha256(hashed({"system": system, "tools": tools}))


def _tool_results(content: Sequence[Mapping[str, Any]], parts: Sequence[Any]) -> list[Block]:
    """The results of a recorded response's tool_use blocks, in their order, from its tool parts."""
    by_call = {p.call_id: p for p in parts if isinstance(p, ToolPart)}
    results: list[Block] = []
    for block in content:
        if block.get("type") != "tool_use":
            continue
        part = by_call.get(block.get("id"))
        state = part.state if part is not None else None
        if state is None or state.status in ("pending", "running"):
            results.append({"type": "tool_result", "tool_use_id": block["id"], "content": INTERRUPTED_TOOL_OUTPUT, "is_error": True})
            continue
        text = state.output if state.status == "completed" else state.error
        exact = stored_tool_result(state.metadata, text)
        if exact is None:  # completed through store.update_tool, not tool_results(): as to_anthropic says it
            text, is_error = tool_result(state)
            exact = {"type": "tool_result", "tool_use_id": block["id"], "content": text}
            if is_error:
                exact["is_error"] = True
        elif state.time.compacted:
            exact["content"] = CLEARED_TOOL_OUTPUT
        results.append(exact)
    return results


class _LiveWalk(Walk):
    """The walk of ``to_anthropic`` with recorded content sent back exactly; it notes the recorded response
    behind each assistant message (by index) and the message holding the newest summary."""

    def __init__(self, view: Sequence[MessageWithParts]) -> None:
        super().__init__(view)
        self.recorded: dict[int, dict[str, Any]] = {}
        self.summary_index: int | None = None
        self.cut = (0, False)  # where the messages start (a server compaction), and whether a placeholder leads

    def user(self, message: MessageWithParts) -> list[Block]:
        record = (message.info.metadata or {}).get(KEY)
        content = record.get("content") if isinstance(record, Mapping) else None
        if isinstance(content, str):
            return [{"type": "text", "text": content}]
        if isinstance(content, list):
            return json_copy(content)
        return super().user(message)

    def assistant(self, message: MessageWithParts) -> tuple[list[Block], list[Block]] | None:
        record = recorded_response(message.info.metadata)
        if record is None:
            turn = super().assistant(message)
            if turn is not None and turn[0] and message.info.summary:
                self.summary_index = self._landing()
            return turn
        discarded = set(record.get("discarded") or ())
        blocks = [json_copy(b) for i, b in enumerate(record["response"]["content"]) if i not in discarded]
        self.tool_use_ids.update(b["id"] for b in blocks if b.get("type") == "tool_use" and isinstance(b.get("id"), str))
        if blocks:  # two assistant messages in a row merge: the first one's prefix holds
            self.recorded.setdefault(self._landing(), record)
        return blocks, _tool_results(blocks, message.parts)

    def _landing(self) -> int:
        """The index of the message an assistant's blocks go to: the last one when it is the assistant's."""
        messages = self.messages
        return len(messages) - 1 if messages and messages[-1]["role"] == "assistant" else len(messages)

    def start(self) -> _LiveWalk:
        """Start at the newest recorded response that opens with a ``compaction`` block (the API reads from it
        on: what is before it is not sent), else lead with a placeholder when the assistant begins."""
        start = next((i for i in sorted(self.recorded, reverse=True) if _compacted(self.messages[i])), 0)
        del self.messages[:start], self.opened_by[:start]
        moved = -start if start else int(self.lead())
        self.recorded = {i + moved: r for i, r in self.recorded.items() if i >= start}
        if self.summary_index is not None:
            self.summary_index = None if self.summary_index < start else self.summary_index + moved
        self.cut = (start, moved == 1)
        return self


def _compacted(message: dict[str, Any]) -> bool:
    """Whether a message opens with a ``compaction`` block (server-side compaction at a threshold)."""
    return bool(message["content"]) and message["content"][0].get("type") == "compaction"


def _thinking_paths(messages: list[dict[str, Any]], index: int) -> list[str]:
    return [f"messages.{index}.content.{j}" for j, b in enumerate(messages[index]["content"]) if b.get("type") in THINKING_TYPES]


def _in_tool_loop(messages: list[dict[str, Any]]) -> bool:
    last = messages[-1] if messages else None
    return bool(last and last["role"] == "user" and any(b.get("type") == "tool_result" for b in last["content"]))


class Hashes(NamedTuple):
    """What a render hashed, for the next render of the same conversation to skip: the view in render order
    (the entries themselves), the entry that began each message, the seed and cut, and the running hash (its
    state and digest) before each message and after the last."""

    order: list[MessageWithParts]
    opened_by: list[int]
    head: tuple[str, int, bool]
    states: list[Any]
    prefixes: list[str]


def _kept(last: Hashes | None, built: _LiveWalk, head: tuple[str, int, bool]) -> int:
    """How many leading messages are those ``last`` hashed: each begun and ended by entries that are the very
    objects of the last render's view, in the same order, under the same seed and cut."""
    if last is None or last.head != head:
        return 0
    common = 0
    for old, new in zip(last.order, built.order):
        if old is not new:
            break
        common += 1
    kept = 0  # message i ends where message i + 1 begins: it is kept when that entry is a common one
    while kept + 1 < len(built.opened_by) and built.opened_by[kept + 1] < common and kept + 1 < len(last.states):
        kept += 1
    return kept


def render_messages(
    view: Sequence[MessageWithParts],
    *,
    system: Any,
    tools: Any,
    previous: Sequence[str] | None = None,
    thinking_mismatch: str = "strip",
    last: Hashes | None = None,
) -> Rendered:
    """Render ``view`` (see the module rules). ``previous``: the prefix hashes of the last render. ``last``:
    what the last render hashed (``Rendered.hashes``), for a view whose entries are never edited and are the
    same objects only when unchanged (``reuse_history``'s): the messages it covers are not hashed again."""
    built = _LiveWalk(view).run().start()
    messages, recorded, summary_index = built.messages, built.recorded, built.summary_index
    seed = prefix_seed(system, tools)
    head = (seed.hexdigest(), *built.cut)
    kept = _kept(last, built, head)
    running = last.states[kept].copy() if last is not None and kept else seed
    states = last.states[:kept] if last is not None else []
    prefixes = last.prefixes[:kept] if last is not None else []
    for message in messages[kept:]:
        states.append(running.copy())
        prefixes.append(running.hexdigest())
        running.update(hashed(message))
    states.append(running)
    prefixes.append(running.hexdigest())
    invalid = [  # recorded responses whose prefix changed; one that opens with a compaction binds from there
        index
        for index, record in sorted(recorded.items())
        if record.get("prefix") not in (None, prefixes[index]) and not _compacted(messages[index])
    ]
    hashes = Hashes(built.order, built.opened_by, head, states, list(prefixes))
    if invalid:  # every later block's prefix holds the first changed one: all of them are invalid
        invalid = sorted(i for i in recorded if i >= invalid[0])
    paths = [path for index in invalid for path in _thinking_paths(messages, index)]
    keep_last = _in_tool_loop(messages) and len(messages) >= 2 and (len(messages) - 2) in invalid
    drop_block = bool(paths) and (thinking_mismatch == "drop_block" or keep_last)
    stripped: list[str] = []
    if paths and not drop_block:
        stripped = paths
        messages, prefixes = _strip(messages, invalid, system, tools)
    first_change = None
    if previous is not None:
        first_change = next((i for i, (a, b) in enumerate(zip(prefixes, previous)) if a != b), None)
        if first_change is not None:
            first_change = max(first_change - 1, 0)  # prefixes[i] covers messages[:i]: message i-1 changed
    return Rendered(messages, prefixes, stripped, paths if drop_block else [], drop_block, first_change, summary_index, hashes)


def _strip(messages: list[dict[str, Any]], invalid: list[int], system: Any, tools: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """The messages without the thinking blocks of ``invalid`` responses, and their prefix hashes again."""
    out = []
    for index, message in enumerate(messages):
        if index in invalid:
            content = [b for b in message["content"] if b.get("type") not in THINKING_TYPES]
            if not content:  # a response that was nothing but thinking: keep a minimal trace of the turn
                content = [{"type": "text", "text": "(thinking omitted)"}]
            message = {**message, "content": content}
        out.append(message)
    running = prefix_seed(system, tools)
    prefixes = []
    for message in out:
        prefixes.append(running.hexdigest())
        running.update(hashed(message))
    prefixes.append(running.hexdigest())
    return out, prefixes
