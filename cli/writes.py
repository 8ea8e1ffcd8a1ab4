"""Writing a user's file without breaking what the file is: the one place that does it.

`--apply` (and `--output-file`) write through `write_user_file`. What it promises:

- **Symlinks** are written through to their target; the link itself is never replaced
  by a copy. A link whose target lies outside the paths the user named (`roots`) is
  refused: the user asked to fix one tree, not whatever a link points at.
- **Read-only files** (no write bit in the mode, e.g. 0444) are refused, even when the
  tool runs as root and could write them anyway: the mode bits are the owner's wish,
  so they are checked, not `os.access`.
- **Concurrent edits**: the bytes on disk just before the write must be the bytes that
  were read and checked (`expected_digest`, sha256); a file changed or removed since is
  left alone. The window that remains is the few microseconds between that last
  comparison and the write itself.
- **Swapped files**: every open of the file after its check is `O_NOFOLLOW` and must find
  the very inode (device and inode number) that was checked, so a symlink or another
  file swapped in between the check and the write is refused, not written through (a
  race that once let a fix land outside the named path). Folders above the file are
  not re-checked: one swapped for a link mid-run is outside this promise.
- **Hard links, owner, group, mode (and extended attributes)** are kept. A file with
  more than one link, owned by someone else than the writing user, or in a folder that
  takes no new file (no write permission there), is rewritten in place (the same
  inode: every link sees the fix, the owner stays), after the content check made
  through the very descriptor that is then written. Any other file is
  replaced atomically (a temporary file in the same folder, then `os.replace`), with
  mode, owner, group and extended attributes copied to the new file first, so a crash
  mid-write never leaves half a file.

Every refusal is a `WriteRefused` with a message for the per-file error line; the file
is then unchanged.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import tempfile
from typing import Iterable, Sequence


class WriteRefused(Exception):
    """The file was not written; the message says why (one line, no path)."""


class _NoSibling(Exception):
    """The folder takes no temporary file: the atomic replace is impossible there."""


def allowed_roots(paths: Iterable[str]) -> tuple[str, ...]:
    """The real locations of the paths the user named: a symlinked file may be written
    through only when its target lies under one of them. A file named explicitly is a
    root of its own (so a link named on the command line is followed)."""
    roots = []
    for raw in paths:
        try:
            roots.append(os.path.realpath(raw, strict=True))
        except OSError:
            continue
    return tuple(roots)


def _within(path: str, roots: Sequence[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def write_target(path: str, roots: Sequence[str] | None = None) -> str:
    """The file a write of `path` changes: the path itself, or a symlink's final target
    (refused when it leaves `roots`; `roots=None` allows any target)."""
    if not os.path.islink(path):
        return path
    try:
        target = os.path.realpath(path, strict=True)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise WriteRefused("is a symlink loop; not written") from None
        raise WriteRefused("is a broken symlink; not written") from None
    if roots is not None and not _within(target, roots):
        raise WriteRefused(f"is a symlink to {target}, outside the paths given; not written (name the target to fix it)")
    return target


def write_user_file(
    path: str, data: bytes, *, expected_digest: str | None = None, roots: Sequence[str] | None = None
) -> str:
    """Write `data` to the file at `path` as the module docstring promises; returns the
    path actually written (a symlink's target). With `expected_digest`, the file must
    still hold the bytes of that sha256; without it a missing file is created."""
    target = write_target(path, roots)
    try:
        info = os.lstat(target)  # the resolved target itself: a link here is a swap
    except FileNotFoundError:
        if expected_digest is not None:
            raise WriteRefused("was removed since it was read; not written") from None
        _replace_atomically(target, data, None)
        return target
    except OSError as error:
        raise WriteRefused(f"cannot write: {error.strerror or error}") from None
    if not stat.S_ISREG(info.st_mode):
        raise WriteRefused("is not a regular file; not written")
    if not info.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
        raise WriteRefused(f"is read-only (mode {stat.S_IMODE(info.st_mode):04o}); not written")
    try:
        if info.st_nlink > 1 or info.st_uid != os.geteuid():
            _rewrite_in_place(target, data, expected_digest, info)
        else:
            if expected_digest is not None:
                _check_unchanged(_read(target, info), expected_digest)
            try:
                _replace_atomically(target, data, info, expected_digest)
            except _NoSibling:
                _rewrite_in_place(target, data, expected_digest, info)
    except FileNotFoundError:
        raise WriteRefused("was removed since it was read; not written") from None
    except OSError as error:
        raise WriteRefused(f"cannot write: {error.strerror or error}") from None
    return target


def _open_checked(path: str, flags: int, info: os.stat_result) -> int:
    """`path` opened without following a link, and only if it is still the file that was
    checked (`info`: same device and inode, still a regular file)."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise WriteRefused("was replaced by a symlink since it was checked; not written") from None
        raise
    now = os.fstat(fd)
    if (now.st_dev, now.st_ino) != (info.st_dev, info.st_ino) or not stat.S_ISREG(now.st_mode):
        os.close(fd)
        raise WriteRefused("was replaced since it was checked; not written")
    return fd


def _read(path: str, info: os.stat_result) -> bytes:
    with os.fdopen(_open_checked(path, os.O_RDONLY, info), "rb") as handle:
        return handle.read()


def _check_unchanged(current: bytes, expected_digest: str) -> None:
    if hashlib.sha256(current).hexdigest() != expected_digest:
        raise WriteRefused("changed on disk since it was read; not overwritten (run again)")


def _rewrite_in_place(path: str, data: bytes, expected_digest: str | None, info: os.stat_result) -> None:
    """Same inode: links, owner and mode stay. The content check reads through the
    descriptor that is then written, so it sees the very file that gets changed."""
    fd = _open_checked(path, os.O_RDWR, info)
    with os.fdopen(fd, "r+b") as handle:
        if expected_digest is not None:
            _check_unchanged(handle.read(), expected_digest)
        handle.seek(0)
        handle.write(data)
        handle.truncate()
        handle.flush()
        os.fsync(handle.fileno())


def _replace_atomically(path: str, data: bytes, info: os.stat_result | None, expected_digest: str | None = None) -> None:
    """A temporary sibling with the old file's mode, owner and xattrs, then `os.replace`;
    the content is compared once more right before the replace."""
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, temp = tempfile.mkstemp(prefix=".autograd-fix-", suffix=".tmp", dir=directory)
    except PermissionError:
        if info is None:
            raise
        raise _NoSibling() from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if info is None:
                os.fchmod(handle.fileno(), 0o666 & ~_umask())
            else:
                _copy_metadata(handle.fileno(), path, info)
            os.fsync(handle.fileno())
        if expected_digest is not None and info is not None:
            _check_unchanged(_read(path, info), expected_digest)
        os.replace(temp, path)  # replaces the directory entry: a link swapped in is not followed
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise


def _copy_metadata(fd: int, source: str, info: os.stat_result) -> None:
    if (info.st_uid, info.st_gid) != (os.geteuid(), os.getegid()):
        try:
            os.fchown(fd, info.st_uid, info.st_gid)
        except OSError:
            pass  # a group we are not in: the owner's own group comes from the folder
    os.fchmod(fd, stat.S_IMODE(info.st_mode))
    for name in _xattr_names(source):
        try:
            os.setxattr(fd, name, os.getxattr(source, name))
        except OSError:
            continue  # e.g. security.* namespaces we may not set


def _xattr_names(path: str) -> list[str]:
    if not hasattr(os, "listxattr"):  # pragma: no cover - not Linux
        return []
    try:
        return os.listxattr(path)
    except OSError:
        return []


def _umask() -> int:
    """The process umask (it can only be read by setting it, so it is set straight back)."""
    current = os.umask(0o022)
    os.umask(current)
    return current

