"""Virtual environments made in a second from this test environment: a real `venv`
(its own interpreter, its own `site-packages`) whose `site-packages` links every entry of
this one's except those a test leaves out (torch, or autograd-fix itself). Nothing is
downloaded or built, so a test can have "an environment with autograd-fix and no
torch" and "the project's environment, with torch and without autograd-fix" at once.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import sysconfig
import venv
from pathlib import Path
from typing import Callable

#: whether this test environment has torch (found, not imported: that takes seconds);
#: without it the suite is the static one (tests/conftest.py skips what needs torch)
HAS_TORCH = importlib.util.find_spec("torch") is not None
NO_TORCH = "needs torch, which this environment lacks (the static suite; pip install -e '.[test]' for the full one)"

TORCH_PACKAGES = ("torch", "torchgen", "functorch", "triton", "nvidia")


def without_torch(name: str) -> bool:
    """Entries of torch and what only torch uses (its code generator, CUDA libraries)."""
    return name.lower().replace("-", "_").split(".")[0].split("_")[0] in TORCH_PACKAGES


def without_autograd_fix(name: str) -> bool:
    """Entries of autograd-fix: the package, its metadata, an editable install's finder."""
    return "autograd_fix" in name.lower().replace("-", "_")


def derived_environment(target: Path, leave_out: Callable[[str], bool]) -> Path:
    """A virtual environment at `target` with this environment's packages but those
    `leave_out` names; returns its interpreter."""
    venv.EnvBuilder(with_pip=False, symlinks=True).create(target)
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    site = target / "lib" / version / "site-packages"
    for folder in dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]):
        for name in sorted(os.listdir(folder)):
            if not leave_out(name) and not (site / name).exists():
                os.symlink(os.path.join(folder, name), site / name)
    return target / "bin" / "python"


def clean_environment(**extra: str) -> dict[str, str]:
    """This process's environment without what points at a Python environment (so the
    tool finds none it was not given) or configures Python."""
    dropped = ("VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")
    env = {key: value for key, value in os.environ.items() if key not in dropped}
    env.update(NO_COLOR="1", **extra)
    return env
