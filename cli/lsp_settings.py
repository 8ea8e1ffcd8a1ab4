"""The editor's settings for the language server (`workspace/configuration`, section
`autograd-fix`), read into one typed record.

What the editor may set is what belongs to the editor session rather than to the
project: the interpreter verification runs under, where and how long it runs, and how
diagnostics reach the editor. What rules apply stays the project's configuration
(`pyproject.toml`), so a file is judged the same in the editor, on the command line and
in CI. A value of the wrong type is not guessed at: it is left out and named in
`problems`, and the server says so once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SECTION = "autograd-fix"
DEVICES = ("auto", "cpu", "cuda")
DIAGNOSTIC_MODES = ("auto", "push", "pull")


@dataclass(frozen=True)
class EditorSettings:
    """The editor's settings; None: not set (the server's own value stays)."""

    python: str | None = None
    device: str | None = None
    verify_timeout: float | None = None
    debounce_ms: int | None = None
    #: how diagnostics reach the editor: `push` (publishDiagnostics), `pull`
    #: (textDocument/diagnostic) or `auto` (pull where the client supports it)
    diagnostic_mode: str | None = None
    problems: tuple[str, ...] = field(default=())


def editor_settings(raw: Any) -> EditorSettings:
    """The settings in `raw` (the editor's answer for the `autograd-fix` section, or
    initialization options: a JSON object; anything else means nothing is set)."""
    if not isinstance(raw, dict):
        return EditorSettings()
    problems: list[str] = []

    def text(key: str, allowed: tuple[str, ...] | None = None) -> str | None:
        value = raw.get(key)
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        if not isinstance(value, str) or (allowed is not None and value not in allowed):
            expected = " or ".join(allowed) if allowed else "a string"
            problems.append(f"{SECTION}.{key} must be {expected}, not {value!r}")
            return None
        return value.strip()

    def number(key: str, minimum: float) -> float | None:
        value = raw.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < minimum:
            problems.append(f"{SECTION}.{key} must be a number of at least {minimum:g}, not {value!r}")
            return None
        return float(value)

    timeout = number("verifyTimeout", 0.1)
    debounce = number("debounceMs", 0)
    return EditorSettings(
        python=text("python"),
        device=text("device", DEVICES),
        verify_timeout=timeout,
        debounce_ms=int(debounce) if debounce is not None else None,
        diagnostic_mode=text("diagnosticMode", DIAGNOSTIC_MODES),
        problems=tuple(problems),
    )
