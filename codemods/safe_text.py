"""Text from outside the tool made safe to print: control characters escaped, length capped.

What a verified run prints, the exceptions it raises and the names of the files the tool
is pointed at are chosen by whoever wrote the code. Written raw to a terminal, an ESC
starts an ANSI sequence (OSC 52 writes the clipboard, cursor-up plus erase-line repaints
a "rejected" verdict as "accepted"), and a newline in a file name splits a diff's
``--- a/`` header into a line `git apply` reads as part of the patch. Everything such
text passes through on its way out (verdict reasons, run evidence, finding and error
lines, diff headers, GitHub annotations) goes through here.

`printable` escapes C0 and C1 control characters and DEL as ``\\x1b``, ``\\n``, ...
(Python's spelling, which a reader recognises and no terminal acts on); `git_quoted`
quotes a path the way git does when it must (``"a/odd\\nname.py"``, C-style escapes,
octal bytes), which `git apply` reads back.
"""

from __future__ import annotations

#: the longest reason a verdict keeps (a run can raise an exception with a 1 MB message)
REASON_LIMIT = 1000

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _is_control(char: str) -> bool:
    code = ord(char)
    return code < 0x20 or 0x7F <= code < 0xA0 or char in "\u2028\u2029"


def _escape(char: str) -> str:
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def printable(text: str, *, keep_lines: bool = False, limit: int | None = None) -> str:
    """`text` with every control character escaped (newlines and tabs kept when
    `keep_lines`), cut to `limit` characters with a note of how many were left out."""
    if limit is not None and len(text) > limit:
        text = f"{text[:limit]}... ({len(text) - limit} more characters)"
    if not any(_is_control(char) for char in text):
        return text
    kept = "\n\t" if keep_lines else ""
    return "".join(_escape(char) if _is_control(char) and char not in kept else char for char in text)


def printable_values(value: object) -> object:
    """`printable` applied to every string in a JSON-like value (dicts, lists), lines kept."""
    if isinstance(value, str):
        return printable(value, keep_lines=True)
    if isinstance(value, dict):
        return {printable(str(key)) if isinstance(key, str) else key: printable_values(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [printable_values(item) for item in value]
    return value


_GIT_ESCAPES = {"\a": "\\a", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\v": "\\v", "\f": "\\f", "\r": "\\r",
                '"': '\\"', "\\": "\\\\"}


def git_quoted(name: str) -> str:
    """`name` as git writes it in a diff header: as it is when it holds no control
    character, quote or backslash; else in double quotes with C-style escapes, and each
    byte of a control or otherwise odd character in octal (``\\033``)."""
    if not any(_is_control(char) or char in '"\\' for char in name):
        return name
    out = []
    for char in name:
        if char in _GIT_ESCAPES:
            out.append(_GIT_ESCAPES[char])
        elif _is_control(char):
            out.extend(f"\\{byte:03o}" for byte in char.encode("utf-8", "surrogateescape"))
        else:
            out.append(char)
    return '"' + "".join(out) + '"'
