"""Resumable, verified HTTP downloads, and the fetch stage built on them.

Each file goes to ``OUT/REL.part`` first.  A later run resumes a partial file with a
``Range`` request (a server that answers 200 instead of 206 ignored the range, so the partial
file is dropped and the download starts over).  When all bytes are in, the size is checked
against the published size or the server's length, the sha256 against the published hash
(when one is known), and only then is the file renamed to ``OUT/REL``: a file under its own
name is always complete.  Connection failures, timeouts, 429 and 5xx answers are retried
with exponential backoff (bounded attempts and total waiting); anything else is a
:class:`TraceError` naming the URL or file.  Bytes are sent as stored (``Accept-Encoding:
identity``, never decoded), so hashes are over the published bytes.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import requests
import urllib3
from tqdm import tqdm

from pipeline import __version__
from pipeline.errors import TraceError, UsageError
from pipeline.fetch import datasets

CHUNK_BYTES = 1 << 20
TIMEOUT_S = (10.0, 60.0)  # (connect, read between bytes) for every request
_CONTENT_RANGE = re.compile(r"^bytes (?:(\d+)-\d+|\*)/(\d+|\*)$")
_TRANSIENT_ERRORS = (requests.RequestException, urllib3.exceptions.HTTPError,
                     ConnectionError, TimeoutError)


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to retry transient failures of one file."""

    attempts: int = 5  # consecutive failures without new bytes before giving up
    backoff_s: float = 1.0  # first wait; doubles per consecutive failure
    max_backoff_s: float = 30.0
    budget_s: float = 120.0  # total waiting between retries of one file


DEFAULT_RETRY = RetryPolicy()


class NotFoundError(TraceError):
    """The server has no such file (HTTP 404 or 410)."""


class _TransientError(Exception):
    """A failure worth retrying (resuming from what is already on disk)."""


@dataclass
class Result:
    """What happened to one file."""

    status: str  # "downloaded" or "skipped"
    size: int
    received: int  # bytes received over the network in this call


class _Partial:
    """The ``.part`` file being filled: its length, a running sha256, and the progress bar."""

    def __init__(self, path: Path, bar: tqdm) -> None:
        self.path = path
        self.bar = bar
        self.offset = 0
        self.received = 0
        self.hasher = hashlib.sha256()
        if path.exists():
            self.offset = _hash_into(self.hasher, path)
            bar.update(self.offset)

    def reset(self) -> None:
        """Drop the partial file and start from byte 0."""
        _unlink(self.path)
        self.offset = 0
        self.hasher = hashlib.sha256()
        self.bar.reset(total=self.bar.total)

    @contextlib.contextmanager
    def appending(self) -> Iterator[BinaryIO]:
        """The partial file opened for appending; flushed to disk on the way out."""
        # Only file operations become disk errors: network errors are OSErrors too.
        handle = self._disk(open, self.path, "ab")
        try:
            yield handle
            self._disk(handle.flush)
            self._disk(os.fsync, handle.fileno())
        finally:
            handle.close()

    def write(self, handle: BinaryIO, chunk: bytes) -> None:
        """Append ``chunk`` (bytes at ``offset``) and account for it."""
        self._disk(handle.write, chunk)
        self.hasher.update(chunk)
        self.offset += len(chunk)
        self.received += len(chunk)
        self.bar.update(len(chunk))

    def _disk(self, operation: Any, *args: Any) -> Any:
        try:
            return operation(*args)
        except OSError as exc:
            raise TraceError(f"cannot write: {exc.strerror or exc}", self.path) from None


def download_file(
    session: requests.Session, url: str, dest: Path, *, size: int | None = None,
    sha256: str | None = None, progress: bool = True, label: str | None = None,
    retry: RetryPolicy | None = None,
) -> Result:
    """Download ``url`` to ``dest`` unless a verified copy is there; resume, verify, rename."""
    if dest.is_file():
        if _verified(dest, size, sha256):
            return Result("skipped", dest.stat().st_size, 0)
        _unlink(dest)  # damaged or stale: only verified files keep their name
    _mkdir(dest.parent)
    part = dest.with_name(dest.name + ".part")
    with tqdm(total=size, desc=label or dest.name, unit="B", unit_scale=True,
              unit_divisor=1024, leave=False, disable=None if progress else True) as bar:
        state = _Partial(part, bar)
        if size is not None and state.offset > size:
            state.reset()
        total = size if size is not None and state.offset == size else None
        if total is None:
            total = _with_retries(session, url, state, size, retry or DEFAULT_RETRY)
        _finish(state, dest, size if size is not None else total, sha256)
    return Result("downloaded", state.offset, state.received)


