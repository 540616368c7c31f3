"""Compaction hooks, with Claude Code's hook input shapes.

``pre_compact`` runs before the summary is asked for and may return new custom instructions (a string);
``session_start`` (source "compact") and ``post_compact`` (with the summary) run after the compaction
completed. A hook that raises is logged and ignored: hooks never stop a compaction.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Hook", "Hooks"]

log = logging.getLogger("brutus.compaction")
Hook = Callable[[dict[str, Any]], Any]


@dataclass(frozen=True)
class Hooks:
    pre_compact: Hook | None = None
    session_start: Hook | None = None
    post_compact: Hook | None = None

    def _call(self, hook: Hook | None, payload: dict[str, Any]) -> Any:
        if hook is None:
            return None
        try:
            return hook(payload)
        except Exception as exc:  # noqa: BLE001  a hook never stops a compaction
            log.warning("%s hook failed: %s: %s", payload["hook_event_name"], type(exc).__name__, exc)
            return None

    def run_pre_compact(self, session_id: str, trigger: str, instructions: str | None) -> str | None:
        """The instructions to use: what the hook returned when it returned a string, else ``instructions``."""
        answer = self._call(
            self.pre_compact,
            {"hook_event_name": "PreCompact", "session_id": session_id, "trigger": trigger, "custom_instructions": instructions},
        )
        return answer if isinstance(answer, str) else instructions

    def run_after(self, session_id: str, trigger: str, summary: str) -> None:
        self._call(self.session_start, {"hook_event_name": "SessionStart", "session_id": session_id, "source": "compact"})
        self._call(
            self.post_compact,
            {"hook_event_name": "PostCompact", "session_id": session_id, "trigger": trigger, "compact_summary": summary},
        )
