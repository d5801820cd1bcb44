"""A webhook receiver on loopback for tests: records every request, answers as it is told."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float


class Receiver:
    """``with Receiver() as r``: ``r.url``, ``r.received``; ``respond(n)`` returns (status, delay seconds).

    ``overlaps`` counts requests that arrived while the same message to the same path was in flight.
    """

    def __init__(self, respond: Callable[[int], tuple[int, float]] = lambda n: (200, 0.0)):
        self.respond = respond
        self.received: list[Received] = []
        self.in_flight: dict[str, int] = {}
        self.overlaps = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                msg = self.path + " " + self.headers.get("webhook-id", "")
                with receiver._lock:
                    n = len(receiver.received)
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    receiver.received.append(Received(self.path, headers, body, time.time()))
                    receiver.in_flight[msg] = receiver.in_flight.get(msg, 0) + 1
                    receiver.overlaps += receiver.in_flight[msg] > 1
                status, delay = receiver.respond(n)
                time.sleep(delay)
                with receiver._lock:
                    receiver.in_flight[msg] -= 1
                try:
                    self.send_response(status)
                    self.send_header("content-length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                except OSError:  # the sender went away (killed, or timed out)
                    pass

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def wait_for(self, n: int, timeout: float = 30.0) -> list[Received]:
        """The first ``n`` requests, waiting up to ``timeout`` seconds for them."""
        deadline = time.monotonic() + timeout
        while len(self.received) < n and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(self.received) >= n, f"got {len(self.received)} of {n} webhook requests"
        return self.received[:n]

    def __enter__(self) -> Receiver:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
