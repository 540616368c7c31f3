"""``ExtractiveSummarizer``: an offline, deterministic summary built from the history's facts, no model.

What each kind writes (a section with nothing to say is left out):

- ``compaction``: a one-line header, then Previous Summary, Summarized Earlier Work (tier blocks), User
  Directions (the user's own words, verbatim: no local command, caveat or system reminder of Claude Code),
  Files Read, Files Edited, Commands Run, Errors Seen, Last State (the newest assistant text) and Next Step
  (the newest direction, when nothing answered it).
- ``tool_call`` / ``threshold``: a ``[SUMMARIZED]`` block with Previous Summary, Context, Actions (first
  person: "I read", "I edited", "I ran"), Errors and Result, in the sections the model prompt asks for.
- ``goal_batch``: a ``[GOAL BATCH]`` block with ADR-0041's six sections, distilled, each fact said once:
  Goal Arc (one line: how many turns, whether the last is still open; the directions themselves are not
  repeated there), Human Direction (every user direction, as written), What Was Achieved (a previous
  summary as "Earlier: …", then where each turn ended: its newest assistant text or the Result of its
  newest ``[SUMMARIZED]`` block, once each), Dead Ends and Lasting Constraints (the clauses of the
  directions that state one, and those sections of the blocks, once each), Key Artifacts (paths, commands
  and names the other sections do not already quote).

Custom instructions cannot steer an extractor; a compaction summary records them in a first section so the
next turn knows what the user asked the summary to focus on.

The text always fits ``request.max_tokens`` (by ``estimate_tokens``). A compaction summary is also at most
12,000 characters: when it would be longer, each section is sure of a share of that room and the rest goes,
up to a limit each, first to the user's directions, then the files, the last state, the previous summary,
the errors and the commands. Directions that do not all fit are kept in this order: the first (the goal),
the last, those that changed direction, then the newest; each shows at least 300 characters and all are cut
to one length; what is left out is noted where it was. Files are listed whole or not at all, newest first.
For the other kinds, and when characters of several bytes make the text too many tokens, each list keeps
fewer of its oldest items (the first user direction is kept) and each item fewer characters, halving step by
step, and as a last resort the text is cut. A goal batch's Human Direction is cut last: the other sections
shrink to nothing first, so the user's direction is what survives a tight budget (ADR-0041).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ..models import MessageWithParts, TokenCounts
from ..tokens import CHARS_PER_TOKEN, estimate_tokens
from .base import Summary, SummaryRequest
from .facts import HistoryFacts, history_facts, is_tier_summary, user_directions
from .prompts import GOAL_BATCH_TAG, SUMMARIZED_TAG, message_text
from .text import fit_tokens, one_line, trim

__all__ = ["EXTRACTIVE_MODEL", "ExtractiveSummarizer", "extractive_summary"]

EXTRACTIVE_MODEL = "extractive"
_MAX_LEVEL = 12
_MIN_CAP = 40
_COMPACTION_CHARS = 12_000  # the longest extractive compaction summary, whatever max_tokens allows (issue 23)
_MIN_KEEP = 300  # a compaction summary shows at least this much of each item it keeps
_NOTE = 40  # room for a "[… N more characters]" or "(N earlier left out)" note
_HEADING = re.compile(r"^##\s+(.+?)\s*$", re.MULTILINE)
_BACKTICKED = re.compile(r"`([^`\n]{1,200})`")
_AROUND = "`'\"()[]{}<>.,;:!?"
_CLAUSES = re.compile(r"(?<=[.!?;])\s+|\n+")
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
    protected: bool = False  # cut only once every other section is gone (a goal batch's Human Direction)
    # How a compaction summary shares its room (``_fit_chars``):
    floor: float = 0.0  # the share of the room this section is sure of
    most: float = 1.0  # the largest share it may take
    order: int = 0  # when it gets what the others leave (lowest first)
    rank: list[int] | None = None  # which items to keep first (default: the newest first)
    uncut: bool = False  # an item is shown whole or left out (a path cut short names no file)

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

    def render_within(self, room: int) -> str:
        """The section's body in at most ``room`` characters: the items ``rank`` puts first, as many as can
        show ``_MIN_KEEP`` characters each (or all of an ``uncut`` item), cut to the longest common length
        that fits (the others left out, noted where they were); a paragraph is cut to fit."""
        full = self.render(0)
        if len(full) <= room:
            return full
        shape: Callable[[str, int], str] = one_line if self.single_line else trim
        if not self.listed:
            return shape(full, room - _NOTE) if room - _NOTE >= _MIN_CAP else ""
        items = [(n, item) for n, item in enumerate(self.items) if item and item.strip()]
        rank = self.rank if self.rank is not None else [n for n, _ in reversed(items)]
        whole = {n: _bullet(shape(item, self.cap)) for n, item in items}
        chosen: list[int] = []
        used = _NOTE
        for n in (n for n in rank if n in whole):
            size = (len(whole[n]) if self.uncut else min(len(whole[n]), _MIN_KEEP)) + 1
            if used + size > room:
                break
            chosen.append(n)
            used += size
        texts = dict(items)

        def lines(kept: list[int], cap: int) -> str:
            out, last = [], -1
            for n in sorted(kept):
                skipped = sum(1 for m in whole if last < m < n)
                if skipped:
                    out.append(f"- ({skipped} earlier left out)")
                out.append(whole[n] if cap >= len(whole[n]) else _bullet(shape(texts[n], cap)))
                last = n
            return "\n".join(out)

        while chosen:
            high = max(len(whole[n]) for n in chosen)
            low = high if self.uncut else _MIN_CAP
            while low < high:  # the longest common cap that fits
                middle = (low + high + 1) // 2
                if len(lines(chosen, middle)) <= room:
                    low = middle
                else:
                    high = middle - 1
            text = lines(chosen, low)
            cut_short = low < _MIN_KEEP and any(len(whole[n]) > low for n in chosen)
            if len(text) <= room and not (cut_short and len(chosen) > 1):
                return text
            chosen.pop()  # the last one ranked: the others keep more
        return ""


def _bullet(text: str) -> str:
    """``- text``, its following lines indented under the dash (blank lines left blank)."""
    return "- " + "\n".join(f"  {line}" if line and n else line for n, line in enumerate(text.split("\n")))


def _code(value: str) -> str:
    return f"`{value}`" if "`" not in value else value


def _direction_rank(facts: HistoryFacts) -> list[int]:
    """Which directions a compaction summary keeps first: the first (the goal), the last, those that changed
    direction (newest first), then the others, newest first."""
    count = len(facts.directions)
    changes = [n for n in reversed(facts.changes) if n < count]
    return list(dict.fromkeys([0, count - 1, *changes, *range(count - 1, -1, -1)])) if count else []


def _compaction(facts: HistoryFacts, previous: str | None) -> tuple[str, list[_Section]]:
    count = f"{facts.messages} message{'' if facts.messages == 1 else 's'}"
    header = (f"Summary of the conversation so far ({count}), extracted without a model: "
              "the user's directions are quoted as written.")
    next_step = [f"Continue with the user's latest direction: {facts.open_request}"] if facts.open_request else []
    return header, [
        _Section("Previous Summary", [previous or ""], 8_000, listed=False, floor=0.20, most=0.5, order=5),
        _Section("Summarized Earlier Work", facts.memories, 1_500, floor=0.04, order=8),
        _Section("User Directions", facts.directions, _COMPACTION_CHARS, keep_first=True, floor=0.30, most=0.7,
                 order=1, rank=_direction_rank(facts)),
        _Section("Files Read", [_code(p) for p in facts.files_read], 300, single_line=True, floor=0.06, order=3,
                 uncut=True),
        _Section("Files Edited", [_code(p) for p in facts.files_edited], 300, single_line=True, floor=0.06, order=2,
                 uncut=True),
        _Section("Commands Run", [_code(c) for c in facts.commands], 300, single_line=True, floor=0.05, order=7),
        _Section("Errors Seen", facts.errors, 400, single_line=True, floor=0.06, most=0.25, order=6),
        _Section("Last State", [facts.last_state or ""], 3_000, listed=False, floor=0.08, order=4),
        _Section("Next Step", next_step, 1_000, listed=False, floor=0.03, order=1),
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


def _sentence(clause: str) -> str:
    """A clause of a direction as a sentence of its own."""
    clause = clause.strip()
    return clause[:1].upper() + clause[1:]


def _named(texts: list[str]) -> set[str]:
    """What ``texts`` name: their backticked spans, and their words with the punctuation around them stripped."""
    joined = "\n".join(texts)
    return set(_BACKTICKED.findall(joined)) | {word.strip(_AROUND) for word in joined.split()}


def _turn_results(history: list[MessageWithParts]) -> list[str | None]:
    """Where each turn of ``history`` ended (None: nothing answered it yet): its newest assistant text, or the
    Result of its newest tier block (earlier states of a turn were overwritten by later ones)."""
    results: list[str | None] = [None]
    for message in history:
        if message.info.role == "user":
            if user_directions(message) and results[-1] is not None:
                results.append(None)
            continue
        if is_tier_summary(message):
            achieved = _memory_parts(message_text(message)).get("achieved")
            results[-1] = achieved[-1] if achieved else results[-1]
        elif not message.info.summary and message_text(message):
            results[-1] = message_text(message)
    return results


def _goal_batch(history: list[MessageWithParts], facts: HistoryFacts, previous: str | None) -> tuple[str, list[_Section]]:
    results = _turn_results(history)
    achieved = ([f"Earlier: {previous}"] if previous else []) + [r for r in dict.fromkeys(results) if r]
    dead_ends = [f"I hit: {e}" for e in facts.errors]
    constraints = [_sentence(c) for d in facts.directions for c in _CLAUSES.split(d) if _CONSTRAINT.search(c)]
    artifacts = [_code(p) for p in facts.files_edited + facts.files_read] + [_code(c) for c in facts.commands]
    for memory in facts.memories:
        parts = _memory_parts(memory)
        dead_ends = _lines(parts.get("dead_ends", [])) + dead_ends
        constraints += _lines(parts.get("constraints", []))
        artifacts += _lines(parts.get("artifacts", []))
        artifacts += [_code(m) for text in parts.get("actions", []) for m in _BACKTICKED.findall(text)]
    dead_ends, constraints = list(dict.fromkeys(dead_ends)), list(dict.fromkeys(constraints))
    named = _named(facts.directions + achieved + dead_ends + constraints)
    artifacts = [a for a in dict.fromkeys(artifacts) if a.strip("`") not in named]
    arc: list[str] = []
    if facts.directions:
        count = len(facts.directions)
        worked = f"I worked through {count} user directions in order" if count > 1 else "I worked on one user direction"
        still_open = "" if results[-1] is not None else f"; {'it' if count == 1 else 'the last one'} was still open"
        arc = [f"{worked} (Human Direction){still_open}."]
    return GOAL_BATCH_TAG, [
        _Section("Goal Arc", arc, 200, listed=False),
        _Section("Human Direction", facts.directions, 2_000, keep_first=True, protected=True),
        _Section("What Was Achieved", achieved, 400, single_line=True),
        _Section("Dead Ends", dead_ends, 400, single_line=True),
        _Section("Lasting Constraints", constraints, 300, single_line=True),
        _Section("Key Artifacts", artifacts, 200, single_line=True),
    ]


def _render(header: str, sections: list[_Section], level: int, *, spare_protected: bool) -> str:
    blocks = [header]
    for section in sections:
        body = section.render(0 if section.protected and spare_protected else level)
        if body:
            blocks.append(f"## {section.heading}\n{body}")
    return "\n\n".join(blocks)


def _fit(header: str, sections: list[_Section], budget: int) -> str:
    """The sections within ``budget`` tokens: the others shrink level by level, then only the protected ones
    are left and shrink in turn; as a last resort the text is cut."""
    text = ""
    for level in range(_MAX_LEVEL + 1):
        text = _render(header, sections, level, spare_protected=True)
        if estimate_tokens(text) <= budget:
            return text
    protected = [section for section in sections if section.protected]
    for level in range(_MAX_LEVEL + 1 if protected else 0):
        text = _render(header, protected, level, spare_protected=False)
        if estimate_tokens(text) <= budget:
            return text
    return fit_tokens(text, budget)


def _fit_chars(header: str, sections: list[_Section], limit: int) -> str:
    """A compaction summary in at most ``limit`` characters: each section is sure of its ``floor`` share of
    the room (or what it needs, if less); what is left goes to the sections in ``order``, each up to its
    ``most`` share; then each is cut to its part (``render_within``)."""
    whole = _render(header, sections, 0, spare_protected=True)
    if len(whole) <= limit:
        return whole
    present = [(section, len(section.render(0))) for section in sections]
    present = [(section, need) for section, need in present if need]
    room = limit - len(header) - sum(len(f"\n\n## {section.heading}\n") for section, _ in present)
    parts = [min(need, int(section.floor * room)) for section, need in present]
    spare = room - sum(parts)
    for i in sorted(range(len(present)), key=lambda i: present[i][0].order):
        section, need = present[i]
        more = max(0, min(spare, min(need, int(section.most * room)) - parts[i]))
        parts[i] += more
        spare -= more
    blocks = [header]
    for (section, _), part in zip(present, parts):
        body = section.render_within(part)
        if body:
            blocks.append(f"## {section.heading}\n{body}")
    return "\n\n".join(blocks)


def _fit_compaction(header: str, sections: list[_Section], budget: int) -> str:
    """Within ``_COMPACTION_CHARS`` characters and ``budget`` tokens (characters that take more than one byte
    shrink the room and it is cut again; the last resort is ``_fit``)."""
    limit = min(_COMPACTION_CHARS, budget * CHARS_PER_TOKEN)
    for _ in range(3):
        text = _fit_chars(header, sections, limit)
        tokens = estimate_tokens(text)
        if tokens <= budget:
            return text
        limit = limit * budget // tokens - 1
    return _fit(header, sections, budget)


def extractive_summary(request: SummaryRequest) -> str:
    """The offline summary text of ``request`` (see the module rules), within ``request.max_tokens``."""
    facts = history_facts(request.history)
    previous = (request.previous_summary or "").strip() or facts.previous
    if request.kind == "compaction":
        header, sections = _compaction(facts, previous)
    elif request.kind == "goal_batch":
        header, sections = _goal_batch(request.history, facts, previous)
    else:
        header, sections = _summarized(facts, previous)
    instructions = (request.instructions or "").strip()
    if instructions and request.kind == "compaction":
        sections.insert(0, _Section("Instructions for This Summary", [instructions], 1_000, listed=False, floor=0.05))
    if request.kind == "compaction":
        return _fit_compaction(header, sections, request.max_tokens)
    return _fit(header, sections, request.max_tokens)


class ExtractiveSummarizer:
    """Summaries without a model: offline, free and deterministic (the same request gives the same text)."""

    model = EXTRACTIVE_MODEL

    def __repr__(self) -> str:
        return "ExtractiveSummarizer()"

    def summarize(self, request: SummaryRequest) -> Summary:
        return Summary(text=extractive_summary(request), model=EXTRACTIVE_MODEL, tokens=TokenCounts())

    async def asummarize(self, request: SummaryRequest) -> Summary:
        return self.summarize(request)
