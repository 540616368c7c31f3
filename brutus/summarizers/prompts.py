"""The words a model summarizer is given: seed 004's summary agent and ADR-0041's episodic tier prompts.

- ``compaction``: system ``COMPACTION_SYSTEM_PROMPT`` (seed 004's compaction agent); the conversation as
  messages; a final user message with the previous summary (when the history does not already hold it),
  ``DEFAULT_SUMMARY_PROMPT`` (seed 004), then ``Additional instructions: …`` (seed 002) when given.
- ``tool_call`` / ``threshold``: system ``EPISODIC_SYSTEM_PROMPT`` (ADR-0040's framing, quoted in ADR-0041);
  the span as messages; a final user message asking for one ``[SUMMARIZED]`` block in ``SUMMARIZED_SECTIONS``.
- ``goal_batch``: system ``EPISODIC_SYSTEM_PROMPT``; one user message: ADR-0041's prompt with the six
  ``GOAL_BATCH_SECTIONS`` and the turns as the ADR's transcript (``--- Turn N ---``, ``[user]: …``,
  ``[SUMMARIZED]: …``), so the model sees where each turn starts.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ..models import CompactionPart, MessageWithParts, TextPart, ToolPart
from ..render import part_text, tool_result
from .base import SummaryKind, SummaryRequest

__all__ = [
    "COMPACTION_SYSTEM_PROMPT",
    "DEFAULT_SUMMARY_PROMPT",
    "EPISODIC_SYSTEM_PROMPT",
    "GOAL_BATCH_PROMPT",
    "GOAL_BATCH_SECTIONS",
    "GOAL_BATCH_TAG",
    "SUMMARIZED_SECTIONS",
    "SUMMARIZED_TAG",
    "THRESHOLD_PROMPT",
    "TOOL_CALL_PROMPT",
    "goal_batch_transcript",
    "message_text",
    "previous_summary_in_history",
    "summary_prompt",
    "system_prompt",
]

# -- seed 004: the compaction agent ----------------------------------------------------------------------

COMPACTION_SYSTEM_PROMPT = """Provide a detailed but concise summary of the conversation.

Capture:
- Completed actions and current work in progress
- Modified files and technical decisions with rationale
- Upcoming tasks and user-specific requirements or constraints
- Persistent preferences affecting the conversation

Balance: Comprehensive enough to provide context but concise enough to be quickly understood."""

DEFAULT_SUMMARY_PROMPT = """Provide a detailed prompt for continuing our conversation above.
Focus on information that would be helpful for continuing the conversation,
including what we did, what we're doing, which files we're working on,
and what we're going to do next considering new session will not have
access to our conversation."""

# -- ADR-0040/0041: episodic memory tiers ----------------------------------------------------------------

EPISODIC_SYSTEM_PROMPT = """You are writing episodic memory for an AI coding agent. Your output will be injected
directly into the agent's context window as its own recalled experience. Write entirely
in operational first-person. Uncertainty markers are forbidden. Be dense, exact, and technical.
Preserve every concrete artifact. Omit XML markup, role labels, conversational filler,
and hedging language."""

SUMMARIZED_TAG = "[SUMMARIZED]"
GOAL_BATCH_TAG = "[GOAL BATCH]"

SUMMARIZED_SECTIONS: tuple[tuple[str, str], ...] = (
    ("Context", "The instruction or sub-goal I was acting on."),
    ("Actions", "What I did and what it showed: 'I ran X: result Y', 'I read P: found Z', 'I edited P: changed Z'."),
    ("Errors", "Failures and dead ends: 'I tried X: it failed with E'."),
    ("Result", "Where the work stands at the end of this span, and the next step if I had planned one."),
)

GOAL_BATCH_SECTIONS: tuple[tuple[str, str], ...] = (
    ("Goal Arc", "What was being worked on. How the goal evolved across turns if the user redirected."),
    ("Human Direction", "Key instructions, corrections, constraints the user introduced mid-arc. Preserves\n"
                        "the user's actual intent as it developed."),
    ("What Was Achieved", "Concrete outcomes: what is now in place, what passed, what was completed."),
    ("Dead Ends", "Approaches tried and abandoned across the arc. First-person lessons: "
                  "'I tried X — abandoned because Y.'"),
    ("Lasting Constraints", "Anything from this arc that still applies to future work."),
    ("Key Artifacts", "Exact file paths, function names, error strings, test names."),
)


def _structure(tag: str, sections: Sequence[tuple[str, str]]) -> str:
    return "\n\n".join([tag] + [f"## {name}\n[{what}]" for name, what in sections])


_SUMMARIZED_RULES = f"""Write one {SUMMARIZED_TAG} block that replaces these messages in my context. Start with the
line {SUMMARIZED_TAG} and use the sections below; omit a section with nothing meaningful to say.

{_structure(SUMMARIZED_TAG, SUMMARIZED_SECTIONS)}

MUST PRESERVE: exact file paths, function names, commands, error strings, test names, numbers.
MUST NOT INCLUDE: raw tool output beyond the lines that matter, repeated reads, intermediate states that
were overwritten.
MUST USE: first-person throughout ('I ran', 'I found', 'I changed') — never 'the agent'."""

TOOL_CALL_PROMPT = f"""The messages above are a span of my own recent past: tool calls I made and what they
returned. {_SUMMARIZED_RULES}"""

THRESHOLD_PROMPT = f"""The messages above are a span of my own earlier work in this session: my replies and the
tool calls I made while acting on the user's instruction. {_SUMMARIZED_RULES}"""

