"""Fixtures for the distribution tests: tiny generated datasets and a loopback HTTP server with Range support.

`DataServer` serves a folder over HTTP/1.1 on 127.0.0.1 (a fresh port each time), answers `Range: bytes=N-` with
206 (Python's stock http.server does not; `ranges = False` ignores Range, as some hosts do), and injects
faults: a path that answers 404, a path served with other
bytes, and a path whose transfer stops after a number of bytes (the connection is dropped, or the whole server is
shut down, as a host dying mid-file). Every request is logged as (path, range start or None, status).
"""

from __future__ import annotations

import http.server
import shutil
import socket
import threading
from pathlib import Path

import pytest

from ssmbench.data.make.generate import generate_dataset
from ssmbench.task_config import resolve_config


class DataServer:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.log: list[tuple[str, int | None, int]] = []
        self.missing: set[str] = set()
        self.replace: dict[str, bytes] = {}
        self.cut: dict[str, int] = {}  # path -> bytes sent before the transfer dies (once per path)
        self.die_on_cut = False  # also shut the whole server down at the cut
        self.ranges = True  # False: ignore Range headers and always send the whole file (200), as some hosts do
        self.pause: dict[str, threading.Event] = {}  # path -> send half the body, then wait for this event
        self.token: str | None = None  # when set, answer 401 to requests without "Authorization: Bearer <token>"
        self.auth_seen: list[str | None] = []  # the Authorization header of every request
        self.bytes_sent: dict[str, int] = {}
        self._lock = threading.Lock()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # keep pytest output clean
                pass

            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                server._get(self)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)
        self.thread.start()

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.port}/{path}"

    def requests_for(self, path: str) -> list[tuple[str, int | None, int]]:
        return [entry for entry in self.log if entry[0] == path]

    def stop(self) -> None:
        for gate in self.pause.values():
            gate.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def _record(self, path: str, start: int | None, status: int, sent: int = 0) -> None:
        with self._lock:
            self.log.append((path, start, status))
            self.bytes_sent[path] = self.bytes_sent.get(path, 0) + sent

    def _get(self, h: http.server.BaseHTTPRequestHandler) -> None:
        path = h.path.lstrip("/")
        file = self.root / path
        self.auth_seen.append(h.headers.get("Authorization"))
        if self.token is not None and h.headers.get("Authorization") != f"Bearer {self.token}":
            self._record(path, None, 401)
            h.send_response(401)
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        if path in self.missing or not file.is_file():
            self._record(path, None, 404)
            h.send_response(404)
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        data = self.replace.get(path, file.read_bytes())
        start = None
        header = h.headers.get("Range")
        if self.ranges and header and header.startswith("bytes=") and header.endswith("-"):
            start = int(header[len("bytes="):-1])
            if start >= len(data):
                self._record(path, start, 416)
                h.send_response(416)
                h.send_header("Content-Range", f"bytes */{len(data)}")
                h.send_header("Content-Length", "0")
                h.end_headers()
                return
        body = data[start or 0:]
        status = 206 if start is not None else 200
        h.send_response(status)
        if start is not None:
            h.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        h.send_header("Content-Length", str(len(body)))
        h.send_header("Accept-Ranges", "bytes")
        h.end_headers()
        # Record before writing: the client may act on the response before this thread runs again.
        cut = self.cut.pop(path, None)
        if cut is not None:
            self._record(path, start, status, cut)
            h.wfile.write(body[:cut])
            h.wfile.flush()
            h.close_connection = True
            h.connection.shutdown(socket.SHUT_RDWR)
            if self.die_on_cut:
                threading.Thread(target=self.stop, daemon=True).start()
            return
        self._record(path, start, status, len(body))
        gate = self.pause.get(path)
        if gate is not None:
            h.wfile.write(body[:len(body) // 2])
            h.wfile.flush()
            gate.wait(60)
            body = body[len(body) // 2:]
        h.wfile.write(body)


@pytest.fixture(scope="session")
def tiny_shift(tmp_path_factory) -> Path:
    """shift-64: 40 samples in 6 shards of 8 (train 4 shards, val 1, test 1). Treat as read-only; copy to change."""
    out = tmp_path_factory.mktemp("built")
    _, config, _ = resolve_config("shift", length=64)
    result = generate_dataset("shift", config, out=out, n=40, samples_per_shard=8, quiet=True,
                              argv=["generate", "shift", "--length", "64", "--n", "40", "--samples-per-shard", "8"])
    return result.path


@pytest.fixture
def make_server():
    """A factory of DataServers over a folder; all are stopped at the end of the test."""
    servers: list[DataServer] = []

    def make(root: Path) -> DataServer:
        servers.append(DataServer(root))
        return servers[-1]

    yield make
    for server in servers:
        server.stop()


@pytest.fixture
def host(tmp_path, tiny_shift):
    """A server publishing a copy of tiny_shift under /ssm/shift-64/ (no .build/), stopped at the end."""
    served = tmp_path / "served"
    shutil.copytree(tiny_shift, served / "ssm" / tiny_shift.name, ignore=shutil.ignore_patterns(".build"))
    server = DataServer(served)
    yield server
    try:
        server.stop()
    except OSError:
        pass


def _build(tmp_path_factory, task: str, n: int, split: dict, **kwargs) -> Path:
    _, config, _ = resolve_config(task, **kwargs)
    out = tmp_path_factory.mktemp(task)
    return generate_dataset(task, config, out=out, n=n, split=split, samples_per_shard=8, quiet=True).path


@pytest.fixture(scope="session")
def pathfinder(tmp_path_factory) -> Path:
    """Pathfinder 32 x 32: train 25 samples (shards of 8, 8, 8, 1), val 7, test 8. Read-only."""
    return _build(tmp_path_factory, "pathfinder", 40, {"train": 25, "val": 7, "test": 8}, size=32)


@pytest.fixture(scope="session")
def listops(tmp_path_factory) -> Path:
    """ListOps-Subtrees (preset short): train 16 samples (shards of 8), val 4, test 4. Read-only."""
    return _build(tmp_path_factory, "listops_subtrees", 24, {"train": 16, "val": 4, "test": 4}, preset="short")
