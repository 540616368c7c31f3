"""Test-only: read ``opencode export`` files of the shared corpus into brutus models, without a database.

OpenCode writes camelCase (``sessionID``, ``callID``, ``tailStartID``…); brutus models are snake_case. A user
message's ``summary`` is an object in OpenCode (title, diffs) and a flag on assistant messages: only the
flag maps onto ``Message.summary``. Fields brutus has no place for (``path``, ``variant``, a completed
tool's ``attachments``, a tool part's provider ``metadata``, the ``total`` of token counts) are dropped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from brutus.models import Message, MessageWithParts, TokenCounts

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "opencode"
if not CORPUS.is_dir():  # the repository may sit elsewhere than beside ``shared``
    CORPUS = Path("/work/shared/corpus/opencode")

_RENAMES = {
    "sessionID": "session_id",
    "messageID": "message_id",
    "callID": "call_id",
    "parentID": "parent_id",
    "modelID": "model_id",
    "providerID": "provider_id",
    "tailStartID": "tail_start_id",
}


def corpus_files() -> list[Path]:
    return sorted(CORPUS.glob("*.json"))


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
    return to_history(json.loads(path.read_text(encoding="utf-8")))
