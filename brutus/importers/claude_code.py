"""Claude Code session JSONL → a brutus session (and one child session per sub-agent sidechain).

Rules:

- One file is one session, id ``ses_<sessionId>`` (a file with only ``summary`` lines makes none), created at
  its first message and updated at its latest activity (each child likewise). Lines are taken in file order
  (the ``uuid`` / ``parentUuid`` chain of each line is kept in its message's ``metadata["claude_code"]``). Message and part ids are derived from the line uuids and tool call ids,
  prefixed with the session's first 8 characters, so they are stable across imports and do not clash with
  a resumed session that copied the same lines.
- Importing a file again after it grew brings the session up to date (``brutus.importers.grown``).
- A user line becomes a user message with its text (and image → file) blocks; ``isMeta`` lines are
  ``synthetic``. Its ``tool_result`` blocks are not a message: each completes the tool part of the
  ``tool_use`` it names (``is_error`` → an ``error`` state), with the line's ``toolUseResult`` as the
  state's ``metadata["claude_code"]``. A ``tool_use`` no result answers stays ``running``.
- Assistant lines that share ``message.id`` are one message: their blocks become parts in order (text →
  text, thinking → reasoning with its signature, tool_use → tool) and the usage is counted once, from the
  last line (each streamed line repeats the input and cache counts; output_tokens grows). ``finish`` comes
  from ``stop_reason`` (end_turn → stop, tool_use → tool-calls, max_tokens → length, another reason as it
  is); when no line has one, it is tool-calls if the message called tools, else stop. An assistant
  message's parent is the last user message before it.
- A compaction (an ``isCompactSummary`` user line, after a ``compact_boundary`` system line when there is
  one) becomes a user message holding a ``compaction`` part and an assistant summary message (summary,
  finish "stop", mode and agent "compaction", its parent that user message, the summary as text), so that
  ``filter_compacted`` starts there. The part is ``auto`` unless the boundary's trigger says "manual" or a
  ``/compact`` command follows the summary.
- ``isSidechain`` lines (a Task sub-agent) go into a child session per sidechain root, parent the main
  session, titled by the Task call whose prompt opened it.
- Other system lines (e.g. "Claude Opus 4 limit reached") are kept as ``notices`` in the metadata of the
  message before them; ``summary`` lines only name the session when their ``leafUuid`` is in the file; other
  line types (snapshots, queue operations) are not conversation and are skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import ImportFormatError
from .base import Document, Importer
from .claude_code_builder import NAMESPACE, SessionBuilder, ToolResult, blocks, derived_id
from .fields import JSON
from .grown import bring_up_to_date
from .plan import ImportedSession, SessionExists, history_times

__all__ = ["NAMESPACE", "Chain", "ClaudeCodeImporter", "build_chains", "plan_claude_code", "task_calls"]

_CONVERSATION = ("user", "assistant", "system")
_ENTRY_KEYS = frozenset(("uuid", "sessionId", "leafUuid"))

Entry = tuple[int, JSON]


class ClaudeCodeImporter(Importer):
    """A Claude Code session file: JSON Lines, some line an entry (a ``type`` with ``uuid``, ``sessionId`` or
    ``leafUuid``). Its transcripts grow: importing one again brings its sessions up to date."""

    name = "claude-code"
    reads = "json-lines"
    describes = "a Claude Code session entry (a 'type' with 'uuid' or 'sessionId')"
    update = staticmethod(bring_up_to_date)

    def detect(self, data: tuple[Entry, ...]) -> bool:
        return any(isinstance(entry.get("type"), str) and not _ENTRY_KEYS.isdisjoint(entry) for _, entry in data)

    def plan(self, document: Document, *, exists: SessionExists) -> list[ImportedSession]:
        return plan_claude_code(list(document.data), name=document.name)


def plan_claude_code(entries: list[Entry], *, name: str) -> list[ImportedSession]:
    """The main session and its sidechain children described by a file's numbered lines."""
    conversation = [(n, e) for n, e in entries if e.get("type") in _CONVERSATION]
    if not conversation:
        return []
    for number, entry in conversation:
        for key in ("uuid", "parentUuid"):
            if entry.get(key) is not None and not isinstance(entry[key], str):
                raise ImportFormatError(f"{name}: line {number}: {key} must be a string")
    session_uuid = next((e["sessionId"] for _, e in conversation if isinstance(e.get("sessionId"), str)), None)
    if session_uuid is None:
        raise ImportFormatError(f"{name}: no line names its sessionId")
    main_id = derived_id("ses", session_uuid)
    tag = re.sub(r"[^A-Za-z0-9]", "", session_uuid)[:8] or "cc"
    uuids = {e.get("uuid") for _, e in conversation}
    summaries = {
        e["leafUuid"]: e.get("summary")
        for _, e in entries
        if e.get("type") == "summary" and isinstance(e.get("leafUuid"), str)
    }
    title = next((t for leaf, t in summaries.items() if leaf in uuids and isinstance(t, str)), None)
    tasks = task_calls(conversation)
    sessions: list[ImportedSession] = []
    for chain in build_chains(conversation, name=name, tag=tag):
        builder = chain.builder
        session_id = main_id if chain.root is None else derived_id("ses", session_uuid, chain.root[:8])
        cwd = (chain.lines or conversation)[0][1].get("cwd")
        history = builder.history(session_id=session_id)
        created, updated = history_times(history)
        sessions.append(
            ImportedSession(
                id=session_id,
                title=(title if chain.root is None else tasks.get(builder.first_prompt or "")) or builder.title(),
                directory=cwd if isinstance(cwd, str) else None,
                parent_id=None if chain.root is None else main_id,
                history=history,
                created_at=created,
                updated_at=updated,
            )
        )
    return sessions


