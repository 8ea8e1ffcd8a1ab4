"""Masks IPython syntax in a notebook cell so that the rest can be parsed as Python.

Magics and shell escapes (`%time f()`, `%%bash`, `!pip install x`, `files = !ls`,
`obj?`, `??obj`) are not Python. Each such line is replaced by a placeholder
statement with the same indentation, one line for one line, so that every position in
the cell stays where it was. A placeholder ends in a comment holding a unique token:
after the rules have run, finding the placeholder line verbatim proves that no fix
touched it, and the token is what the original line is restored from.

A line counts as IPython syntax only where a statement starts: a `!` or `%` inside a
string or inside brackets is Python and stays.

Verification runs what Jupyter would (`verification.ipython_lines`): each masked line
that IPython runs on its own is kept in `MaskedCell.runnable` with its whole IPython
text (a magic with its `\\` continuations; a cell magic with its body), for IPython's
input transformer in the verification interpreter. The head of a cell magic whose body
is Python (`%%time`) is not: its body runs as the program's own lines.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field

#: cell magics whose body is ordinary Python: only the `%%` line itself is masked
PYTHON_BODY_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug"})

_CELL_MAGIC = re.compile(r"%%(?P<name>\w*)")
_ESCAPE = re.compile(r"(?P<indent>[ \t]*)(?:[%!]|\?)")
_ASSIGNED_ESCAPE = re.compile(r"(?P<indent>[ \t]*)(?P<target>[A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*)\s*=\s*[%!]")
_HELP = re.compile(r"(?P<indent>[ \t]*)[\w.*\[\]]*[\w*\]]\?{1,2}[ \t]*")


_PHYSICAL_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def split_lines(text: str) -> list[str]:
    """Lines with their endings, split where Python splits them (not at form feeds or
    other characters that `str.splitlines` also breaks at)."""
    return _PHYSICAL_LINE.findall(text)


@dataclass
class MaskedCell:
    """A cell's text with IPython lines replaced, and how to undo that."""

    text: str
    #: placeholder line (without its line ending) -> the original line
    restore: dict[str, str] = field(default_factory=dict)
    #: placeholder line -> the IPython input it stands for, for lines IPython runs on their
    #: own (continuation and cell-magic body lines stay placeholders: their head holds them)
    runnable: dict[str, str] = field(default_factory=dict)


def _placeholder(indent: str, target: str | None, token: str) -> str:
    statement = f"{target} = None" if target else "pass"
    return f"{indent}{statement}  # autograd-fix: masked IPython line {token}"


def _split_ending(line: str) -> tuple[str, str]:
    body = line.rstrip("\r\n")
    return body, line[len(body):]


def _classify(body: str) -> tuple[str, str | None] | None:
    """(indentation, assigned names or None) when `body` is an IPython line."""
    assigned = _ASSIGNED_ESCAPE.match(body)
    if assigned:
        return assigned.group("indent"), assigned.group("target")
    for pattern in (_ESCAPE, _HELP):
        match = pattern.match(body) if pattern is _ESCAPE else pattern.fullmatch(body)
        if match:
            return match.group("indent"), None
    return None


def _starts_statement(prefix: str) -> bool:
    """Whether the line after `prefix` starts a statement (not inside brackets, a
    multi-line string or a backslash continuation): the tokenizer finishes `prefix`."""
    try:
        for _ in tokenize.generate_tokens(io.StringIO(prefix).readline):
            pass
    except tokenize.TokenError:
        return False
    except SyntaxError:
        return True  # a broken line above: the parser reports it
    return True


def mask_cell(text: str, token_prefix: str) -> MaskedCell:
    """`text` with every IPython line replaced by a placeholder (see the module doc)."""
    lines = split_lines(text)
    result = MaskedCell(text=text)
    if not any(_could_be_ipython(line) for line in lines):
        return result
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    whole_cell = False
    candidates: dict[int, tuple[str, str | None]] = {}
    if first is not None:
        magic = _CELL_MAGIC.match(lines[first].lstrip())
        if magic:
            whole_cell = magic.group("name") not in PYTHON_BODY_CELL_MAGICS
            candidates[first] = ("", None)
    #: line number -> the IPython input that line's placeholder runs as
    runs: dict[int, str] = {}
    if whole_cell:
        candidates.update({i: ("", None) for i in range(len(lines)) if i not in candidates})
        runs[first] = text  # type: ignore[index]
    else:
        continued: tuple[str, str | None] | None = None
        head: int | None = None
        for number, line in enumerate(lines):
            body, _ = _split_ending(line)
            # a line after a magic that ends in `\\` belongs to the magic
            kind = (continued[0], None) if continued else _classify(body)
            if kind is not None and number not in candidates:
                candidates[number] = kind
                if continued is None:
                    head = number
                    runs[number] = body
                elif head is not None:
                    runs[head] += "\n" + body
            continued = kind if kind is not None and body.endswith("\\") else None
        accepted: dict[int, tuple[str, str | None]] = {}
        for number, kind in candidates.items():
            if _starts_statement(_apply(lines[:number], accepted, token_prefix, {})):
                accepted[number] = kind
        candidates = accepted
    placeholders: dict[int, str] = {}
    result.text = _apply(lines, candidates, token_prefix, result.restore, placeholders)
    result.runnable = {placeholders[number]: runs[number] for number in runs if number in placeholders}
    return result


def _could_be_ipython(line: str) -> bool:
    stripped = line.strip()
    return stripped.startswith(("%", "!", "?")) or stripped.endswith("?") or "= !" in line or "=!" in line or "= %" in line or "=%" in line


def _apply(lines: list[str], candidates: dict[int, tuple[str, str | None]], token_prefix: str, restore: dict[str, str],
           placeholders: dict[int, str] | None = None) -> str:
    out = []
    for number, line in enumerate(lines):
        if number not in candidates:
            out.append(line)
            continue
        body, ending = _split_ending(line)
        indent, target = candidates[number]
        placeholder = _placeholder(indent, target, f"{token_prefix}-{number + 1}")
        restore[placeholder] = body
        if placeholders is not None:
            placeholders[number] = placeholder
        out.append(placeholder + ending)
    return "".join(out)
