"""Reading and writing Python source without losing what the file was.

Keeps the encoding (PEP 263 cookie or UTF-8), a UTF-8 BOM, and line endings (libcst
reproduces the original newlines; new lines use the file's first newline style).
Writes are atomic: a temporary file in the same folder, then `os.replace`; given the
digest of the bytes that were read, a write refuses to replace a file changed since.
"""

from __future__ import annotations

import codecs
import hashlib
import io
import os
import stat
import tempfile
import tokenize
from dataclasses import dataclass


class SourceError(Exception):
    """The file cannot be read as Python text (binary, bad encoding, unreadable)."""


class SourceChangedError(SourceError):
    """The file on disk is no longer what was read: writing would lose someone's edit."""


@dataclass(frozen=True)
class SourceText:
    text: str
    encoding: str
    bom: bool
    #: sha256 of the bytes the text was decoded from ("" when not read from bytes)
    digest: str = ""

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
    return SourceText(text=text, encoding=encoding, bom=bom, digest=digest(data))


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as error:
        raise SourceError(error.strerror or str(error)) from None


def read_source(path: str) -> SourceText:
    return decode_source(read_bytes(path))


def write_atomic(path: str, data: bytes, expected_digest: str | None = None) -> None:
    """Replace `path` with `data` in one step, keeping its permission bits.

    A new file gets the permissions `open()` would give it (0o666 less the umask), not
    the owner-only bits of the temporary file it starts as. With `expected_digest`, the
    file is compared with it just before the replace and left alone
    (SourceChangedError) if it changed, or vanished, since it was read.
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
        if expected_digest is not None and _current_digest(path) != expected_digest:
            raise SourceChangedError("changed on disk since it was read; not overwritten (run again)")
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise


def _current_digest(path: str) -> str | None:
    try:
        return digest(read_bytes(path))
    except SourceError:
        return None
def _umask() -> int:
    """The process umask (it can only be read by setting it, so it is set straight back)."""
    current = os.umask(0o022)
    os.umask(current)
    return current
