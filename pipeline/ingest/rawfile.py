"""The stored bytes of a raw part: format check, gzip inflation, hashing, newline-aligned blocks.

A part is gzip (recognized by its magic number, whatever its name) or plain text.  A file
that is neither -- another compression, named ``.gz`` without being gzip, or binary -- is a
:class:`TraceError` naming the file, as is a truncated gzip stream or an empty file: parsing
compressed bytes as text, or half a part, would lose rows without a trace.  The bytes are
hashed as they stream by (the manifest's ``sha256``), and the next block is read and inflated
in a thread while the caller parses the current one.
"""

from __future__ import annotations

import hashlib
import io
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from queue import Queue

from isal import igzip

from pipeline.errors import TraceError

GZIP_MAGIC = b"\x1f\x8b"
HEAD_BYTES = 16  # enough for every magic number below
# Formats a part may be stored in by mistake: magic number -> name.
OTHER_COMPRESSIONS = {
    b"BZh": "bzip2", b"\xfd7zXZ\x00": "xz", b"\x28\xb5\x2f\xfd": "zstd",
    b"PK\x03\x04": "zip", b"\x04\x22\x4d\x18": "lz4",
}


def check_stored_format(head: bytes, path: Path) -> None:
    """Refuse a file whose first bytes show it is neither gzip nor plain text."""
    for magic, name in OTHER_COMPRESSIONS.items():
        if head.startswith(magic) and (name != "bzip2" or head[3:10] == head[3:4] + b"1AY&SY"):
            raise TraceError(f"{name}-compressed, not gzip or plain CSV (recompress it with "
                             "gzip or decompress it)", path)
    if path.suffix == ".gz" and not head.startswith(GZIP_MAGIC):
        raise TraceError("named .gz but not gzip-compressed (no gzip header)", path)
    if b"\x00" in head and not head.startswith(GZIP_MAGIC):
        raise TraceError("binary content, not CSV text", path)


def stored_blocks(path: Path, block_bytes: int) -> tuple[HashingReader, Iterator[bytes]]:
    """The reader of ``path`` (for its size and hash once done) and its decompressed blocks."""
    reader = HashingReader(path)
    return reader, _prefetch(_blocks(reader, path, block_bytes))


def _prefetch(blocks: Iterator[bytes]) -> Iterator[bytes]:
    """Read and inflate the next block in a thread while the caller parses this one.

    File reads and ISA-L inflation release the GIL, so on two cores this overlaps I/O and
    decompression with parsing; errors are re-raised in the caller, in order.
    """
    queue: Queue[tuple[bytes | None, BaseException | None]] = Queue(maxsize=1)

    def produce() -> None:
        try:
            for block in blocks:
                queue.put((block, None))
            queue.put((None, None))
        except BaseException as exc:  # handed to the consumer, never lost
            queue.put((None, exc))

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    while True:
        block, error = queue.get()
        if error is not None:
            raise error
        if block is None:
            break
        yield block
    thread.join()


class HashingReader(io.RawIOBase):
    """A raw file reader that hashes and counts the stored bytes as they stream by."""

    def __init__(self, path: Path) -> None:
        try:
            self._fh = path.open("rb")
        except OSError as exc:
            raise TraceError(f"cannot read file ({exc.strerror})", path) from exc
        self.digest = hashlib.sha256()
        self.size = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        n = self._fh.readinto(buffer)
        if n:
            self.digest.update(memoryview(buffer)[:n])
            self.size += n
        return n or 0

    def close(self) -> None:
        self._fh.close()
        super().close()


def _blocks(reader: HashingReader, path: Path, block_bytes: int) -> Iterator[bytes]:
    """Newline-terminated blocks of about ``block_bytes`` decompressed bytes."""
    with reader:
        head = _read_head(reader)
        if not head:
            raise TraceError("empty file (0 bytes)", path)
        check_stored_format(head, path)
        stream: io.BufferedIOBase
        body = io.BufferedReader(Prefixed(head, reader), buffer_size=1 << 20)
        gzipped = head.startswith(GZIP_MAGIC)
        stream = igzip.IGzipFile(fileobj=body, mode="rb") if gzipped else body
        carry = b""
        try:
            while block := stream.read(block_bytes):
                data = carry + block
                cut = data.rfind(b"\n")
                if cut < 0:  # a line longer than a block: keep reading
                    carry = data
                    continue
                carry = data[cut + 1:]
                yield data[: cut + 1]
        except (EOFError, OSError, zlib.error) as exc:
            raise TraceError(f"corrupt or truncated gzip ({exc})", path) from exc
        if carry.strip():
            yield carry + b"\n"


def _read_head(reader: HashingReader) -> bytes:
    """The first ``HEAD_BYTES`` of a file (fewer only if it is that short)."""
    head = b""
    while len(head) < HEAD_BYTES and (more := reader.read(HEAD_BYTES - len(head))):
        head += more
    return head


class Prefixed(io.RawIOBase):
    """``reader`` with ``prefix`` (bytes already read from it) put back in front."""

    def __init__(self, prefix: bytes, reader: HashingReader) -> None:
        self._prefix = prefix
        self._reader = reader

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        if self._prefix:
            n = min(len(buffer), len(self._prefix))
            buffer[:n] = self._prefix[:n]
            self._prefix = self._prefix[n:]
            return n
        return self._reader.readinto(buffer)
