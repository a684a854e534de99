"""Bounded little-endian reads of a GGUF header (:class:`Reader`) and its metadata values, for
:mod:`bench.providers.local.gguf`. Every length is checked against the bytes the file has left
before anything is read or allocated, and the file is read through a 1 MiB window, so memory
stays bounded whatever a hostile header claims.

Format: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
"""

from __future__ import annotations

import struct
from typing import BinaryIO

_BLOCK = 1 << 20  # bytes per read
MAX_KEPT_STRING = 1024  # longest string value that is copied out of the file (bytes)

# GGUF metadata value types (gguf.md "gguf_metadata_value_type"): id -> (name, bytes or 0)
STRING, ARRAY, UINT32 = 8, 9, 4
VALUE_TYPES: dict[int, tuple[str, int]] = {
    0: ("uint8", 1), 1: ("int8", 1), 2: ("uint16", 2), 3: ("int16", 2), 4: ("uint32", 4),
    5: ("int32", 4), 6: ("float32", 4), 7: ("bool", 1), 8: ("string", 0), 9: ("array", 0),
    10: ("uint64", 8), 11: ("int64", 8), 12: ("float64", 8),
}
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


class Bad(Exception):
    """A header problem; the message becomes a BenchError naming the file."""


class Reader:
    """Little-endian reads from a file through a 1 MiB window; every length is checked
    against the bytes left in the file before anything is read or allocated."""

    def __init__(self, handle: BinaryIO, size: int) -> None:
        self.handle = handle
        self.size = size
        self.base = 0  # file offset of buf[0]
        self.buf = b""
        self.i = 0

    @property
    def pos(self) -> int:
        """The file offset of the next byte read."""
        return self.base + self.i

    def left(self) -> int:
        """Bytes of the file after :attr:`pos`."""
        return self.size - self.pos

    def _need(self, n: int, what: str) -> None:
        if n > self.left():
            raise Bad(f"truncated: {what} at byte {self.pos:,} needs {n:,} bytes, "
                      f"the file has {self.left():,} left")
        if self.i + n > len(self.buf):
            start = self.pos
            self.handle.seek(start)
            self.buf = self.handle.read(max(n, _BLOCK))
            self.base, self.i = start, 0
            if len(self.buf) < n:
                raise Bad(f"truncated: {what} at byte {start:,} (the file shrank while read)")

    def u32(self, what: str) -> int:
        """The next little-endian uint32; raises :class:`Bad` naming ``what`` past the end."""
        self._need(4, what)
        value: int = _U32.unpack_from(self.buf, self.i)[0]
        self.i += 4
        return value

    def u64(self, what: str) -> int:
        """The next little-endian uint64; raises :class:`Bad` naming ``what`` past the end."""
        self._need(8, what)
        value: int = _U64.unpack_from(self.buf, self.i)[0]
        self.i += 8
        return value

    def raw(self, n: int, what: str) -> bytes:
        """Up to :data:`MAX_KEPT_STRING` bytes (callers bound ``n``)."""
        self._need(n, what)
        out = self.buf[self.i:self.i + n]
        self.i += n
        return out

    def skip(self, n: int, what: str) -> None:
        """Move ``n`` bytes on without reading them; raises :class:`Bad` past the end."""
        if n > self.left():
            raise Bad(f"truncated: {what} at byte {self.pos:,} needs {n:,} bytes, "
                      f"the file has {self.left():,} left")
        if self.i + n <= len(self.buf):
            self.i += n
        else:
            self.base, self.buf, self.i = self.pos + n, b"", 0

    def string(self, what: str, keep: int = 0) -> bytes | None:
        """A GGUF string (u64 length + bytes); returns the bytes if length <= ``keep``."""
        n = self.u64(what + " length")
        if n <= keep:
            return self.raw(n, what)
        self.skip(n, what)
        return None


def type_name(value_type: int) -> str:
    """The name of a GGUF metadata value type (``uint32``, ``string``...), or ``unknown N``."""
    return VALUE_TYPES.get(value_type, (f"unknown {value_type}", 0))[0]


def text(raw: bytes | None, what: str) -> str:
    """``raw`` (a string value read with :meth:`Reader.string`) decoded as UTF-8.

    Raises:
        Bad: it was too long to keep (None) or is not UTF-8; ``what`` names it.
    """
    if raw is None:
        raise Bad(f"{what} is longer than {MAX_KEPT_STRING:,} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Bad(f"{what} is not UTF-8") from None


def skip_value(r: Reader, value_type: int, what: str) -> None:
    """Skip one metadata value of ``value_type`` (arrays element by element for strings).

    Raises:
        Bad: an unknown type, an array of arrays, or a value past the end of the file.
    """
    if value_type == STRING:
        r.string(what)
        return
    if value_type == ARRAY:
        element_type = r.u32(what + " element type")
        count = r.u64(what + " element count")
        if element_type == ARRAY:
            raise Bad(f"{what}: an array of arrays (llama.cpp refuses nested arrays)")
        if element_type == STRING:
            if count * 8 > r.left():
                raise Bad(f"corrupt or hostile header: {what} claims {count:,} strings, the "
                          f"file has {r.left():,} bytes left")
            for _ in range(count):
                r.string(what)
            return
        element_size = VALUE_TYPES.get(element_type, ("", 0))[1]
        if not element_size:
            raise Bad(f"{what}: unknown element type {element_type}")
        r.skip(count * element_size, what)
        return
    size = VALUE_TYPES.get(value_type, ("", 0))[1]
    if not size:
        raise Bad(f"{what}: unknown value type {value_type}")
    r.skip(size, what)
