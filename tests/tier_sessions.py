"""Test-only: long generated sessions (no database) and a replay that runs the tiers as an agent would.

``generated_session(turns)`` is deterministic: each turn is a user direction, a few assistant steps with
finished tool calls (reads, shell commands, edits; outputs of a few hundred to a few thousand estimated
tokens) and a closing assistant text. ``replay`` appends a history one message at a time, running the tiers
before each model call (after every message), and records the view size.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from brutus.models import Message, MessageTime, MessageWithParts, TextPart, ToolPart, ToolState, ToolTime
from brutus.summarizers import ExtractiveSummarizer
from brutus.tiers import TierConfig, apply_tiers, tier_view, view_tokens

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
    history: list[MessageWithParts] = field(default_factory=list)


def replay(
    messages: Sequence[MessageWithParts],
    config: TierConfig,
    *,
    prepare: Callable[[list[MessageWithParts]], list[MessageWithParts]] = list,
    window: int = 20,
) -> Replay:
    """Append ``messages`` one by one; after each, run the tiers (extractive summarizer) over
    ``prepare(history)`` and record the view. ``prepare`` stands for what the store would load
    (``filter_compacted``)."""
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
        history, _ = apply_tiers(prepare(history), summarizer, config, clock=lambda: next(clock))
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
