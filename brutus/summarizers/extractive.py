"""``ExtractiveSummarizer``: an offline, deterministic summary built from the history's facts, no model.

What each kind writes (a section with nothing to say is left out):

- ``compaction``: a one-line header, then Previous Summary, Summarized Earlier Work (tier blocks), User
  Directions (verbatim), Files Read, Files Edited, Commands Run, Errors Seen, Last State (the newest
  assistant text) and Next Step (the newest direction, when nothing answered it).
- ``tool_call`` / ``threshold``: a ``[SUMMARIZED]`` block with Previous Summary, Context, Actions (first
  person: "I read", "I edited", "I ran"), Errors and Result, in the sections the model prompt asks for.
- ``goal_batch``: a ``[GOAL BATCH]`` block with ADR-0041's six sections; the ``[SUMMARIZED]`` blocks of the
  batch feed What Was Achieved, Dead Ends, Lasting Constraints and Key Artifacts from their own sections, and
  a previous summary opens What Was Achieved ("Earlier: …").

Custom instructions cannot steer an extractor; a compaction summary records them in a first section so the
next turn knows what the user asked the summary to focus on.

The text always fits ``request.max_tokens`` (by ``estimate_tokens``): when it would not, each list keeps
fewer of its oldest items (the first user direction is kept) and each item fewer characters, halving step by
step, and as a last resort the text is cut.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ..models import TokenCounts
from ..tokens import estimate_tokens
from .base import Summary, SummaryRequest
from .extract import HistoryFacts, history_facts
from .prompts import GOAL_BATCH_TAG, SUMMARIZED_TAG
from .text import fit_tokens, one_line, trim

__all__ = ["EXTRACTIVE_MODEL", "ExtractiveSummarizer", "extractive_summary"]

EXTRACTIVE_MODEL = "extractive"
_MAX_LEVEL = 12
_MIN_CAP = 40
_HEADING = re.compile(r"^##\s+(.+?)\s*$", re.MULTILINE)
_BACKTICKED = re.compile(r"`([^`\n]{1,200})`")
_SENTENCES = re.compile(r"(?<=[.!?])\s+|\n+")
_CONSTRAINT = re.compile(
    r"\b(must|never|always|don't|do not|should|shouldn't|should not|make sure|avoid|no longer|instead of)\b",
    re.IGNORECASE,
)
_MEMORY_SECTIONS = {
    "result": "achieved",
    "what was achieved": "achieved",
    "errors": "dead_ends",
    "dead ends": "dead_ends",
    "lasting constraints": "constraints",
    "key artifacts": "artifacts",
    "actions": "actions",
}


@dataclass
class _Section:
    heading: str
    items: list[str]
    cap: int
    listed: bool = True  # a bullet list, else one paragraph
    single_line: bool = False  # each item on one line (commands, paths, errors)
    keep_first: bool = False  # when cutting, keep the first item (the original goal)

    def render(self, level: int) -> str:
        items = [item for item in self.items if item and item.strip()]
        if not items:
            return ""
        cap = max(self.cap >> level, _MIN_CAP)
        shape: Callable[[str, int], str] = one_line if self.single_line else trim
        if not self.listed:
            return shape("\n\n".join(items), cap)
        keep = max(1, -(-len(items) // (1 << level)))
        first = items[:1] if self.keep_first and 1 < keep < len(items) else []
        newest = items[len(items) - keep + len(first) :]
        lines = [_bullet(shape(item, cap)) for item in first]
        if keep < len(items):
            lines.append(f"- ({len(items) - keep} earlier left out)")
        lines += [_bullet(shape(item, cap)) for item in newest]
        return "\n".join(lines)


def _bullet(text: str) -> str:
    """``- text``, its following lines indented under the dash (blank lines left blank)."""
    return "- " + "\n".join(f"  {line}" if line and n else line for n, line in enumerate(text.split("\n")))


def _code(value: str) -> str:
    return f"`{value}`" if "`" not in value else value


def _compaction(facts: HistoryFacts, previous: str | None) -> tuple[str, list[_Section]]:
    count = f"{facts.messages} message{'' if facts.messages == 1 else 's'}"
    header = (f"Summary of the conversation so far ({count}), extracted without a model: "
              "the user's directions are quoted as written.")
    next_step = [f"Continue with the user's latest direction: {facts.open_request}"] if facts.open_request else []
    return header, [
        _Section("Previous Summary", [previous or ""], 8_000, listed=False),
        _Section("Summarized Earlier Work", facts.memories, 1_500),
        _Section("User Directions", facts.directions, 2_000, keep_first=True),
        _Section("Files Read", [_code(p) for p in facts.files_read], 300, single_line=True),
        _Section("Files Edited", [_code(p) for p in facts.files_edited], 300, single_line=True),
        _Section("Commands Run", [_code(c) for c in facts.commands], 300, single_line=True),
        _Section("Errors Seen", facts.errors, 400, single_line=True),
        _Section("Last State", [facts.last_state or ""], 3_000, listed=False),
        _Section("Next Step", next_step, 1_000, listed=False),
    ]


def _summarized(facts: HistoryFacts, previous: str | None) -> tuple[str, list[_Section]]:
    actions = ([f"I read {_code(p)}" for p in facts.files_read] + [f"I edited {_code(p)}" for p in facts.files_edited]
               + [f"I ran {_code(c)}" for c in facts.commands])
    result = [facts.last_state or ""] + ([f"Still open: {facts.open_request}"] if facts.open_request else [])
    return SUMMARIZED_TAG, [
        _Section("Previous Summary", [previous or ""], 4_000, listed=False),
        _Section("Context", facts.directions, 1_000, keep_first=True),
        _Section("Actions", facts.memories + actions, 300, single_line=True),
        _Section("Errors", [f"I hit: {e}" for e in facts.errors], 400, single_line=True),
        _Section("Result", result, 2_000, listed=False),
    ]


def _memory_parts(memory: str) -> dict[str, list[str]]:
    """A tier block's sections, sorted into what a goal batch keeps of them."""
    body = memory.removeprefix(SUMMARIZED_TAG).removeprefix(GOAL_BATCH_TAG).strip()
    found: dict[str, list[str]] = {}
    headings = list(_HEADING.finditer(body))
    for i, heading in enumerate(headings):
        end = headings[i + 1].start() if i + 1 < len(headings) else len(body)
        target = _MEMORY_SECTIONS.get(heading.group(1).strip().lower())
        text = body[heading.end() : end].strip()
        if target and text:
            found.setdefault(target, []).append(text)
    if not found and body:
        found["achieved"] = [body]
    return found


