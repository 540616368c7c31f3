"""Test-only: long generated sessions (no database) and a replay that runs the tiers as an agent would.

``generated_session(turns)`` is deterministic: each turn is a user direction, a few assistant steps with
finished tool calls (reads, shell commands, edits; outputs of a few hundred to a few thousand estimated
tokens) and a closing assistant text. ``replay`` appends a history one message at a time, running the tiers
before each model call (after every message), and records the view size; given ``compact_at``, it also runs
the prefix compaction (``compact``: what ``store.compact`` appends, in memory) whenever the view is larger,
as an agent does at its context threshold. ``goal_arc_turns`` describes the session of issue 24 (goal arcs:
a direction naming a file and a format, two ~6 KB tool outputs, a reply); ``write_goal_arcs`` writes it
through the public store API. ``goal_batch_figures`` measures every goal batch of a history: the turns it
covers, its size against the view it replaced, the share of the directions' words it kept, its sections.
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from brutus.compaction import plan
from brutus.history import filter_compacted
from brutus.models import (
    CompactionConfig,
    CompactionPart,
    Message,
    MessageTime,
    MessageWithParts,
    TextPart,
    ToolPart,
    ToolState,
    ToolTime,
)
from brutus.summarizers import ExtractiveSummarizer, SummaryRequest
from brutus.tiers import DEFAULT_STRATEGIES, Strategy, TierConfig, apply_tiers, tier_view
from brutus.tiers.view import view_tokens

SESSION = "ses_generated"
_WORDS = "config loader yaml validation parser cache retry schema migration index query token budget".split()


def _message(id: str, role: str, seq: int, parts: list, parent: str | None = None) -> MessageWithParts:
    info = Message(id=id, session_id=SESSION, seq=seq, role=role, parent_id=parent, time=MessageTime(created=seq),
                   finish="stop" if role == "assistant" else None)
    return MessageWithParts(info=info, parts=parts)


def _tool(call_id: str, rng: random.Random, turn: int) -> ToolPart:
    kind = rng.choice(["read", "bash", "edit"])
    path = f"src/{rng.choice(_WORDS)}_{turn % 17}.py"
    arguments = {"command": f"pytest -q tests/test_{rng.choice(_WORDS)}.py"} if kind == "bash" else {"filePath": path}
    output = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(150, 2_400)))  # ~1.3K-21K bytes
    return ToolPart(id=f"prt_{call_id}", call_id=call_id, tool=kind,
                    state=ToolState(status="completed", input=arguments, output=output, time=ToolTime(start=1, end=2)))


def generated_session(turns: int, *, seed: int = 7) -> list[MessageWithParts]:
    rng = random.Random(seed)
    seq = itertools.count(1)
    history: list[MessageWithParts] = []
    for turn in range(turns):
        user_id = f"msg_u{turn:04d}"
        goal = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(8, 40)))
        history.append(_message(user_id, "user", next(seq), [TextPart(text=f"Turn {turn}: make the {goal} work; never break the API")]))
        for step in range(rng.choice([0, 1, 2, 3, 4])):
            calls = [_tool(f"call_{turn}_{step}_{n}", rng, turn) for n in range(rng.randint(1, 3))]
            history.append(_message(f"msg_a{turn:04d}_{step}", "assistant", next(seq),
                                    [TextPart(text=f"Checking the {rng.choice(_WORDS)} next."), *calls], parent=user_id))
        answer = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(20, 120)))
        history.append(_message(f"msg_a{turn:04d}_end", "assistant", next(seq), [TextPart(text=f"Done: {answer}.")], parent=user_id))
    return history


@dataclass
class Replay:
    """The view size (estimated tokens and messages) after each appended message, with and without tiers."""

    plain_tokens: list[int] = field(default_factory=list)
    tiered_tokens: list[int] = field(default_factory=list)
    tiered_messages: list[int] = field(default_factory=list)
    old_tokens: list[int] = field(default_factory=list)  # the view but its newest ``window`` messages
    turn_ends: list[int] = field(default_factory=list)  # index into the lists where each user turn starts
    compactions: list[int] = field(default_factory=list)  # index into the lists where a compaction ran
    history: list[MessageWithParts] = field(default_factory=list)  # as loaded at the end (``prepare``)
    everything: list[MessageWithParts] = field(default_factory=list)  # every message, summary and compaction, in order


def compact(history: Sequence[MessageWithParts], config: CompactionConfig | None = None) -> list[MessageWithParts]:
    """``history`` with a completed compaction appended, as ``store.compact`` writes it (extractive summary of
    the tier view of the head, seed 004's boundary, the kept tail before it), without a database."""
    config = config or CompactionConfig()
    prepared = plan.prepare(filter_compacted(history), config, now=0)
    request = SummaryRequest(history=tier_view(prepared.head), previous_summary=prepared.previous_summary,
                             max_tokens=config.summary_max_tokens)
    text = ExtractiveSummarizer().summarize(request).text
    seq = max(m.info.seq for m in history) + 1
    marker_id = f"msg_c{seq:06d}"
    tail = prepared.tail[0].info.id if prepared.tail else None
    marker = _message(marker_id, "user", seq, [CompactionPart(auto=True, tail_start_id=tail)])
    info = Message(id=f"msg_s{seq:06d}", session_id=SESSION, seq=seq + 1, role="assistant", parent_id=marker_id,
                   summary=True, finish="stop", agent="compaction", time=MessageTime(created=seq + 1))
    return [*history, marker, MessageWithParts(info=info, parts=[TextPart(text=text)])]


def replay(
    messages: Sequence[MessageWithParts],
    config: TierConfig,
    *,
    prepare: Callable[[list[MessageWithParts]], list[MessageWithParts]] = list,
    window: int = 20,
    compact_at: int | None = None,
    strategies: Sequence[Strategy] = DEFAULT_STRATEGIES,
) -> Replay:
    """Append ``messages`` one by one; after each, run the tiers (extractive summarizer) over
    ``prepare(history)`` and record the view. ``prepare`` stands for what the store would load
    (``filter_compacted``, which ``compact_at`` needs); given ``compact_at``, a view larger than that is
    compacted (``compact``) before it is recorded. ``strategies`` are the tiers run (none: no tiers)."""
    summarizer = ExtractiveSummarizer()
    clock = itertools.count(1_800_000_000_000)
    result = Replay()
    history: list[MessageWithParts] = []
    plain: list[MessageWithParts] = []
    for message in messages:
        if message.info.role == "user":
            result.turn_ends.append(len(result.plain_tokens))
        history.append(message)
        plain.append(message)
        result.everything.append(message)
        loaded = prepare(history)
        history, _ = apply_tiers(loaded, summarizer, config, strategies=strategies, clock=lambda: next(clock))
        result.everything += history[len(loaded) :]
        view = tier_view(history)
        if compact_at is not None and view_tokens(view) > compact_at:
            result.compactions.append(len(result.plain_tokens))
            compacted = compact(history)
            result.everything += compacted[len(history) :]
            history = prepare(compacted)
            view = tier_view(history)
        result.plain_tokens.append(view_tokens(prepare(plain)) if prepare is not list else
                                   (result.plain_tokens[-1] if result.plain_tokens else 0) + view_tokens([message]))
        result.tiered_tokens.append(view_tokens(view))
        result.tiered_messages.append(len(view))
        result.old_tokens.append(view_tokens(view[: max(0, len(view) - window)]))
    result.history = history
    return result


def tier_summary(
    id: str,
    kind: str,
    from_id: str,
    to_id: str,
    *,
    turn_count: int = 1,
    text: str | None = None,
    finish: str | None = "stop",
    **metadata: object,
) -> MessageWithParts:
    """A hand-written tier summary message covering ``from_id`` … ``to_id`` (in-memory, seq 0)."""
    tag = "[GOAL BATCH]" if kind == "goal_batch" else "[SUMMARIZED]"
    data = {"summarized": True, "summary_type": kind, "turn_count": turn_count,
            "covers": {"from_id": from_id, "to_id": to_id, "from_seq": 0, "to_seq": 0}, **metadata}
    info = Message(id=id, session_id=SESSION, role="assistant", finish=finish, synthetic=True, metadata=data,
                   time=MessageTime(created=1))
    return MessageWithParts(info=info, parts=[TextPart(text=text or f"{tag}\n{kind} {from_id}..{to_id}")])


# -- issue 24: a session of goal arcs ----------------------------------------------------------------------------

_FORMATS = ["yaml", "json", "toml", "csv", "xml", "parquet"]
_MODULES = ["config", "loader", "schema", "report", "export", "parser", "cache", "index"]
_ASKS = ["make {path} write {fmt}", "switch {path} over to {fmt}", "now have {path} emit {fmt} as well",
         "change {path} so its output is {fmt}"]
_CONSTRAINTS = ["keep the old reader working", "do not touch the public API", "leave the fixtures alone",
                "the CLI flags must stay the same"]


@dataclass(frozen=True)
class GoalArcTurn:
    direction: str
    path: str
    fmt: str
    reply: str


def goal_arc_turns(turns: int, *, seed: int = 24) -> list[GoalArcTurn]:
    """Issue 24's session: arcs of six turns on one format, each turn a direction naming a file and a format."""
    rng = random.Random(seed)
    found = []
    for turn in range(turns):
        path, fmt = f"src/{_MODULES[turn % len(_MODULES)]}_{turn}.py", _FORMATS[(turn // 6) % len(_FORMATS)]
        ask = rng.choice(_ASKS).format(path=path, fmt=fmt)
        direction = f"Turn {turn}: {ask}; {rng.choice(_CONSTRAINTS)}."
        found.append(GoalArcTurn(direction, path, fmt, f"I changed {path} to emit {fmt}; the tests pass."))
    return found


def write_goal_arcs(store, turns: int, *, output_bytes: int = 6_000) -> str:
    """Write ``goal_arc_turns(turns)`` through the public store API: per turn a user direction, an assistant
    message with two tool calls (a read of the file, a test run) of ``output_bytes`` each, and a reply."""
    session = store.create_session(title="goal arcs")
    with store.batch():
        for number, turn in enumerate(goal_arc_turns(turns)):
            direction = store.append_message(session.id, "user")
            store.append_part(direction.id, {"type": "text", "text": turn.direction})
            step = store.append_message(session.id, "assistant", parent_id=direction.id)
            store.append_part(step.id, {"type": "text", "text": f"Reading {turn.path} and running its tests."})
            for call, (tool, arguments) in enumerate([("read", {"filePath": turn.path}),
                                                      ("bash", {"command": f"pytest -q tests/test_{number}.py"})]):
                line = f"{turn.path}:{call}: {turn.fmt} output line\n"
                output = (line * (output_bytes // len(line) + 1))[:output_bytes]
                state = {"status": "completed", "input": arguments, "output": output,
                         "time": {"start": 1, "end": 2}}
                store.append_part(step.id, {"type": "tool", "call_id": f"call_{number}_{call}", "tool": tool, "state": state})
            store.finish_message(step.id, finish="tool-calls")
            reply = store.append_message(session.id, "assistant", parent_id=direction.id)
            store.append_part(reply.id, {"type": "text", "text": turn.reply})
            store.finish_message(reply.id, finish="stop")
    return session.id


# -- what a goal batch kept and replaced ---------------------------------------------------------------------------


@dataclass(frozen=True)
class GoalBatchFigures:
    """One ``[GOAL BATCH]`` of a history: what it covers and how it reads (see ``goal_batch_figures``)."""

    message: MessageWithParts
    turn_count: int  # its metadata
    turns: int  # user turns among the originals it covers
    size: int  # its estimate in the view
    covered_tokens: int  # its metadata: the view span it replaced
    replaced_tokens: int  # that span, measured again on the view it was cut from
    nested: int  # goal batches inside its range
    coverage: float  # direction_coverage of its text over the originals it covers
    headings: tuple[str, ...]
    empty_sections: int


def goal_batch_figures(history: Sequence[MessageWithParts]) -> list[GoalBatchFigures]:
    """Every goal batch of ``history`` (originals, tier summaries and compactions in the order written)."""
    from brutus.tiers import tier_metadata
    from brutus.tiers.turns import turn_units
    from brutus.tiers.goal_batch import direction_coverage
    from brutus.tiers.metadata import claims_tier_summary

    found = []
    for index, message in enumerate(history):
        metadata = tier_metadata(message)
        if metadata is None or metadata.summary_type != "goal_batch":
            continue
        originals = [m for m in history[:index] if not claims_tier_summary(m)]
        ids = [m.info.id for m in originals]
        covered = originals[ids.index(metadata.covers.from_id) : ids.index(metadata.covers.to_id) + 1]
        inside = {m.info.id for m in covered}
        replaced = [m for m in tier_view(history[:index]) if m.info.id in inside or
                    (tier_metadata(m) is not None and tier_metadata(m).covers.from_id in inside)]
        text = message.parts[0].text
        bodies = re.split(r"^## .*$", text, flags=re.MULTILINE)[1:]
        found.append(GoalBatchFigures(
            message=message,
            turn_count=metadata.turn_count,
            turns=sum(u.kind == "turn" for u in turn_units(covered)),
            size=view_tokens([message]),
            covered_tokens=metadata.covered_tokens,
            replaced_tokens=view_tokens(replaced),
            nested=sum(1 for m in replaced if tier_metadata(m) is not None and tier_metadata(m).summary_type == "goal_batch"),
            coverage=direction_coverage(text, covered),
            headings=tuple(re.findall(r"^## (.*)$", text, flags=re.MULTILINE)),
            empty_sections=sum(not body.strip() for body in bodies),
        ))
    return found
