"""Test-only: the real-session corpus in ``tests/data/corpus`` (see its README.md), and a reader of its
``opencode export`` files into brutus models, without a database.

Every test and benchmark finds the corpus here, inside the repository, and nowhere else. The files are
gzip-compressed copies (``*.json.gz`` OpenCode exports, ``*.jsonl.gz`` Claude Code sessions): brutus reads
them as they are (``read_document`` decompresses gzip); tests that look at the raw content use ``read_bytes``,
``read_text`` and ``read_export`` here. A corpus folder that is missing or holds another number of files
than ``EXPECTED`` raises ``RuntimeError`` at use (at collection for parametrized tests): never a skip.

OpenCode writes camelCase (``sessionID``, ``callID``, ``tailStartID``…); brutus models are snake_case. A user
message's ``summary`` is an object in OpenCode (title, diffs) and a flag on assistant messages: only the
flag maps onto ``Message.summary``. Fields brutus has no place for (``path``, ``variant``, a completed
tool's ``attachments``, a tool part's provider ``metadata``, the ``total`` of token counts) are dropped.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from brutus.models import Message, MessageWithParts, TokenCounts

CORPUS = Path(__file__).parent / "data" / "corpus"
EXPECTED = {"opencode": 12, "claude-code": 10}  # files per folder: tests count rows of the whole corpus
_PATTERNS = {"opencode": "*.json.gz", "claude-code": "*.jsonl.gz"}


def _listed(kind: str) -> list[Path]:
    folder = CORPUS / kind
    found = sorted(folder.glob(_PATTERNS[kind])) if folder.is_dir() else []
    if len(found) != EXPECTED[kind]:
        raise RuntimeError(
            f"the test corpus is incomplete: {len(found)} {_PATTERNS[kind]} files in {folder}, "
            f"expected {EXPECTED[kind]} (see tests/data/corpus/README.md)"
        )
    return found


def opencode_files() -> list[Path]:
    """The 12 OpenCode exports, sorted by name."""
    return _listed("opencode")


def claude_code_files() -> list[Path]:
    """The 10 Claude Code session files, sorted by name."""
    return _listed("claude-code")


def all_files() -> list[Path]:
    """Every corpus file: the OpenCode exports, then the Claude Code sessions."""
    return opencode_files() + claude_code_files()


def corpus_file(fragment: str) -> Path:
    """The one corpus file whose name contains ``fragment`` (a slug like ``nimble-pixel``, an id prefix)."""
    found = [path for path in all_files() if fragment in path.name]
    if len(found) != 1:
        raise RuntimeError(f"{len(found)} corpus files named like {fragment!r} in {CORPUS}, expected one")
    return found[0]


def read_bytes(path: Path) -> bytes:
    """A corpus file's content, decompressed."""
    data = path.read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def read_text(path: Path) -> str:
    return read_bytes(path).decode("utf-8")


def read_export(path: Path) -> dict[str, Any]:
    """An OpenCode export file as the JSON object ``opencode export`` wrote."""
    return json.loads(read_text(path))


_RENAMES = {
    "sessionID": "session_id",
    "messageID": "message_id",
    "callID": "call_id",
    "parentID": "parent_id",
    "modelID": "model_id",
    "providerID": "provider_id",
    "tailStartID": "tail_start_id",
}


def _tokens(raw: dict[str, Any] | None) -> TokenCounts:
    raw = dict(raw or {})
    raw.pop("total", None)
    return TokenCounts.model_validate(raw)


def _message(raw: dict[str, Any]) -> Message:
    info = {_RENAMES.get(key, key): value for key, value in raw.items()}
    model = info.pop("model", None)
    if isinstance(model, dict):
        info.setdefault("model_id", model.get("modelID"))
        info.setdefault("provider_id", model.get("providerID"))
    if not isinstance(info.get("summary"), bool):
        info.pop("summary", None)
    info.pop("path", None)
    info.pop("variant", None)
    if "tokens" in info:
        info["tokens"] = _tokens(info["tokens"])
    return Message.model_validate(info)


def _part(raw: dict[str, Any]) -> dict[str, Any]:
    part = {_RENAMES.get(key, key): value for key, value in raw.items()}
    if part["type"] == "tool":
        state = dict(part["state"])
        state.pop("attachments", None)
        part["state"] = state
        part.pop("metadata", None)  # provider call metadata (item ids): ToolPart keeps none
    elif part["type"] == "step-finish":
        part["tokens"] = _tokens(part.get("tokens"))
    return part


def to_history(export: dict[str, Any]) -> list[MessageWithParts]:
    """The messages of one parsed ``opencode export`` document, chronological, as brutus models."""
    return [
        MessageWithParts.model_validate({"info": _message(entry["info"]), "parts": [_part(p) for p in entry["parts"]]})
        for entry in export["messages"]
    ]


def load_export(path: Path) -> list[MessageWithParts]:
    """An OpenCode export file's messages as brutus models (see ``to_history``)."""
    return to_history(read_export(path))
