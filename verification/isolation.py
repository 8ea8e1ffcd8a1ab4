"""What a verification run may see and keep: the isolation mode, its environment, its
paths.

`namespaces` confines a run (Linux namespaces: read-only file system but the run's
folder, no network, its own PID namespace); this module holds the policy around it:
the ``isolation`` modes (``auto``, ``required``, ``off``), the environment allowlist of
the worker (`worker_environment`) and of a run (`scrub_environment`: ``PATH``, locale,
the variables that fix torch's numerics (`RUN_ENV`), ``HOME`` and ``TMPDIR`` in the
run's folder, plus what ``pass-env`` names), and the notice and refusal texts.

Both sides of a patch must see the same paths, or a stored ``HOME`` or temporary path
would make two equal runs differ: the worker makes one empty *view* folder
(`make_view`) where each run binds its own folder in its private mount namespace; where
namespaces are unavailable, `as_seen_from` writes the run's real folder as the view in
its record instead.
"""

from __future__ import annotations

import ctypes
import os
import tempfile
from dataclasses import dataclass, field

from .namespaces import RunForker
from .trust import MODES  # noqa: F401 - the modes live with the policy that weighs them

#: variables a run keeps from the tool's environment (besides ``LC_*`` and ``pass-env``)
RUN_ENV = (
    "PATH", "LANG", "LANGUAGE", "TZ",
    # a subprocess of the run (``python other.py``) must import and load libraries as the run did
    "PYTHONPATH", "LD_LIBRARY_PATH",
    # numerics and devices: both sides must compute exactly as the user's runs do
    "PYTHONHASHSEED", "CUBLAS_WORKSPACE_CONFIG", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
    "CUDA_VISIBLE_DEVICES", "PYTORCH_NVML_BASED_CUDA_CHECK",
)
#: what the worker itself keeps (it imports torch and forks the runs): `RUN_ENV`, the
#: interpreter's search paths and the prefixes that configure torch and its libraries
_WORKER_ENV = ("HOME", "TMPDIR", "VIRTUAL_ENV", "CONDA_PREFIX", "TERM", "NO_COLOR")
_WORKER_PREFIXES = ("LC_", "PYTHON", "CUDA_", "NVIDIA_", "TORCH", "PYTORCH_", "TRITON_", "OMP_", "MKL_", "KMP_",
                    "OPENBLAS_", "CUBLAS_", "CUDNN_", "AUTOGRAD_FIX_")
#: the run folder's sub-folders that become HOME and TMPDIR
HOME_NAME = "home"
TMP_NAME = "tmp"
#: the worker's view folder: ``agf-view-<pid>-<random>`` in TMPDIR
VIEW_PREFIX = "agf-view-"


@dataclass(frozen=True)
class RunIsolation:
    """How one run child is confined: `mode` from the config, the job's `forker` (None
    where namespaces do not work here), the view path every run of the worker shares,
    and the extra variables (name -> value) the project passes through."""

    mode: str = "auto"
    forker: RunForker | None = None
    view: str | None = None
    pass_env: dict[str, str] = field(default_factory=dict)
    #: what the run sees read-only besides its own folder (`layout`): the system, the
    #: interpreter, the shadow copy's base and the user's project, ``PYTHONPATH``
    read_only: tuple[str, ...] = ()
    #: the uid the run takes (as root: `namespaces.RUN_UID`); None: the tool's own
    run_uid: int | None = None
    #: (the folder, the cgroup version) under which each run gets a memory cgroup of its
    #: own (`cgroup`), and the worker's pid that names them; None: none can be made here
    memory_cgroup: tuple[str, int] | None = None
    worker_pid: int = 0

    @property
    def namespaces(self) -> bool:
        return self.mode != "off" and self.forker is not None

    @property
    def scrub(self) -> bool:
        return self.mode != "off"


