"""The console script's first stop: answers `--version` before anything heavy loads.

`autograd-fix --version` is what editors, pre-commit and CI scripts run to find out
whether the tool is there and which it is. Importing the command line itself loads
libcst, typer, rich and every rule (most of a second on a quiet machine, several under
load), none of which that answer needs; everything else goes to `cli.app.main`.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--version"]:
        from autograd_fix import __version__

        sys.stdout.write(f"autograd-fix {__version__}\n")
        return
    from autograd_fix.cli.app import main as app_main

    app_main(args)
