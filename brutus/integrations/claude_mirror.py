"""Parsing a Claude Agent SDK transcript into brutus messages as its entries arrive, with the Claude Code
importer's mapping (``brutus.importers.claude_code``), so the session reads as ``brutus import`` of the file.

Rules:

- The mirror is the importer's plan of the transcript's lines, kept current by re-planning a window: the
  lines from the last *cut* on. A cut is a main-chain user line that starts a message, after at least one
  other, with every tool call before it answered before it and no compaction open (a boundary or summary
  since the last assistant line): what the importer makes of the lines after such a line does not depend on
  those before it, so the messages before it are settled and never touched again. The window is about one
  turn; the lines before it are not read.
- Each append re-plans the window and compares the planned messages with the ones written from it (their
  fingerprints, kept in the transcript's state): the first that differs and everything after it are
  rewound and appended again (``store.rewind``), so a message still arriving (streamed assistant lines,
  tool results, a boundary waiting for its summary) is replaced whole. Ids are derived from the line uuids
  (``TranscriptKey.tag``), so a message keeps its id.
- If something else appended to the session after a message the mirror wrote (``brutus compact``, a hand
  written message), that message is not rewound: only its tool results are applied to it (``update_tool``).
- A subpath transcript (a sub-agent) is one chain, whatever ``isSidechain`` says; in a main transcript each
  sidechain becomes a child session, as in the importer.
- The title is the importer's (a ``summary`` line naming a line of the transcript, else the first prompt),
  the directory the first line's ``cwd``. A line the importer would refuse (no timestamp, content that is
  not text or blocks) is kept in the entries but left out of the messages.
- Known deviation from importing the file: an assistant line reusing the message id of a message before the
  last cut starts a message of its own, where the importer would merge the two.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from pydantic_core import PydanticSerializationError

from ..errors import ImportFormatError, InvalidTransition, NotFound
from ..importers.claude_code import build_chains, task_calls
from ..importers.claude_code_builder import blocks, derived_id, entry_time, line_uuid
from ..importers.plan import ImportedSession
from ..models import MessageWithParts
from .transcripts import JSON, NewEntry, TranscriptKey

__all__ = ["MirrorState", "WindowPlan", "find_cut", "fingerprint", "plan_window", "projectable", "reconcile"]

CONVERSATION = ("user", "assistant", "system")


@dataclass
class MirrorState:
    """What the mirror remembers between appends (the transcript's ``state`` column)."""

    cut: int = 1  # the entry seq the window starts at
    main: list[list[Any]] = field(default_factory=list)  # [message id, seq, fingerprint] written from the window
    children: dict[str, dict[str, Any]] = field(default_factory=dict)  # sidechain session → written, title, last
    first_prompt: str | None = None
    directory: str | None = None
    applied: list[str | None] = field(default_factory=lambda: [None, None])  # title and directory set on the session
    summaries: list[list[Any]] = field(default_factory=list)  # [leafUuid, summary] of summary lines, in order
    error: str | None = None  # why the last re-plan failed (the next append tries again)

    @classmethod
    def from_json(cls, value: Any) -> MirrorState:
        if not isinstance(value, dict):
            return cls()
        state = cls(**value)
        state.applied = list(state.applied)
        return state

    def to_json(self) -> JSON:
        return dict(self.__dict__)

    def note_summaries(self, entries: list[NewEntry]) -> None:
        """Remember the new ``summary`` lines as the importer reads them: by leaf, first place, last value."""
        places = {leaf: index for index, (leaf, _) in enumerate(self.summaries)}
        for new in entries:
            leaf = new.entry.get("leafUuid")
            if new.entry.get("type") != "summary" or not isinstance(leaf, str):
                continue
            if leaf in places:
                self.summaries[places[leaf]][1] = new.entry.get("summary")
            else:
                places[leaf] = len(self.summaries)
                self.summaries.append([leaf, new.entry.get("summary")])


@dataclass(frozen=True)
class WindowPlan:
    main: list[MessageWithParts]
    children: list[tuple[ImportedSession, int]]  # each sidechain session with the seq of its last line
    first_prompt: str | None
    directory: str | None  # the first main-chain line's cwd
    cut: int | None  # the last cut after the window's start
    cut_message: str | None  # the id of the message the cut line starts


def plan_window(lines: list[NewEntry], key: TranscriptKey) -> WindowPlan:
    """The importer's plan of the window's conversation lines (``ImportFormatError`` if it refuses them)."""
    conversation = [(line.seq, line.entry) for line in lines if projectable(line.entry)]
    name = f"claude-agent-sdk transcript {key.project_key}/{key.external_id}{'/' + key.subpath if key.subpath else ''}"
    chains = build_chains(conversation, name=name, tag=key.tag, single_chain=bool(key.subpath))
    main = chains[0]
    tasks = task_calls(conversation)
    children = []
    for chain in chains[1:]:
        assert chain.root is not None
        child_id = derived_id("ses", key.tag, chain.root[:8])
        cwd = chain.lines[0][1].get("cwd")
        session = ImportedSession(
            id=child_id,
            title=tasks.get(chain.builder.first_prompt or "") or chain.builder.title(),
            directory=cwd if isinstance(cwd, str) else None,
            parent_id=key.session_id,
            history=chain.builder.history(session_id=child_id),
        )
        children.append((session, chain.lines[-1][0]))
    cwd = main.lines[0][1].get("cwd") if main.lines else None
    cut = find_cut(conversation, single_chain=bool(key.subpath))
    cut_message = None
    if cut is not None:
        entry = next(e for seq, e in conversation if seq == cut)
        cut_message = derived_id("msg", key.tag, line_uuid(entry, cut))
    return WindowPlan(
        main=main.builder.history(session_id=key.session_id),
        children=children,
        first_prompt=main.builder.first_prompt,
        directory=cwd if isinstance(cwd, str) else None,
        cut=cut,
        cut_message=cut_message,
    )


def find_cut(conversation: list[tuple[int, JSON]], *, single_chain: bool) -> int | None:
    """The seq of the last line in ``conversation`` after which re-planning alone gives the same messages."""
    open_calls: set[str] = set()
    compaction_open = False
    seen_message = False
    cut = None
    for seq, entry in conversation:
        kind = entry["type"]
        main = single_chain or not entry.get("isSidechain")
        if kind == "user" and main and not entry.get("isCompactSummary") and _starts_message(entry):
            if seen_message and not open_calls and not compaction_open:
                cut = seq
            seen_message = True
        for block in blocks(entry):
            if kind == "assistant" and block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                open_calls.add(block["id"])
            elif kind == "user" and block.get("type") == "tool_result" and isinstance(block.get("tool_use_id"), str):
                open_calls.discard(block["tool_use_id"])
        if main and kind == "assistant":
            compaction_open = False
        elif main and (entry.get("isCompactSummary") if kind == "user" else entry.get("subtype") == "compact_boundary"):
            compaction_open = True
    return cut


def _starts_message(entry: JSON) -> bool:
    content = entry["message"]["content"]
    return isinstance(content, str) or any(block.get("type") != "tool_result" for block in content)


def projectable(entry: JSON) -> bool:
    """Whether the importer takes this line (a conversation line of the shape it reads)."""
    kind = entry.get("type")
    if kind not in CONVERSATION:
        return False
    if any(entry.get(k) is not None and not isinstance(entry[k], str) for k in ("uuid", "parentUuid")):
        return False
    if kind == "system":
        return entry.get("subtype") != "compact_boundary" or _has_time(entry)
    message = entry.get("message")
    if not isinstance(message, dict) or not _has_time(entry):
        return False
    content = message.get("content")
    if isinstance(content, str):
        return True
    if not isinstance(content, list) or not all(isinstance(block, dict) for block in content):
        return False
    return all(
        isinstance(block.get("input") or {}, dict) for block in content if block.get("type") == "tool_use"
    )


def _has_time(entry: JSON) -> bool:
    try:
        return 0 <= entry_time(entry, "") < 2**63
    except ImportFormatError:
        return False


def fingerprint(message: MessageWithParts) -> str:
    """A digest of everything the message says (to tell whether a re-plan changed it)."""
    try:
        text = message.model_dump_json().encode("utf-8")
    except PydanticSerializationError:  # a lone surrogate, which JSON cannot encode
        text = repr(message.model_dump()).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(text, digest_size=12).hexdigest()


async def reconcile(
    store: Any, session_id: str, planned: list[MessageWithParts], written: list[list[Any]]
) -> list[list[Any]]:
    """Make the session's messages written from the window match ``planned``; the new ``written``."""
    prints = [fingerprint(message) for message in planned]
    written = [list(w) for w in written]
    same = 0
    while same < min(len(written), len(planned)) and written[same][::2] == [planned[same].info.id, prints[same]]:
        same += 1
    if same < len(written):
        last = (await store.get_session(session_id)).message_count
        tail = len(written)  # written[tail:] are the session's last messages, all the mirror's: replaceable
        while tail > same and written[tail - 1][1] == last - (len(written) - tail):
            tail -= 1
        for index in range(same, min(tail, len(planned))):  # followed by messages written by someone else
            await _apply_tool_results(store, planned[index])
            written[index] = [planned[index].info.id, written[index][1], prints[index]]
        if tail < len(written):
            await store.rewind(session_id, written[tail][0])
            del written[tail:]
    new = planned[len(written) :]
    if new:
        for message in await store.append_messages(session_id, new):
            written.append([message.info.id, message.info.seq, prints[len(written)]])
    return written


async def _apply_tool_results(store: Any, message: MessageWithParts) -> None:
    """The finished tool calls of a message that cannot be rewound, applied to it in place."""
    for part in message.parts:
        if part.type != "tool" or part.state.status not in ("completed", "error"):
            continue
        state = part.state
        try:
            await store.update_tool(part.id, status="running")
        except (InvalidTransition, NotFound):
            pass
        try:
            await store.update_tool(
                part.id, status=state.status, output=state.output, error=state.error, metadata=state.metadata
            )
        except (InvalidTransition, NotFound):
            pass
