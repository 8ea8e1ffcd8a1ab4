"""Reading and writing Python source without losing what the file was.

Keeps the encoding (PEP 263 cookie or UTF-8), a UTF-8 BOM, and line endings (libcst
reproduces the original newlines; new lines use the file's first newline style).
Writing a user's file is `cli.writes.write_user_file`'s job (symlinks, hard links,
owner, mode, read-only files, edits made meanwhile); `digest` is what it compares.
"""

from __future__ import annotations

import codecs
import hashlib
import io
import os
import stat
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


#: the largest source file analysed by default (`max-file-size`): an 8 MB generated file
#: costs a second of analysis per 0.5 MB and about 1 GB of memory
DEFAULT_MAX_FILE_BYTES = 2_000_000


def read_bytes(path: str, limit: int | None = None) -> bytes:
    """The file's bytes. Opened without blocking (a FIFO put in a file's place after
    the tree was listed must not hang the run) and only if it is a regular file; with
    `limit`, a larger file is a `SourceError` and is not read whole."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise SourceError(error.strerror or str(error)) from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SourceError("not a regular file")
        if limit is not None and info.st_size > limit:
            raise SourceError(f"is {info.st_size:,} bytes, more than max-file-size ({limit:,}); skipped")
        os.set_blocking(fd, True)
        try:
            data = handle.read() if limit is None else handle.read(limit + 1)
        except OSError as error:
            raise SourceError(error.strerror or str(error)) from None
    if limit is not None and len(data) > limit:
        raise SourceError(f"is more than max-file-size ({limit:,} bytes); skipped")
    return data


def read_source(path: str, limit: int | None = None) -> SourceText:
    return decode_source(read_bytes(path, limit))