def _with_retries(session: requests.Session, url: str, state: _Partial, size: int | None,
                  retry: RetryPolicy) -> int | None:
    """Transfer until the server has sent everything, retrying transient failures."""
    failures, waited_s = 0, 0.0
    while True:
        before = state.offset
        try:
            return _transfer(session, url, state, size)
        except _TransientError as exc:
            failures = 1 if state.offset > before else failures + 1
            delay_s = min(retry.max_backoff_s, retry.backoff_s * 2 ** (failures - 1))
            if failures >= retry.attempts or waited_s + delay_s > retry.budget_s:
                raise TraceError(f"download failed after {failures} consecutive "
                                 f"attempt(s): {exc}", url) from None
            time.sleep(delay_s)
            waited_s += delay_s


def _transfer(session: requests.Session, url: str, state: _Partial,
              size: int | None) -> int | None:
    """One request: append what the server sends; the file's full length when known."""
    headers = {"Accept-Encoding": "identity"}
    if state.offset:
        headers["Range"] = f"bytes={state.offset}-"
    try:
        with session.get(url, headers=headers, stream=True, timeout=TIMEOUT_S) as response:
            total = _answer(response, url, state, size)
            if total is not None and state.offset == total:
                return total
            if total is not None:
                state.bar.reset(total=total)
                state.bar.update(state.offset)
            with state.appending() as handle:
                for chunk in response.raw.stream(CHUNK_BYTES, decode_content=False):
                    state.write(handle, chunk)
    except _TRANSIENT_ERRORS as exc:
        raise _TransientError(f"{type(exc).__name__}: {exc}") from None
    if total is not None and state.offset < total:
        raise _TransientError(f"connection closed after {state.offset} of {total} bytes")
    return total


def _answer(response: requests.Response, url: str, state: _Partial,
            size: int | None) -> int | None:
    """Check the status; the full length of the file (None when the server does not say)."""
    status = response.status_code
    if status == 206:
        start, total = _content_range(response, url)
        if start != state.offset:
            asked = state.offset
            state.reset()
            raise _TransientError(f"server sent bytes from {start}, asked for {asked}")
    elif status == 200:
        if state.offset:
            state.reset()  # the server ignored Range: start over
        length = response.headers.get("Content-Length")
        total = int(length) if length and length.isdigit() else None
    elif status == 416 and state.offset:
        _, total = _content_range(response, url)
        if total != state.offset:
            state.reset()
            raise _TransientError(f"range not satisfiable (file is {total} bytes); restarting")
    elif status in (404, 410):
        raise NotFoundError(f"not found (HTTP {status})", url)
    elif status == 429 or status >= 500:
        raise _TransientError(f"HTTP {status} {response.reason}")
    else:
        raise TraceError(f"HTTP {status} {response.reason}", url)
    if size is not None and total is not None and total != size:
        raise TraceError(f"server offers {total} bytes, the published size is {size}", url)
    return total


def _content_range(response: requests.Response, url: str) -> tuple[int | None, int | None]:
    """(first byte, full length) from a Content-Range header."""
    match = _CONTENT_RANGE.match(response.headers.get("Content-Range", "").strip())
    if not match:
        raise TraceError(f"HTTP {response.status_code} without a valid Content-Range "
                         f"({response.headers.get('Content-Range')!r})", url)
    start, total = match.groups()
    return (int(start) if start else None), (int(total) if total != "*" else None)


def _finish(state: _Partial, dest: Path, expected_size: int | None,
            sha256: str | None) -> None:
    """Check size and hash of the complete partial file, then rename it into place."""
    if expected_size is not None and state.offset != expected_size:
        got = state.offset
        state.reset()
        raise TraceError(f"size mismatch: got {got} bytes, expected {expected_size}; "
                         "partial download deleted", dest)
    digest = state.hasher.hexdigest()
    if sha256 is not None and digest != sha256.lower():
        state.reset()
        raise TraceError(f"sha256 mismatch: expected {sha256.lower()}, got {digest}; "
                         "download deleted", dest)
    try:
        state.path.touch(exist_ok=True)  # an empty file may never have been opened
        os.replace(state.path, dest)
    except OSError as exc:
        raise TraceError(f"cannot move download into place: {exc.strerror or exc}",
                         dest) from None


