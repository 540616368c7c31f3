"""The error a request is refused with, shaped as the Messages API shapes it.

Rules:

- A refusal is an ``ApiError``: an HTTP status, an error ``type`` and a ``message``, and for some compaction
  errors an ``error.details.error_code`` (the on-demand compaction page lists ``compaction_block_misplaced``,
  ``compaction_signature_invalid``, ``compaction_content_mismatch`` and ``compaction_nothing_to_summarize``).
- The wire body is ``{"type": "error", "error": {"type": ..., "message": ...[, "details": ...]},
  "request_id": ...}``, so the ``anthropic`` SDK raises the matching ``APIStatusError`` subclass
  (``BadRequestError`` for a 400) whose message is the one sent here.
- Validation refusals are 400 ``invalid_request_error``; ``bad_request`` builds them.
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """A refusal: raised anywhere while a request is checked, turned into an error response by the engine."""

    def __init__(self, status: int, error_type: str, message: str, *, error_code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.message = message
        self.error_code = error_code

    def body(self, request_id: str) -> dict[str, Any]:
        error: dict[str, Any] = {"type": self.error_type, "message": self.message}
        if self.error_code is not None:
            error["details"] = {"error_code": self.error_code}
        return {"type": "error", "error": error, "request_id": request_id}


def bad_request(message: str, *, error_code: str | None = None) -> ApiError:
    """A 400 ``invalid_request_error`` with the given message."""
    return ApiError(400, "invalid_request_error", message, error_code=error_code)
