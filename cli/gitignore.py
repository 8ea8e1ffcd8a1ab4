"""A `.gitignore` matcher (the subset git documents for pattern files).

Supports comments, `!` negation, trailing `/` (directories only), leading or inner `/`
(anchored to the file's folder), `*`, `?`, `[...]` and `**`. Each folder's `.gitignore`
applies below that folder, later patterns win, as in git.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class IgnorePattern:
    regex: re.Pattern[str]
    negated: bool
    directory_only: bool
    base: Path

    def matches(self, path: Path, is_dir: bool) -> bool:
        if self.directory_only and not is_dir:
            return False
        try:
            relative = path.relative_to(self.base).as_posix()
        except ValueError:
            return False
        return bool(self.regex.match(relative))


def _glob_to_regex(glob: str, anchored: bool) -> str:
    out = []
    i = 0
    while i < len(glob):
        char = glob[i]
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if glob.startswith("/**", i) and i + 3 == len(glob):
            out.append("/.*")
            i += 3
            continue
        if glob.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = glob.find("]", i + 1)
            if end == -1:
                out.append(re.escape(char))
            else:
                body = glob[i + 1 : end].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = end
        elif char == "\\" and i + 1 < len(glob):
            i += 1
            out.append(re.escape(glob[i]))
        else:
            out.append(re.escape(char))
        i += 1
    prefix = "" if anchored else "(?:.*/)?"
    # a pattern matching a folder also matches everything below it
    return f"^{prefix}{''.join(out)}(?:/.*)?$"


def parse_patterns(lines: list[str], base: Path) -> list[IgnorePattern]:
    patterns: list[IgnorePattern] = []
    for raw in lines:
        line = raw.rstrip("\n").rstrip("\r")
        if not line.strip() or line.startswith("#"):
            continue
        if not line.endswith("\\ "):
            line = line.rstrip(" ")
        negated = line.startswith("!")
        if negated:
            line = line[1:]
        elif line.startswith("\\!") or line.startswith("\\#"):
            line = line[1:]
        directory_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            continue
        anchored = "/" in line
        line = line.lstrip("/")
        regex = re.compile(_glob_to_regex(line, anchored))
        patterns.append(IgnorePattern(regex, negated, directory_only, base))
    return patterns


def load_gitignore(folder: Path) -> list[IgnorePattern]:
    path = folder / ".gitignore"
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return parse_patterns(text.splitlines(), folder)


def is_ignored(path: Path, is_dir: bool, patterns: list[IgnorePattern]) -> bool:
    ignored = False
    for pattern in patterns:
        if pattern.negated:
            if ignored and pattern.matches(path, is_dir):
                ignored = False
        elif not ignored and pattern.matches(path, is_dir):
            ignored = True
    return ignored