GOAL_BATCH_PROMPT = f"""The following is a sequence of complete turns from your own recent past. Each turn is
a user instruction followed by your execution summary. Together they represent a goal arc —
the user's intent may have evolved across turns through redirections and clarifications.

Write a {GOAL_BATCH_TAG} summary using the six-section structure below. The user's direction
changes are first-class content — preserve them in Human Direction. Dead ends from any
turn in the arc belong in Dead Ends. Constraints introduced at any point in the arc
belong in Lasting Constraints. Omit a section with nothing meaningful to say.

{_structure(GOAL_BATCH_TAG, GOAL_BATCH_SECTIONS)}

MUST PRESERVE: user intent and mid-arc redirections, dead ends, lasting constraints,
key artifacts (file paths, function names, error strings, test names).
MUST NOT INCLUDE: operational detail superseded within the arc, tool call mechanics,
intermediate states that were overwritten.
MUST USE: first-person throughout ('I tried', 'I found', 'I abandoned') — never 'the agent'."""

_TIER_PROMPTS: dict[str, str] = {"tool_call": TOOL_CALL_PROMPT, "threshold": THRESHOLD_PROMPT}
_TRANSCRIPT_TOOL_CHARS = 1_000


def system_prompt(kind: SummaryKind) -> str:
    """The system prompt for a kind of summary."""
    return COMPACTION_SYSTEM_PROMPT if kind == "compaction" else EPISODIC_SYSTEM_PROMPT


# -- reading a history -----------------------------------------------------------------------------------


def message_text(message: MessageWithParts) -> str:
    """The message's text parts (not ignored), joined by blank lines and stripped."""
    texts = [part.text for part in message.parts if isinstance(part, TextPart) and not part.ignored]
    return "\n\n".join(text.strip() for text in texts if text.strip())


def previous_summary_in_history(history: Sequence[MessageWithParts], previous: str) -> bool:
    """Whether a summary message of ``history`` already says ``previous`` (so it is not sent twice)."""
    wanted = previous.strip()
    return any(
        message.info.role == "assistant" and message.info.summary and message_text(message) == wanted
        for message in history
    )


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]} [… {len(text) - limit} more characters]"


def _transcript_lines(message: MessageWithParts) -> list[str]:
    if message.info.role == "user":
        texts = [part_text(part) for part in message.parts if not isinstance(part, (CompactionPart, ToolPart))]
        body = "\n\n".join(text.strip() for text in texts if text and text.strip())
        return [f"[user]: {body}"] if body else []
    lines: list[str] = []
    for part in message.parts:
        if isinstance(part, TextPart) and not part.ignored and part.text.strip():
            text = part.text.strip()
            if text.startswith(SUMMARIZED_TAG):
                lines.append(f"{SUMMARIZED_TAG}: {text[len(SUMMARIZED_TAG):].strip()}")
            elif message.info.summary:
                lines.append(f"{SUMMARIZED_TAG}: {text}")
            else:
                lines.append(f"[assistant]: {text}")
        elif isinstance(part, ToolPart):
            arguments = json.dumps(part.state.input, ensure_ascii=False, sort_keys=True)
            result, is_error = tool_result(part.state)
            label = "error" if is_error else "result"
            lines.append(f"[tool {part.tool}]: {_cut(arguments, _TRANSCRIPT_TOOL_CHARS)}")
            lines.append(f"[{label}]: {_cut(result.strip(), _TRANSCRIPT_TOOL_CHARS)}")
    return lines


def goal_batch_transcript(history: Sequence[MessageWithParts]) -> str:
    """The ADR-0041 transcript: a ``--- Turn N ---`` header at each user instruction, then its lines."""
    turns: list[list[str]] = []
    for message in history:
        lines = _transcript_lines(message)
        if not lines:
            continue
        if not turns or lines[0].startswith("[user]: "):
            turns.append([])
        turns[-1].extend(lines)
    return "\n\n".join(f"--- Turn {n} ---\n" + "\n".join(lines) for n, lines in enumerate(turns, 1))


# -- the final user message ------------------------------------------------------------------------------


def _previous_block(request: SummaryRequest) -> str | None:
    previous = (request.previous_summary or "").strip()
    if not previous or previous_summary_in_history(request.history, previous):
        return None
    return f"The conversation continues from this earlier summary:\n<previous_summary>\n{previous}\n</previous_summary>"


def summary_prompt(request: SummaryRequest, *, transcript: bool = True) -> str:
    """The text of the user message that ends the summarizer's request (for ``goal_batch``, the whole input;
    ``transcript=False`` leaves its turns out, to estimate the prompt apart from the history)."""
    if request.kind == "goal_batch":
        pieces = [GOAL_BATCH_PROMPT]
    elif request.kind == "compaction":
        pieces = [DEFAULT_SUMMARY_PROMPT]
    else:
        pieces = [_TIER_PROMPTS[request.kind]]
    previous = _previous_block(request)
    if previous:
        pieces.insert(0, previous)
    instructions = (request.instructions or "").strip()
    if instructions:
        pieces.append(f"Additional instructions: {instructions}")
    if request.kind == "goal_batch" and transcript:
        pieces.append("Turns to compact:\n\n" + (goal_batch_transcript(request.history) or "(none)"))
    return "\n\n".join(pieces)
