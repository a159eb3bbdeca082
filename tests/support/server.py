"""Serve a built site on 127.0.0.1 as GitHub Pages serves it: for the browser tests and .ci/'s scripts."""

from __future__ import annotations

import contextlib
import gzip
import http.server
import mimetypes
import re
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

NOT_FOUND = "404.html"


class SiteHandler(http.server.BaseHTTPRequestHandler):
    """Serve a built site the way GitHub Pages does, on 127.0.0.1.

    The site lives under ``prefix`` (the path of ``site_url``); a directory
    without its slash is redirected; an unknown address is answered with
    404.html and status 404; text is gzipped for clients that accept it, with
    GitHub Pages' ``Cache-Control: max-age=600``. Used by the browser tests,
    .ci/lighthouse, .ci/validate.py and .ci/page_metrics.py.
    """

    directory = "."
    prefix = "/"
    compress = True
    _TEXT = {".html", ".css", ".js", ".json", ".svg", ".xml", ".ipynb", ".txt", ".py", ".map"}

    def do_HEAD(self):
        self.do_GET(body=False)

    def do_GET(self, body=True):
        path = unquote(urlsplit(self.path).path)
        root = Path(self.directory).resolve()
        target = None
        if path.startswith(self.prefix):
            target = (root / path[len(self.prefix) :]).resolve()
            if not target.is_relative_to(root):
                target = None
        if target is not None and target.is_dir():
            if not path.endswith("/"):
                self.send_response(301)
                self.send_header("Location", path + "/")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            target = target / "index.html"
        status = 200
        if target is None or not target.is_file():
            status, target = 404, root / NOT_FOUND
            if not target.is_file():
                self.send_error(404)
                return
        data = target.read_bytes()
        self.send_response(status)
        kind = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
        if target.suffix in self._TEXT:
            kind = f"{kind}; charset=utf-8"
            if self.compress and "gzip" in self.headers.get("Accept-Encoding", ""):
                data = gzip.compress(data, compresslevel=6, mtime=0)
                self.send_header("Content-Encoding", "gzip")
                self.send_header("Vary", "Accept-Encoding")
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "max-age=600")
        self.end_headers()
        if body:
            self.wfile.write(data)

    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        pass


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        """A client that hangs up mid-answer (a browser closing a tab, a test done with a page) is no error."""
        if not isinstance(sys.exc_info()[1], ConnectionError):  # BrokenPipeError, ConnectionResetError, ...
            super().handle_error(request, client_address)


def _serve(directory: str, prefix: str) -> None:
    """Serve until standard input closes: the parent stopped us, or died (then nobody is left to answer)."""
    handler = type("Handler", (SiteHandler,), {"directory": directory, "prefix": prefix})
    httpd = _Server(("127.0.0.1", 0), handler)
    print(httpd.server_address[1], flush=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    sys.stdin.read()


@contextlib.contextmanager
def serve_site(directory: Path, prefix: str = "/"):
    """Serve ``directory`` on 127.0.0.1 (a free port) from a process of its own; yield the site's root URL.

    A process, not a thread of the caller: a test session's Python runs in
    one thread (CPython 3.11's ``ast.parse`` is not thread-safe, and a server
    thread printing a traceback parses), and the server dies with its parent,
    whatever ends it, because it serves only while its standard input is open.
    """
    prefix = "/" + prefix.strip("/") + "/" if prefix.strip("/") else "/"
    server = subprocess.Popen([sys.executable, __file__, str(Path(directory).resolve()), prefix],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        port = server.stdout.readline().strip()
        if not port.isdigit():
            raise RuntimeError(f"the site's server did not start (it exited with {server.wait()})")
        yield f"http://127.0.0.1:{port}{prefix}"
    finally:
        server.stdin.close()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        server.stdout.close()


@dataclass
class Server:
    root: str  # http://127.0.0.1:PORT/prefix/
    prefix: str
    directory: Path

    def url(self, page: str) -> str:
        """The URL of a built HTML file, as a reader's browser asks for it."""
        return self.root + re.sub(r"(^|/)index\.html$", r"\1", page)

    def file(self, url: str) -> Path | None:
        """The built file a URL of this server serves, or None if there is none."""
        path = unquote(urlsplit(url).path)
        if not path.startswith(self.prefix):
            return None
        target = self.directory / path[len(self.prefix) :]
        if target.is_dir():
            target = target / "index.html"
        return target if target.is_file() else None


# One server per session, shared by the fixture below and by the browser's run
# that tests/conftest.py starts early (the URLs it records must be the
# server's that the tests then ask about).
_SERVER: list = []  # [Server, ExitStack] once started
_SERVER_LOCK = threading.Lock()


def shared_server(directory: Path, site_url: str) -> Server:
    """Serve the built site for this session (started on first use)."""
    with _SERVER_LOCK:
        if not _SERVER:
            prefix = urlsplit(site_url or "/").path or "/"
            stack = contextlib.ExitStack()
            root = stack.enter_context(serve_site(directory, prefix))
            _SERVER.extend([Server(root, urlsplit(root).path, directory), stack])
        return _SERVER[0]


def stop_shared_server() -> None:
    """Stop the session's server, if one was started."""
    with _SERVER_LOCK:
        if _SERVER:
            _SERVER.pop().close()
            _SERVER.clear()


if __name__ == "__main__":
    _serve(*sys.argv[1:3])
