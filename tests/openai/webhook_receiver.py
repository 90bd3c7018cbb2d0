"""A Standard Webhooks receiver for the webhook tests: real HTTP on 127.0.0.1
(``http.server`` in a thread; HTTPS with a server ``tls`` context), one path per endpoint,
recording every POST (body and headers, untouched, for ``client.webhooks.unwrap``) and the TLS
server names clients asked for, and answering 500 to the first N of a path."""

from __future__ import annotations

import json
import ssl
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Delivery:
    path: str
    headers: dict[str, str]
    body: bytes
    status: int

    @property
    def event(self) -> dict[str, Any]:
        return dict(json.loads(self.body))

    @property
    def webhook_id(self) -> str:
        return self.headers["webhook-id"]


@dataclass
class Receiver:
    """``fail["/a"] = 1``: the first POST to /a answers 500, the next ones 200."""

    fail: dict[str, int] = field(default_factory=dict)
    tls: ssl.SSLContext | None = None
    posts: list[Delivery] = field(default_factory=list)
    server_names: list[str | None] = field(default_factory=list)
    """Each TLS handshake's SNI (None: the client sent none)."""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __enter__(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver._lock:
                    left = receiver.fail.get(self.path, 0)
                    status = 500 if left > 0 else 200
                    if left > 0:
                        receiver.fail[self.path] = left - 1
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    receiver.posts.append(Delivery(self.path, headers, body, status))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_port}"
        if self.tls is not None:

            def named(_socket: ssl.SSLObject, name: str | None, _context: ssl.SSLContext) -> None:
                receiver.server_names.append(name)

            self.tls.sni_callback = named
            self.server.socket = self.tls.wrap_socket(self.server.socket, server_side=True)
            self.base = f"https://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def url(self, path: str) -> str:
        return f"{self.base}{path}"

    def to(self, path: str, status: int | None = None) -> list[Delivery]:
        """The POSTs to ``path`` in arrival order (only those answered ``status``; None: all)."""
        with self._lock:
            return [p for p in self.posts if p.path == path and status in (None, p.status)]

    def about(self, path: str, object_id: str) -> list[Delivery]:
        """The POSTs to ``path`` whose event is about ``object_id``."""
        return [p for p in self.to(path) if p.event["data"]["id"] == object_id]
