"""Webhook receivers for the alert tests: real HTTP on 127.0.0.1 (``http.server`` in a thread),
one path per webhook, recording every POST and failing the first N of a path on demand."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Post:
    path: str
    headers: dict[str, str]
    body: bytes
    status: int

    @property
    def alert(self) -> dict[str, Any]:
        return dict(json.loads(self.body))

    def signed_with(self, secret: str) -> bool:
        expected = "sha256=" + hmac.new(secret.encode(), self.body, hashlib.sha256).hexdigest()
        return hmac.compare_digest(self.headers.get("X-Genq-Signature", ""), expected)


@dataclass
class Hooks:
    """``fail["/ops"] = 1``: the first POST to /ops answers 500, the next ones 200."""

    fail: dict[str, int] = field(default_factory=dict)
    posts: list[Post] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __enter__(self) -> Hooks:
        hooks = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with hooks._lock:
                    left = hooks.fail.get(self.path, 0)
                    status = 500 if left > 0 else 200
                    if left > 0:
                        hooks.fail[self.path] = left - 1
                    hooks.posts.append(Post(self.path, dict(self.headers.items()), body, status))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def url(self, path: str) -> str:
        return f"{self.base}{path}"

    def to(self, path: str, status: int | None = 200) -> list[Post]:
        """The POSTs to ``path`` (only those answered ``status``; None: all)."""
        with self._lock:
            return [p for p in self.posts if p.path == path and status in (None, p.status)]

    def job_ids(self, path: str) -> list[str]:
        """The dead job ids delivered (answered 200) to ``path``, in arrival order."""
        return [p.alert["id"] for p in self.to(path)]
