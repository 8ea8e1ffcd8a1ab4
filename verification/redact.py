"""Secrets of the user's environment never reach a verdict.

Runs start with a scrubbed environment, but the user can pass variables in
(``--pass-env``), and a run can find a value elsewhere (a file, a process). Whatever a
run printed or raised is quoted in verdict reasons and evidence, which end up in a
terminal, a JSON report or a GitHub annotation that CI posts on a pull request. So
every value of the tool's own environment that could be a secret is replaced by
``[redacted $NAME]`` before a verdict leaves the verification stage.

Which values: those of every variable except the ones that configure a machine rather
than authenticate to something (`NOT_SECRET`, ``LC_*``), and only values of at least
`MIN_LENGTH` characters (a ``1`` or ``true`` is in every output).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

#: variables whose values describe the machine; everything else may be a secret
NOT_SECRET = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "PWD", "OLDPWD", "TERM", "LANG", "LANGUAGE", "TZ", "TMPDIR",
    "HOSTNAME", "SHLVL", "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "PYTHONPATH", "LD_LIBRARY_PATH",
    "XDG_CONFIG_HOME", "XDG_RUNTIME_DIR", "XDG_DATA_HOME", "XDG_CACHE_HOME", "DISPLAY", "EDITOR", "PAGER",
    "COLORTERM", "NO_COLOR", "FORCE_COLOR", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
    "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "_",
})
MIN_LENGTH = 8


@dataclass(frozen=True)
class Redactor:
    """The secret values to hide (value -> variable name), longest first."""

    secrets: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> "Redactor":
        environ = os.environ if environ is None else environ
        found = {
            value: name for name, value in environ.items()
            if name not in NOT_SECRET and not name.startswith("LC_") and len(value) >= MIN_LENGTH
        }
        return cls(tuple(sorted(found.items(), key=lambda item: -len(item[0]))))

    def text(self, text: str) -> str:
        for value, name in self.secrets:
            if value in text:
                text = text.replace(value, f"[redacted ${name}]")
        return text

    def values(self, value: object) -> object:
        """`text` applied to every string of a JSON-like value."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {key: self.values(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.values(item) for item in value]
        return value
