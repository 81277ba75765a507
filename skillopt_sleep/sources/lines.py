"""Reading session logs line by line with bounded memory, for :mod:`.ingest`.

:class:`LineReader` yields complete lines from a file object read in :data:`CHUNK` pieces
and tracks the byte offset just after the last consumed ``\\n`` (an unterminated last line
waits for the next pass). Lines over :data:`MAX_LINE` bytes are skipped and counted, never
held whole. A file is binary (``SkipFile``) when its first :data:`HEAD` bytes hold a NUL and
it does not start like JSON Lines (:func:`looks_binary`); in a text file a run of NUL bytes
(the zero-filled tail a crash leaves, before the next record is appended) ends a line like
``\\n``: what is before it and what follows are parsed (or skipped) each on its own.
:func:`batches` groups lines into :data:`BATCH_BYTES` batches for ``Source.parse``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from typing import IO

#: longest line parsed (bytes); longer lines are skipped as ``line_too_long``
MAX_LINE = 8 * 1024 * 1024
#: read size (bytes)
CHUNK = 1024 * 1024
#: bytes of lines handed to one ``Source.parse`` call
BATCH_BYTES = 4 * 1024 * 1024
#: bytes hashed to recognise a replaced file
HEAD = 4096


#: a run of NUL bytes inside a line of a text file: a line break
_NULS = re.compile(rb"\x00+")


def looks_binary(head: bytes) -> bool:
    """Whether a file whose first bytes are ``head`` is binary: a NUL in them and, leading
    NULs, whitespace and a byte order mark aside, no ``{`` or ``[`` to start JSON with."""
    if b"\x00" not in head:
        return False
    return head.lstrip(b"\x00\xef\xbb\xbf \t\r\n")[:1] not in (b"{", b"[")


class SkipFile(Exception):
    """A file is skipped for ``reason``."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class LineReader:
    """Yield complete lines (without ``\\r\\n``) from ``fh`` read in :data:`CHUNK` pieces.

    ``offset`` is the position just after the last consumed ``\\n``. With ``final`` (a finished
    ``.zst`` stream) an unterminated last line is consumed too.
    """

    def __init__(
        self, fh: IO[bytes], offset: int, *, final: bool = False, check_binary: bool = False
    ):
        self.fh, self.offset, self.pos = fh, offset, offset
        self.final, self.check_binary = final, check_binary
        self.bytes_read = 0
        self.skipped: Counter = Counter()
        self.warnings: Counter = Counter()

    def _emit(self, buf: bytearray | bytes) -> bytes | None:
        line = bytes(buf).rstrip(b"\r")
        if not line.strip():
            return None
        if not line.isascii():
            try:
                line.decode("utf-8")
            except UnicodeDecodeError:
                self.warnings["non_utf8"] += 1
        return line

    def _pieces(self, line: bytes) -> Iterator[bytes]:
        """``line``, or its pieces between runs of NUL bytes (counted as ``nul_bytes``)."""
        if b"\x00" not in line:
            yield line
            return
        self.warnings["nul_bytes"] += 1
        for piece in _NULS.split(line):
            if piece.strip():
                yield piece

    def __iter__(self) -> Iterator[bytes]:
        buf, discarding = bytearray(), False
        while True:
            chunk = self.fh.read(CHUNK)
            if not chunk:
                break
            if self.check_binary:
                self.check_binary = False
                if looks_binary(chunk[:HEAD]):
                    raise SkipFile("binary")
            base = self.pos
            self.pos += len(chunk)
            self.bytes_read += len(chunk)
            i = 0
            while True:
                nl = chunk.find(b"\n", i)
                if nl < 0:
                    if not discarding:
                        buf += chunk[i:]
                        if len(buf) > MAX_LINE:
                            discarding, buf = True, bytearray()
                    break
                line = None
                if discarding or len(buf) + (nl - i) > MAX_LINE:
                    self.skipped["line_too_long"] += 1
                else:
                    buf += chunk[i:nl]
                    line = self._emit(buf)
                buf, discarding = bytearray(), False
                self.offset = base + nl + 1
                i = nl + 1
                if line is not None:
                    yield from self._pieces(line)
        if self.final and (buf or discarding):
            if discarding:
                self.skipped["line_too_long"] += 1
                line = None
            else:
                line = self._emit(buf)
            self.offset = self.pos
            if line is not None:
                yield from self._pieces(line)


def batches(lines: Iterator[bytes]) -> Iterator[list[bytes]]:
    batch: list[bytes] = []
    size = 0
    for line in lines:
        batch.append(line)
        size += len(line)
        if size >= BATCH_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch
