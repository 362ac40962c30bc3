"""A small web site served on 127.0.0.1 for the crawl tests: pages from a dict the test may change, and a log of
every request (path and User-Agent)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Site:
    def __init__(self, pages: dict[str, tuple[str, str]]) -> None:
        self.pages = pages  # path -> (content type, body); ("status", "503") answers with that error
        self.requests: list[tuple[str, str]] = []
        self.hosts: list[str] = []  # the Host header of each request
        self.url = ""


@contextmanager
def serve(pages: dict[str, tuple[str, str]]) -> Iterator[Site]:
    site = Site(pages)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            site.requests.append((self.path, self.headers.get("User-Agent", "")))
            site.hosts.append(self.headers.get("Host", ""))
            found = site.pages.get(self.path)
            if found is None:
                self.send_error(404)
                return
            content_type, body = found
            if content_type == "status":  # an error page: the body is its status code
                self.send_error(int(body))
                return
            if content_type == "redirect":
                self.send_response(302)
                self.send_header("Location", body)
                self.end_headers()
                return
            data = body.encode("utf-8")
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    site.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()
