"""The tool state machine: pending → running → completed | error, and pending → error. Nothing else."""

from __future__ import annotations

from .errors import InvalidInput, InvalidTransition

__all__ = ["TRANSITIONS", "check_transition"]

TRANSITIONS: dict[str, frozenset[str]] = {
    "pending": frozenset({"running", "error"}),
    "running": frozenset({"completed", "error"}),
    "completed": frozenset(),
    "error": frozenset(),
}


def check_transition(part_id: str, current: str, requested: str, *, output: str | None, error: str | None) -> None:
    """Raise ``InvalidTransition`` (or ``InvalidInput`` for a missing output / error) before anything is written."""
    if requested not in TRANSITIONS:
        raise InvalidInput(f"unknown tool status {requested!r}; expected one of {sorted(TRANSITIONS)}")
    if requested not in TRANSITIONS.get(current, frozenset()):
        raise InvalidTransition(part_id, current, requested)
    if requested == "completed" and output is None:
        raise InvalidInput(f"tool part {part_id}: a completed tool needs an output (use '' for none)")
    if requested == "error" and not error:
        raise InvalidInput(f"tool part {part_id}: an errored tool needs an error message")
    if requested != "completed" and output is not None:
        raise InvalidInput(f"tool part {part_id}: only a completed tool has an output")
