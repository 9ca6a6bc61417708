"""Streams of concatenated JSON objects (SLS jobs, Rumen jobs, SLS topology), read one at a time.

SLS and Rumen write one JSON object per job, one after another, with no enclosing array
(Jackson ``readValues``), so a file is not one JSON document.  :func:`iter_objects` decodes
the objects in turn with :meth:`json.JSONDecoder.raw_decode` over a growing text buffer (read
in blocks, gzip or plain), so a large Rumen trace is never held whole, and yields each with the
line it starts on.  Unparsable JSON, a top-level value that is not an object, text that is
not UTF-8 or a corrupt gzip stream is a :class:`TraceError` naming the file and line: a stream
cannot be resynchronized after a syntax error, so the rest of the file would be lost.
"""

from __future__ import annotations

import gzip
import io
import json
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipeline.errors import TraceError
from pipeline.ingest.rawfile import (
    GZIP_MAGIC,
    HEAD_BYTES,
    HashingReader,
    Prefixed,
    check_stored_format,
)
from pipeline.trace.manifest import SourceFile

BLOCK_CHARS = 1 << 20
# A decode error this close to the buffer's end may only mean the object continues in the
# next block (a literal, number or \\u escape cut in two), so more is read before failing.
TAIL_CHARS = 64
WHITESPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


class JsonObjects:
    """The objects of one file in order, with the file's size and sha256 once read through."""

    def __init__(self, path: Path, rel: str) -> None:
        self.path, self.rel = path, rel
        self.objects = 0
        self._reader: HashingReader | None = None

    def __iter__(self) -> Iterator[tuple[int, Any]]:
        """Yield ``(line, object)`` for each top-level value (1-based line where it starts)."""
        self._reader = HashingReader(self.path)
        with self._reader, _text(self._reader, self.path) as text:
            for line, value in _values(text, self.path):
                if not isinstance(value, dict):
                    kind = "array" if isinstance(value, list) else type(value).__name__
                    raise TraceError(f"expected one JSON object per job or rack, found a top-level "
                                     f"{kind} (SLS and Rumen files are streams of objects)",
                                     self.path, line=line)
                self.objects += 1
                yield line, value

    def source(self, table: str) -> SourceFile:
        """The manifest's record of this file (after iterating it to the end)."""
        assert self._reader is not None
        return SourceFile(path=self.rel, table=table, bytes=self._reader.size,
                          sha256=self._reader.digest.hexdigest(), rows=self.objects)


def first_object(path: Path) -> dict[str, Any] | None:
    """The file's first object (None for an empty file), to tell what the file holds."""
    objects = iter(JsonObjects(path, path.name))
    try:
        return next(objects, (0, None))[1]
    finally:
        objects.close()  # type: ignore[attr-defined]


def _text(reader: HashingReader, path: Path) -> io.TextIOWrapper:
    """The file's text, gunzipped when it starts with the gzip magic number."""
    head = b""
    while len(head) < HEAD_BYTES and (more := reader.read(HEAD_BYTES - len(head))):
        head += more
    check_stored_format(head, path)
    raw = io.BufferedReader(Prefixed(head, reader), buffer_size=1 << 20)
    stream = gzip.GzipFile(fileobj=raw, mode="rb") if head.startswith(GZIP_MAGIC) else raw
    return io.TextIOWrapper(stream, encoding="utf-8-sig")  # type: ignore[arg-type]


def _values(text: io.TextIOWrapper, path: Path) -> Iterator[tuple[int, Any]]:
    """Decode concatenated JSON values from ``text``, each with its starting line."""
    buf, pos, line, eof = "", 0, 1, False
    while True:
        end = WHITESPACE.match(buf, pos).end()  # type: ignore[union-attr]
        line += buf.count("\n", pos, end)
        pos = end
        if pos == len(buf):
            if eof:
                return
            buf, pos, eof = _more(text, buf, pos, path)
            continue
        try:
            value, end = _DECODER.raw_decode(buf, pos)
        except json.JSONDecodeError as exc:
            if not eof and (exc.pos >= len(buf) - TAIL_CHARS or exc.msg.startswith("Unterm")):
                buf, pos, eof = _more(text, buf, pos, path, grow=True)
                continue
            at = line + buf.count("\n", pos, exc.pos)
            raise TraceError(f"unparsable JSON ({exc.msg}, column {exc.colno})", path,
                             line=at) from None
        yield line, value
        line += buf.count("\n", pos, end)
        pos = end


def _more(text: io.TextIOWrapper, buf: str, pos: int, path: Path,
          grow: bool = False) -> tuple[str, int, bool]:
    """Drop the consumed text and read the next block (at least doubling an object's buffer
    when it did not fit, so a huge object costs amortized linear time)."""
    buf = buf[pos:]
    size = max(BLOCK_CHARS, len(buf)) if grow else BLOCK_CHARS
    try:
        block = text.read(size)
    except UnicodeDecodeError as exc:
        raise TraceError(f"not UTF-8 text ({exc.reason})", path) from None
    except (EOFError, OSError, zlib.error) as exc:
        raise TraceError(f"corrupt or truncated gzip ({exc})", path) from None
    return buf + block, 0, not block

