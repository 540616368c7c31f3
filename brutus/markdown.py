"""A session as a Markdown transcript a person reads (``brutus show SESSION --markdown``).

Rules:

- One ``##`` heading per message: its number, role (and model), and creation time in UTC. Texts are written
  as they are (they are usually Markdown already); reasoning goes in a collapsed ``<details>`` block; a tool
  call shows its name, status and title, then its input (JSON) and its output or error, each whole, in a
  fenced block whose fence is longer than any run of backticks inside it.
- A compaction is marked where it sits: the user message holding the ``compaction`` part is a
  "Compaction boundary" heading after a horizontal rule (auto or manual, overflow), and an assistant summary
  message is a "Summary" heading (a compaction's, or a tier's range summary).
- A pruned tool output is noted ("output pruned at …"). Its text is written below the note only with
  ``pruned_text=True`` (``show --markdown --full``: the whole history, everything brutus keeps); the model's
  view (the default) does not hold it, so neither does the transcript. With ``pruned_text``, an output
  ``brutus gc`` dropped is noted as such.
- Step, snapshot and patch parts are bookkeeping, not conversation: left out (a patch names its files).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from .models import MessageWithParts, Part, Session

__all__ = ["MarkdownStream", "fence", "to_markdown"]

_BACKTICKS = re.compile(r"`+")


def to_markdown(history: list[MessageWithParts], *, session: Session | None = None, pruned_text: bool = False) -> str:
    """The transcript of ``history`` (a view or the whole history), headed by ``session`` when given."""
    out: list[str] = []
    if session is not None:
        out += _session_header(session)
    for entry in history:
        out += _message(entry, pruned_text)
    return "\n".join(out).rstrip("\n") + "\n"


class MarkdownStream:
    """``to_markdown`` written as it goes (``show --full --markdown`` of a long history): ``header(session)``,
    then ``messages(entries)`` chunk by chunk, then ``close()``; ``write`` receives exactly the text
    ``to_markdown`` returns for the same session and messages, in pieces."""

    def __init__(self, write: Callable[[str], None], *, pruned_text: bool = False) -> None:
        self._write, self._pruned_text = write, pruned_text
        self._started = False
        self._newlines = 0  # trailing newlines held back: the transcript ends in exactly one

    def header(self, session: Session) -> None:
        self._lines(_session_header(session))

    def messages(self, entries: Iterable[MessageWithParts]) -> None:
        for entry in entries:
            self._lines(_message(entry, self._pruned_text))

    def close(self) -> None:
        self._write("\n")

    def _lines(self, lines: list[str]) -> None:
        if not lines:
            return
        text = ("\n" if self._started else "") + "\n".join(lines)
        self._started = True
        text = "\n" * self._newlines + text
        kept = text.rstrip("\n")
        self._newlines = len(text) - len(kept)
        if kept:
            self._write(kept)


def fence(text: str, lang: str = "") -> str:
    """``text`` in a fenced code block that nothing inside it can close."""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    mark = "`" * max(3, longest + 1)
    return f"{mark}{lang}\n{text}{'' if text.endswith(chr(10)) else chr(10)}{mark}"


def _when(ms: int | None) -> str:
    if ms is None:
        return "?"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _session_header(session: Session) -> list[str]:
    lines = [f"# {session.title or session.id}", ""]
    facts = [f"- session: `{session.id}`"]
    if session.parent_id:
        facts.append(f"- parent session: `{session.parent_id}`")
    if session.forked_from:
        facts.append(f"- forked from: `{session.forked_from}` at `{session.forked_at}`")
    if session.directory:
        facts.append(f"- directory: `{session.directory}`")
    facts.append(f"- created: {_when(session.created_at)}, updated: {_when(session.updated_at)}")
    facts.append(f"- messages: {session.message_count:,}")
    return lines + facts + [""]


def _message(entry: MessageWithParts, pruned_text: bool) -> list[str]:
    info = entry.info
    when = _when(info.time.created)
    compaction = next((p for p in entry.parts if p.type == "compaction"), None)
    if compaction is not None:
        kind = "automatic" if compaction.auto else "manual"
        overflow = ", context overflow" if compaction.overflow else ""
        lines = ["---", "", f"## #{info.seq} Compaction boundary ({kind}{overflow}) · {when}", ""]
        lines.append("*The model's view starts here: what came before is replaced by the summary below.*")
        if compaction.tail_start_id:
            lines.append(f"*Kept verbatim from message `{compaction.tail_start_id}` on.*")
        lines.append("")
    elif info.summary:
        kind = (info.metadata or {}).get("summary_type") if isinstance(info.metadata, dict) else None
        what = f"{kind} summary" if isinstance(kind, str) else "Summary"
        model = f", {info.model_id}" if info.model_id else ""
        lines = [f"## #{info.seq} {what[:1].upper() + what[1:]} (assistant{model}) · {when}", ""]
    else:
        role = "User" if info.role == "user" else "Assistant"
        extra = [info.model_id] if info.role == "assistant" and info.model_id else []
        if info.synthetic:
            extra.append("synthetic")
        detail = f" ({', '.join(extra)})" if extra else ""
        lines = [f"## #{info.seq} {role}{detail} · {when}", ""]
    for part in entry.parts:
        block = _part(part, pruned_text)
        if block:
            lines += [block, ""]
    if info.error:
        lines += ["**Error:**", "", fence(json.dumps(info.error, ensure_ascii=False, indent=2), "json"), ""]
    return lines


def _part(part: Part, pruned_text: bool) -> str:
    kind = part.type
    if kind == "text":
        if part.ignored and not part.text:
            return ""
        prefix = "*(synthetic)* " if part.synthetic else ""
        return prefix + part.text
    if kind == "reasoning":
        if not part.text:
            return "*(redacted thinking)*"
        return f"<details><summary>Thinking</summary>\n\n{part.text}\n\n</details>"
    if kind == "tool":
        return _tool(part, pruned_text)
    if kind == "file":
        name = part.filename or (part.url if not part.url.startswith("data:") else "attachment")
        return f"*File: {name} ({part.mime})*"
    if kind == "subtask":
        return f"*Subtask for agent {part.agent}: {part.description}*\n\n" + _quote(part.prompt)
    if kind == "agent":
        return f"*Agent: {part.name}*"
    if kind == "retry":
        return f"*Retry, attempt {part.attempt}*"
    if kind == "patch":
        return f"*Patch {part.hash}: {', '.join(part.files) or 'no files'}*"
    return ""


def _tool(part: Any, pruned_text: bool) -> str:
    state = part.state
    title = f" — {state.title}" if state.title else ""
    lines = [f"**Tool `{part.tool}`** ({state.status}{title})", "", "Input:", "", fence(_json(state.input), "json")]
    if state.time.compacted is not None:
        note = f"*Output pruned at {_when(state.time.compacted)}"
        if not pruned_text:
            lines += ["", note + ": the model no longer sees it.*"]
        elif state.output is None:
            lines += ["", note + "; its text was dropped by `brutus gc`.*"]
        else:
            lines += ["", note + ": the model no longer sees it.*", "", "Output (pruned):", "", fence(state.output)]
    elif state.output is not None:
        lines += ["", "Output:", "", fence(state.output)]
    if state.error is not None:
        lines += ["", "Error:", "", fence(state.error)]
    if state.status in ("pending", "running"):
        lines += ["", "*No result recorded.*"]
    return "\n".join(lines)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2)


def _quote(text: str) -> str:
    return "\n".join("> " + line if line else ">" for line in _lines(text))


def _lines(text: str) -> Iterable[str]:
    return text.splitlines() or [""]