def worker_environment(environ: dict[str, str]) -> dict[str, str]:
    """The worker's environment: `environ` without anything a run must not see (cloud
    keys, tokens), keeping what importing torch and finding packages depend on."""
    keep = set(RUN_ENV) | set(_WORKER_ENV)
    return {k: v for k, v in environ.items() if k in keep or k.startswith(_WORKER_PREFIXES)}


def pass_env_values(names: tuple[str, ...] | list[str], environ: dict[str, str]) -> dict[str, str]:
    """The values of the `pass-env` variables set in `environ` (unset ones stay unset)."""
    return {name: environ[name] for name in names if name in environ}


def notice(reason: str) -> str:
    """The one-line warning of a run that goes unisolated."""
    from .trust import user_config_path

    return (
        f"verification runs are NOT isolated on this machine ({reason}): the code being verified can write "
        "files outside its folder, use the network and leave processes behind; pass --no-verify to run nothing, or "
        f'--isolation required (or isolation = "required" under [verify] in {user_config_path()}) to refuse '
        "unisolated runs"
    )


def refusal(reason: str) -> str:
    """The verdict reason when ``isolation = "required"`` meets a machine without it."""
    return f'not run: isolation = "required", but verification runs cannot be isolated on this machine ({reason})'


def scrub_environment(folder: str, pass_env: dict[str, str]) -> None:
    """Replace this process's environment with the allowlist, ``HOME`` and ``TMPDIR``
    under `folder`, and wipe the copy the kernel shows as ``/proc/self/environ``."""
    kept = {k: v for k, v in os.environ.items() if k in RUN_ENV or k.startswith("LC_")}
    home, tmp = os.path.join(folder, HOME_NAME), os.path.join(folder, TMP_NAME)
    os.makedirs(home, exist_ok=True)
    os.makedirs(tmp, exist_ok=True)
    os.environ.clear()
    os.environ.update({**kept, **pass_env, "HOME": home, "TMPDIR": tmp, "PYTHONDONTWRITEBYTECODE": "1"})
    tempfile.tempdir = None  # cached by the worker: read TMPDIR again
    _wipe_initial_environment()


def _wipe_initial_environment() -> None:
    """Zero the environment block the process was started with (the worker's), which
    ``/proc/self/environ`` reads and nothing references once ``os.environ`` was reset
    (``setenv`` copies its strings)."""
    try:
        with open("/proc/self/stat", encoding="ascii") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        start, end = int(fields[47]), int(fields[48])  # env_start, env_end (fields 50, 51)
    except (OSError, IndexError, ValueError):  # pragma: no cover - not Linux
        return
    if 0 < start < end:
        ctypes.memset(start, 0, end - start)


def as_seen_from(value: object, real: str, view: str) -> object:
    """`value` (a run's record) with the run folder `real` written as `view`: without a
    mount namespace the two sides' folders differ, and a path the code stored (``HOME``,
    a temporary file, ``__file__``) must still compare equal."""
    if isinstance(value, str):
        return value.replace(real, view)
    if isinstance(value, dict):
        return {key: as_seen_from(item, real, view) for key, item in value.items()}
    if isinstance(value, list):
        return [as_seen_from(item, real, view) for item in value]
    if isinstance(value, tuple):
        return tuple(as_seen_from(item, real, view) for item in value)
    return value


def make_view(owner: int) -> str:
    """The worker's empty view folder, named after `owner` (the worker's pid as the tool
    sees it), after removing those of workers that died without removing theirs
    (killed): empty folders only."""
    base = tempfile.gettempdir()
    remove_orphans(base, VIEW_PREFIX)
    return tempfile.mkdtemp(prefix=f"{VIEW_PREFIX}{owner}-")


def remove_orphans(parent: str, prefix: str) -> None:
    """Remove the empty folders ``<prefix><pid>-*`` in `parent` whose process is gone
    (view folders, run cgroups of a killed worker)."""
    try:
        names = [n for n in os.listdir(parent) if n.startswith(prefix)]
    except OSError:
        return
    for name in names:
        pid = name[len(prefix):].split("-", 1)[0]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            try:
                os.rmdir(os.path.join(parent, name))
            except OSError:
                pass