def _lines(texts: list[str]) -> list[str]:
    return [line.strip().removeprefix("- ").strip() for text in texts for line in text.splitlines() if line.strip()]


def _goal_batch(facts: HistoryFacts, previous: str | None) -> tuple[str, list[_Section]]:
    achieved = [f"Earlier: {previous}"] if previous else []
    dead_ends = [f"I hit: {e}" for e in facts.errors]
    constraints = [s.strip() for d in facts.directions for s in _SENTENCES.split(d) if _CONSTRAINT.search(s)]
    artifacts = [_code(p) for p in facts.files_edited + facts.files_read] + [_code(c) for c in facts.commands]
    for memory in facts.memories:
        parts = _memory_parts(memory)
        achieved += parts.get("achieved", [])
        dead_ends = _lines(parts.get("dead_ends", [])) + dead_ends
        constraints += _lines(parts.get("constraints", []))
        artifacts += _lines(parts.get("artifacts", []))
        artifacts += [_code(m) for text in parts.get("actions", []) for m in _BACKTICKED.findall(text)]
    if facts.last_state:
        achieved.append(facts.last_state)
    arc: list[str] = []
    if facts.directions:
        arc = [f"I worked on: {one_line(facts.directions[0], 300)}"]
        if len(facts.directions) > 1:
            arc.append(f"The arc ran over {len(facts.directions)} user turns, ending with: "
                       f"{one_line(facts.directions[-1], 300)}")
    return GOAL_BATCH_TAG, [
        _Section("Goal Arc", arc, 800, listed=False),
        _Section("Human Direction", facts.directions, 1_000, keep_first=True),
        _Section("What Was Achieved", achieved, 800),
        _Section("Dead Ends", dead_ends, 400, single_line=True),
        _Section("Lasting Constraints", list(dict.fromkeys(constraints)), 300, single_line=True),
        _Section("Key Artifacts", list(dict.fromkeys(artifacts)), 200, single_line=True),
    ]


def _render(header: str, sections: list[_Section], level: int) -> str:
    blocks = [header]
    for section in sections:
        body = section.render(level)
        if body:
            blocks.append(f"## {section.heading}\n{body}")
    return "\n\n".join(blocks)


def extractive_summary(request: SummaryRequest) -> str:
    """The offline summary text of ``request`` (see the module rules), within ``request.max_tokens``."""
    facts = history_facts(request.history)
    previous = (request.previous_summary or "").strip() or facts.previous
    if request.kind == "compaction":
        header, sections = _compaction(facts, previous)
    elif request.kind == "goal_batch":
        header, sections = _goal_batch(facts, previous)
    else:
        header, sections = _summarized(facts, previous)
    instructions = (request.instructions or "").strip()
    if instructions and request.kind == "compaction":
        sections.insert(0, _Section("Instructions for This Summary", [instructions], 1_000, listed=False))
    text = ""
    for level in range(_MAX_LEVEL + 1):
        text = _render(header, sections, level)
        if estimate_tokens(text) <= request.max_tokens:
            return text
    return fit_tokens(text, request.max_tokens)


class ExtractiveSummarizer:
    """Summaries without a model: offline, free and deterministic (the same request gives the same text)."""

    model = EXTRACTIVE_MODEL

    def __repr__(self) -> str:
        return "ExtractiveSummarizer()"

    def summarize(self, request: SummaryRequest) -> Summary:
        return Summary(text=extractive_summary(request), model=EXTRACTIVE_MODEL, tokens=TokenCounts())

    async def asummarize(self, request: SummaryRequest) -> Summary:
        return self.summarize(request)
