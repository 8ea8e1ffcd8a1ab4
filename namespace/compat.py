"""What differs between the Pythons autograd-fix supports (3.10 to 3.13), in one place.

`tomllib` arrived in 3.11; on 3.10 its backport `tomli`, the same module under another
name, is a dependency for that version only. The verification worker never imports this
module: under a project's own Python it has only `verification` and `codemods`
(`verification.client.worker_library`), so the modules it runs stay free of TOML.
"""

from __future__ import annotations

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 only
    import tomli as tomllib

__all__ = ["tomllib"]
