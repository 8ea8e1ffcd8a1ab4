"""Reading and writing Python source without losing what the file was.

Keeps the encoding (PEP 263 cookie or UTF-8), a UTF-8 BOM, and line endings (libcst
reproduces the original newlines; new lines use the file's first newline style).
Writes are atomic: a temporary file in the same folder, then `os.replace`.
"""

from __future__ import annotations

import codecs
import io
import os
import stat
import tempfile
import tokenize
from dataclasses import dataclass


class SourceError(Exception):
    """The file cannot be read as Python text (binary, bad encoding, unreadable)."""


@dataclass(frozen=True)
class SourceText:
    text: str
    encoding: str
    bom: bool

    def encode(self, text: str) -> bytes:
        data = text.encode(self.encoding)
        return codecs.BOM_UTF8 + data if self.bom else data


def decode_source(data: bytes) -> SourceText:
    """Decode Python source bytes the way the interpreter would."""
    if b"\x00" in data:
        raise SourceError("binary file (contains NUL bytes)")
    bom = data.startswith(codecs.BOM_UTF8)
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as error:
        raise SourceError(f"cannot determine encoding: {error}") from None
    if encoding == "utf-8-sig":
        encoding = "utf-8"
    body = data[len(codecs.BOM_UTF8):] if bom else data
    try:
        text = body.decode(encoding)
    except (UnicodeDecodeError, LookupError) as error:
        raise SourceError(f"not valid {encoding} text: {error}") from None
    return SourceText(text=text, encoding=encoding, bom=bom)


def read_source(path: str) -> SourceText:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        raise SourceError(error.strerror or str(error)) from None
    return decode_source(data)


def write_atomic(path: str, data: bytes) -> None:
    """Replace `path` with `data` in one step, keeping its permission bits.

    A new file gets the permissions `open()` would give it (0o666 less the umask), not
    the owner-only bits of the temporary file it starts as.
    """
    directory = os.path.dirname(os.path.abspath(path))
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        mode = 0o666 & ~_umask()
    fd, temp = tempfile.mkstemp(prefix=".autograd-fix-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise


def _umask() -> int:
    """The process umask (it can only be read by setting it, so it is set straight back)."""
    current = os.umask(0o022)
    os.umask(current)
    return current
