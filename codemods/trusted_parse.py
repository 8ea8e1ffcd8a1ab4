"""libcst's parse without re-validating what its own parser built.

Why: libcst builds each node of a parsed tree through the node's dataclass constructor,
whose `__post_init__` runs `_validate` (balanced parentheses, required whitespace around
keywords, and the like). Those checks are for trees built by hand; the native parser
only builds nodes its grammar accepts, so on a parse every check passes, and they cost
about an eighth of the parse (timm: 4.3 s against 4.9 s of CPU for half its files).
libcst says as much beside the call ("It might make more sense to move validation work
into the visitor, which would allow us to avoid validating the tree when parsing a
file"). The tree is the same object for object: validation only reads.

How: `CSTNode.__post_init__` is replaced, once, by one that skips `_validate` while the
current thread is inside `parse_module` here, and validates as before otherwise. The
switch is per thread (the language server analyses on a worker thread while fixes may be
built on another): a node built by hand, in any thread, is validated as it always was.
The replacement is installed only where libcst's `__post_init__` is what this module
expects (a call of `self._validate()` and nothing else); another libcst version keeps
its own, and the parse validates as before.
"""

from __future__ import annotations

import threading

import libcst as cst
from libcst._nodes.base import CSTNode


class _Parsing(threading.local):
    """Per thread: is this thread inside `parse_module`? (The one piece of state here:
    it is set only for the length of a parse, and put back after.)"""

    active = False


_PARSING = _Parsing()


def _post_init(self: CSTNode) -> None:
    if not _PARSING.active:
        self._validate()


def _installed() -> bool:
    """Is the skipping `__post_init__` in place (installing it where libcst's is the
    expected one-liner)?"""
    current = CSTNode.__dict__.get("__post_init__")
    if current is _post_init:
        return True
    code = getattr(current, "__code__", None)
    if code is None or code.co_names != ("_validate",) or code.co_argcount != 1:
        return False
    CSTNode.__post_init__ = _post_init  # type: ignore[method-assign]
    return True


def parse_module(text: str) -> cst.Module:
    """`libcst.parse_module(text)`, the same tree, without validating the parser's own nodes;
    raises what libcst raises."""
    if not _installed() or _PARSING.active:
        return cst.parse_module(text)
    _PARSING.active = True
    try:
        return cst.parse_module(text)
    finally:
        _PARSING.active = False
