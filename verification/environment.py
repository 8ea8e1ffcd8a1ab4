"""Causes outside the patch: what a driver needed that this machine lacks.

When a run fails for one of these reasons the patch is neither right nor wrong, it is
unverified; the verdict names the cause and the configuration that would help, so the
user can act (``driver``/``argv`` in ``[tool.autograd-fix.verify]``, a factory, or
``--device``).
"""

from __future__ import annotations

import re

from .shadow import NETWORK_REFUSED

_CUDA = re.compile(
    r"Torch not compiled with CUDA|Found no NVIDIA driver|CUDA driver|no CUDA GPUs|CUDA is not available|"
    r"cuda\.is_available\(\) is False|NVIDIA driver on your system|Attempting to deserialize object on a CUDA device|"
    r"nccl|device-side|CUDA error|cudaGetDeviceCount|cuda runtime",
    re.IGNORECASE,
)
_DISTRIBUTED = re.compile(
    r"Default process group has not been initialized|init_process_group|MASTER_ADDR|MASTER_PORT|"
    r"environment variable (RANK|WORLD_SIZE|LOCAL_RANK)|torch\.distributed|process group",
)
_NETWORK = re.compile(
    re.escape(NETWORK_REFUSED) + r"|Name or service not known|Temporary failure in name resolution|Network is unreachable|"
    r"urlopen error|Connection refused|HTTPSConnectionPool|Max retries exceeded|"
    r"Dataset not found|You can use download=True|download=True to download",
)
_MISSING_MODULE = re.compile(r"No module named '([^']+)'")
_DISTRIBUTED_KEYS = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"}

HINT_DRIVER = (
    "name a `driver` (a command or pytest node id that runs on this machine) or `argv` for the script "
    "in [tool.autograd-fix.verify]"
)


_EXISTS_CHECK = re.compile(r"\b(exists|isfile|isdir)\(")


def cause(exc_type: str, message: str, line: str = "") -> str | None:
    """The environmental cause of an exception (by type name, message and the source
    line that raised it), or None."""
    if exc_type == "ShellCommandRefused":  # a notebook's `!cmd` (`ipython_lines`)
        return f"reached a shell command (`{message[:120]}`), which verification never runs; {HINT_DRIVER}"
    if exc_type == "MagicUnsupported":
        return f"reached the IPython magic `{message[:60]}`, which verification has no sandboxed version of; {HINT_DRIVER}"
    if exc_type in ("ModuleNotFoundError", "ImportError"):
        missing = _MISSING_MODULE.search(message)
        name = missing.group(1) if missing else None
        what = f"the package {name!r}" if name else "a package"
        return f"needs {what}, which is not installed here (install it, or {HINT_DRIVER})"
    if _NETWORK.search(message) or exc_type in ("URLError", "HTTPError", "gaierror", "ConnectionError", "ConnectionRefusedError"):
        return (
            "needs a download or network access, which verification does not allow (a dataset download?); "
            f"keep the data in the project, or {HINT_DRIVER}"
        )
    if _DISTRIBUTED.search(message) or (exc_type == "KeyError" and message.strip("'\"") in _DISTRIBUTED_KEYS):
        return f"needs torch.distributed with several processes, which verification does not start; {HINT_DRIVER} that runs one process"
    if _CUDA.search(message):
        return (
            "needs a GPU (CUDA), which this machine lacks; pass a CPU option through `argv`, "
            f"or {HINT_DRIVER}; function-mode inputs follow `--device`"
        )
    if exc_type == "AssertionError" and _EXISTS_CHECK.search(line):
        return f"needs a file that is not in the project (`{line.strip()[:120]}` failed); {HINT_DRIVER} that finds its data"
    if exc_type == "FileNotFoundError":
        return f"needs a file that is not in the project ({message[:160]}); {HINT_DRIVER} that finds its data"
    return None
