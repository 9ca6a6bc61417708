"""A loopback HTTP server laid out like the official buckets, with faults on demand."""

from __future__ import annotations

import gzip
import hashlib
import re
import shutil
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

import pytest

from pipeline.fetch import download

SHARED_TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
GOOGLE = SHARED_TRACES / "google-clusterdata-2011-2"
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


@dataclass
class Control:
    """What the server serves, which faults it injects, and what it was asked."""

    root: Path
    url: str = ""
    ignore_range: bool = False
    drop_once: set[str] = field(default_factory=set)  # cut these bodies in half, once
    fail_once: dict[str, int] = field(default_factory=dict)  # answer this status, once
    fail_always: dict[str, int] = field(default_factory=dict)
    requests: list[tuple[str, str | None]] = field(default_factory=list)  # (rel, Range)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def write_sha256sum(self) -> None:
        """Regenerate ``SHA256SUM`` after changing files under ``root``."""
        write_sha256sum(self.root)

    def asked(self, rel: str) -> list[str | None]:
        """The Range headers of every request for ``rel``."""
        return [r for path, r in self.requests if path == rel]


class RangeHandler(BaseHTTPRequestHandler):
    """GET with single open-ended ``Range: bytes=N-`` support (like GCS and OSS)."""

    server: _Server

    def do_GET(self) -> None:
        ctl = self.server.control
        rel = unquote(self.path.split("?", 1)[0].lstrip("/"))
        ranged = self.headers.get("Range")
        with ctl.lock:
            ctl.requests.append((rel, ranged))
            status = ctl.fail_once.pop(rel, None) or ctl.fail_always.get(rel)
            drop = rel in ctl.drop_once
            ctl.drop_once.discard(rel)
        path = (ctl.root / rel).resolve()
        if status or ctl.root.resolve() not in path.parents or not path.is_file():
            self.send_error(status or 404)
            return
        self._send(path.read_bytes(), None if ctl.ignore_range else ranged, drop)

    def _send(self, data: bytes, ranged: str | None, drop: bool) -> None:
        start = int(re.fullmatch(r"bytes=(\d+)-", ranged).group(1)) if ranged else 0
        if start >= len(data) and ranged:
            self.send_response(416)
            self.send_header("Content-Range", f"bytes */{len(data)}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = data[start:]
        self.send_response(206 if ranged else 200)
        self.send_header("Content-Length", str(len(body)))
        if ranged:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.end_headers()
        # A drop sends half the promised body and closes: the client sees a short read.
        self.wfile.write(body[: len(body) // 2] if drop else body)
        self.wfile.flush()

    def log_message(self, format: str, *args: object) -> None:
        """Keep test output quiet."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    control: Control


def _gz_lines(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress("".join(f"{line}\n" for line in lines).encode(), mtime=0))


def write_sha256sum(root: Path) -> None:
    """Write ``root/SHA256SUM`` over every other file, as ``sha256sum`` prints it."""
    lines = []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.name != "SHA256SUM"):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        lines.append(f"{digest}  {path.relative_to(root).as_posix()}\n")
    (root / "SHA256SUM").write_text("".join(lines))


@pytest.fixture
def bucket(tmp_path: Path) -> Path:
    """A directory laid out like ``gs://clusterdata-2011-2`` (a few real parts, a few tiny)."""
    if not GOOGLE.is_dir():
        pytest.skip(f"shared traces not found at {GOOGLE}")
    root = tmp_path / "bucket"
    (root / "job_events").mkdir(parents=True)
    (root / "task_events").mkdir()
    shutil.copy(GOOGLE / "job_events" / "part-00000-of-00500.csv.gz",
                root / "job_events" / "part-00000-of-00500.csv.gz")
    shutil.copy(GOOGLE / "task_events" / "part-00000-of-00500.head120k.csv.gz",
                root / "task_events" / "part-00000-of-00500.csv.gz")
    shutil.copy(GOOGLE / "schema.csv", root / "schema.csv")
    for part in (1, 2):
        _gz_lines(root / "task_events" / f"part-{part:05d}-of-00500.csv.gz",
                  [f"{5_700_000_000 + part},,{part},0,,0,u,0,0,0.1,0.1,0,0"])
    _gz_lines(root / "machine_events" / "part-00000-of-00001.csv.gz",
              ["0,5,0,p,0.5,0.5", "0,6,0,p,1,1"])
    write_sha256sum(root)
    return root


@pytest.fixture
def server(bucket: Path) -> Iterator[Control]:
    """A threaded loopback server over ``bucket``; its Control says what it served."""
    httpd = _Server(("127.0.0.1", 0), RangeHandler)
    httpd.control = Control(root=bucket, url=f"http://127.0.0.1:{httpd.server_address[1]}/")
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield httpd.control
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reaches beyond 127.0.0.1: no proxies, and other connects fail loudly."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                 "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    connect = socket.socket.connect

    def guarded(sock: socket.socket, address: object) -> None:
        host = address[0] if isinstance(address, tuple) else address
        if host not in _LOOPBACK:
            raise AssertionError(f"test tried to reach {address}")
        connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    monkeypatch.setattr(download, "DEFAULT_RETRY",
                        download.RetryPolicy(attempts=3, backoff_s=0.01, max_backoff_s=0.05,
                                             budget_s=1.0))