def _verified(path: Path, size: int | None, sha256: str | None) -> bool:
    """Whether the file at ``path`` has the expected size and hash (where known)."""
    if size is not None and path.stat().st_size != size:
        return False
    return sha256 is None or _file_sha256(path) == sha256.lower()


def _file_sha256(path: Path) -> str:
    hasher = hashlib.sha256()
    _hash_into(hasher, path)
    return hasher.hexdigest()


def _hash_into(hasher: Any, path: Path) -> int:
    """Feed the file's bytes to ``hasher``; the number of bytes read."""
    count = 0
    try:
        with open(path, "rb") as handle:
            while block := handle.read(CHUNK_BYTES):
                hasher.update(block)
                count += len(block)
    except OSError as exc:
        raise TraceError(f"cannot read: {exc.strerror or exc}", path) from None
    return count


def _mkdir(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TraceError(f"cannot create directory: {exc.strerror or exc}", path) from None


def _unlink(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        raise TraceError(f"cannot delete: {exc.strerror or exc}", path) from None


def fetch(dataset: str, out: Path, parts: list[str] | None = None,
          base_url: str | None = None, progress: bool = True) -> dict[str, Any]:
    """Download the selected official files of ``dataset`` into ``out``; a summary dict.

    ``parts`` are selectors (see :func:`pipeline.fetch.datasets.select`; None = the
    dataset's default selection).  A dataset with a checksum list (Google's ``SHA256SUM``)
    has it fetched first and every selected file checked against it.  Files already in
    place and verified are skipped, so re-running completes an interrupted fetch.
    """
    spec = datasets.dataset(dataset)
    files = datasets.select(spec, parts)
    base = _base_url(base_url or spec.base_url)
    out = Path(out)
    _mkdir(out)
    summary: dict[str, Any] = {
        "dataset": spec.name, "out": str(out), "base_url": base, "files": 0,
        "downloaded": [], "skipped": [], "unverified": [],
        "bytes_downloaded": 0, "bytes_total": 0, "checksum_list": None,
    }
    with requests.Session() as session:
        session.headers["User-Agent"] = f"tracereplay/{__version__}"
        sums = _checksums(session, spec, base, out, progress, summary)
        todo = [f for f in files if f.rel != spec.checksum_file]
        for number, remote in enumerate(todo, start=1):
            sha256 = remote.sha256 or sums.get(remote.rel)
            result = download_file(
                session, base + remote.rel, out / remote.rel, size=remote.size,
                sha256=sha256, progress=progress, label=f"[{number}/{len(todo)}] {remote.rel}",
            )
            _record(summary, remote.rel, result, verified=sha256 is not None)
    return summary


def _checksums(session: requests.Session, spec: datasets.Dataset, base: str, out: Path,
               progress: bool, summary: dict[str, Any]) -> dict[str, str]:
    """Fetch and parse the dataset's checksum list (empty when it has none or it is missing)."""
    if spec.checksum_file is None:
        summary["checksum_list"] = "none"
        return {}
    rel = spec.checksum_file
    try:
        result = download_file(session, base + rel, out / rel, progress=progress, label=rel)
    except NotFoundError:
        summary["checksum_list"] = f"{rel} not found at {base}; sizes checked only"
        return {}
    _record(summary, rel, result, verified=False)
    summary["checksum_list"] = rel
    return datasets.parse_sha256sum(out / rel)


def _record(summary: dict[str, Any], rel: str, result: Result, *, verified: bool) -> None:
    summary["files"] += 1
    summary[result.status].append(rel)
    summary["bytes_downloaded"] += result.received
    summary["bytes_total"] += result.size
    if not verified:
        summary["unverified"].append(rel)


def _base_url(url: str) -> str:
    """``url`` checked and ending in one slash, ready to have relative paths appended."""
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"base URL must start with http:// or https:// (got '{url}')",
                         field="--base-url")
    return url.rstrip("/") + "/"
