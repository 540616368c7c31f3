"""``FakeMessagesAPI``: the fake Messages API on a local HTTP server, for the real ``anthropic`` SDK client.

Rules:

- ``with FakeMessagesAPI(script) as api:`` starts a ``ThreadingHTTPServer`` on ``127.0.0.1`` (a free port) in a
  daemon thread and stops it on exit; ``api.base_url`` is what ``anthropic.Anthropic(base_url=...)`` or
  ``anthropic.AsyncAnthropic(base_url=...)`` takes. Any API key is accepted.
- Only ``POST /v1/messages`` exists (``?beta=true``, which ``client.beta.messages.create`` adds, is ignored);
  anything else is a 404 ``not_found_error``. An accepted ``stream: true`` request is answered with
  server-sent events in chunked transfer encoding (``stream``), cut off mid-stream when the reply asks.
- Every answer carries ``request-id`` and ``x-should-retry: false``, so the SDK never retries on its own: each
  call is one request, one script item, one record, whatever ``max_retries`` is.
- ``clock`` (seconds, default ``time.monotonic``) is read once at the start of each request; the prompt
  cache's lifetimes run on it, so tests move time by changing what the clock returns, never by sleeping.
- ``api.requests`` lists a ``RequestRecord`` per request received, in order; ``api.stats`` sums them.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from . import stream
from .engine import Engine, RequestRecord, Stats
from .script import Script


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    engine: Engine


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        # Headers and body leave in two writes: without this, delayed ACKs add ~40 ms to every answer.
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        path = urlsplit(self.path).path
        if path != "/v1/messages":
            self._send(404, {"type": "error", "error": {"type": "not_found_error", "message": f"Not found: POST {path}"}}, "")
            return
        record, payload, request_id = self.server.engine.handle(raw, self.headers.get_all("anthropic-beta") or [])
        if record.streamed:
            self._stream(payload, request_id, record.cut_after)
        else:
            self._send(record.status, payload, request_id)

    def _not_found(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        path = urlsplit(self.path).path
        self._send(404, {"type": "error", "error": {"type": "not_found_error", "message": f"Not found: {self.command} {path}"}}, "")

    do_GET = do_PUT = do_DELETE = do_PATCH = _not_found

    def _send(self, status: int, payload: dict[str, Any], request_id: str) -> None:
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("x-should-retry", "false")
        if request_id:
            self.send_header("request-id", request_id)
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, message: dict[str, Any], request_id: str, cut_after: int | None) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("x-should-retry", "false")
        self.send_header("request-id", request_id)
        self.end_headers()
        for number, event in enumerate(stream.events(message)):
            if number == cut_after:  # the connection is lost: no terminating chunk, the client sees a broken body
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            data = stream.sse(event)
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.write(b"0\r\n\r\n")

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence the per-request log
        pass


class FakeMessagesAPI:
    """A local fake of ``POST /v1/messages`` that holds clients to the real API's rules (see the package docs).

    ``script`` answers accepted requests (see ``brutus.testing.script``); ``context_window`` is the largest
    input, in the fake's tokens; ``clock`` returns seconds; ``min_cacheable_tokens`` stands in for the
    per-model minimum cacheable prompt length.
    """

    def __init__(
        self,
        script: Script = None,
        *,
        context_window: int = 200_000,
        clock: Callable[[], float] = time.monotonic,
        min_cacheable_tokens: int = 0,
    ) -> None:
        self._engine = Engine(script, context_window=context_window, clock=clock, min_cacheable_tokens=min_cacheable_tokens)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> FakeMessagesAPI:
        """Start serving (``with`` does this); returns self."""
        if self._server is None:
            server = _Server(("127.0.0.1", 0), _Handler)
            server.engine = self._engine
            self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                            name="FakeMessagesAPI", daemon=True)
            self._server = server
            self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving and release the port."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> FakeMessagesAPI:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("FakeMessagesAPI is not running: use it as a context manager or call start()")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def requests(self) -> list[RequestRecord]:
        """Every request received, in order."""
        return self._engine.snapshot()

    @property
    def stats(self) -> Stats:
        """Totals over ``requests``."""
        return Stats.of(self.requests)