@dataclass(frozen=True)
class Chain:
    """One session's lines, built: the main chain (``root`` None) or a sidechain (its root line's uuid)."""

    root: str | None
    lines: list[Entry]
    builder: SessionBuilder


def build_chains(conversation: list[Entry], *, name: str, tag: str, single_chain: bool = False) -> list[Chain]:
    """The conversation lines (uuids checked) built into one chain per session, the main chain first.
    ``single_chain``: every line into one chain, ``isSidechain`` or not (a sub-agent's own transcript)."""
    results = _tool_results(conversation)
    groups = {None: conversation} if single_chain else _by_chain(conversation)
    chains = []
    for root, lines in groups.items():
        builder = SessionBuilder(name=name, tag=tag, results=results)
        for number, entry in lines:
            builder.add(number, entry)
        chains.append(Chain(root, lines, builder))
    return chains


# -- the file as a whole ---------------------------------------------------------------------------------


def _tool_results(conversation: list[Entry]) -> dict[str, ToolResult]:
    """Every tool_result block by the tool_use id it answers (the first one, if a call got two)."""
    found: dict[str, ToolResult] = {}
    for number, entry in conversation:
        if entry.get("type") != "user":
            continue
        for block in blocks(entry):
            if block.get("type") == "tool_result" and isinstance(block.get("tool_use_id"), str):
                found.setdefault(block["tool_use_id"], ToolResult(block, entry, number))
    return found


def _by_chain(conversation: list[Entry]) -> dict[str | None, list[Entry]]:
    """Lines grouped by session: ``None`` for the main chain, a sidechain's root uuid for each sub-agent."""
    sidechain = {e.get("uuid"): e for _, e in conversation if e.get("isSidechain")}
    roots: dict[str, str] = {}

    def root_of(uuid: str) -> str:
        seen = []
        current = uuid
        while current not in roots:
            seen.append(current)
            parent = sidechain[current].get("parentUuid")
            if parent not in sidechain or parent in seen:
                roots[current] = current
                break
            current = parent
        for item in seen:
            roots[item] = roots[current]
        return roots[uuid]

    groups: dict[str | None, list[Entry]] = {None: []}
    for number, entry in conversation:
        key = root_of(entry["uuid"]) if entry.get("isSidechain") and isinstance(entry.get("uuid"), str) else None
        groups.setdefault(key, []).append((number, entry))
    return groups


def task_calls(conversation: list[Entry]) -> dict[str, str]:
    """Task tool calls: their prompt → their description (the title of the sidechain they started)."""
    found: dict[str, str] = {}
    for _, entry in conversation:
        if entry.get("type") != "assistant":
            continue
        for block in blocks(entry):
            tool_input = block.get("input")
            if block.get("type") == "tool_use" and isinstance(tool_input, dict):
                prompt, description = tool_input.get("prompt"), tool_input.get("description")
                if isinstance(prompt, str) and isinstance(description, str):
                    found[prompt] = description
    return found
