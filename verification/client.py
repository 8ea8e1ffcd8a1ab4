"""The tool-side handle on the warm worker (no torch import here).

`Verifier` starts the worker (`worker_command`) once and sends it
requests; `run_many` keeps up to `jobs` requests in flight (the worker forks one job per
request, so independent patches run in parallel). The worker ends when its stdin closes:
on `close`, at interpreter exit (a `weakref.finalize`), or when this process dies.

Every temporary folder of the worker and its runs lives under one `scratch` folder that
this process creates (`agf-verify-*`, handed to the worker as its `TMPDIR`) and
removes once the worker has exited, on every way out: a run, a crashed or killed
worker (whose runs cannot clean up after themselves), an interrupt.

The worker starts with `isolation.worker_environment`, not the tool's whole environment:
a secret that never reaches the worker cannot be read from its runs' memory. Its first
message says whether its runs can be isolated here (`isolation_unavailable`).

The worker never imports from the user's folder: it runs outside the sandbox (it sets
the sandbox up), so a ``selectors.py`` or ``json.py`` in the repository the tool was
started from, first on ``sys.path``, would run with the tool's rights. It starts with
``-I`` (no current folder or script folder on ``sys.path``, no ``PYTHONPATH``, no
``PYTHON*`` variables, no user site) in its own scratch folder, and `worker_command`
adds back only the folders this installation of autograd-fix itself was loaded from
(a user-site or ``PYTHONPATH`` install), after the standard library. Runs see the
user's ``PYTHONPATH`` again, inside the sandbox (`place.prepare`).

Under another interpreter (the project's, see `interpreter`) the worker is not installed:
`worker_library` makes a folder in the scratch folder that holds nothing but an
``autograd_fix`` package whose ``verification`` and ``codemods`` are links to this
installation's own folders, and the worker starts with that folder first on its path
(so that an ``autograd_fix`` of another version installed there is not the one that
answers), then the interpreter's own standard library and site-packages, then its user
site when it has one. Still ``-I``, still in the scratch folder.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import tempfile
import sys
import time
import weakref
from typing import TYPE_CHECKING, Any, Callable, Iterable

from .protocol import PROTOCOL_VERSION, VERSION_KEY

if TYPE_CHECKING:
    from autograd_fix.config_files import ConfigChoice

    from .interpreter import Interpreter
    from .trust import UserSettings

READY_TIMEOUT_S = 120.0


class WorkerError(RuntimeError):
    """The worker could not start or stopped answering."""


#: what ``python -I -c`` runs: the folders named after it join ``sys.path`` as site
#: folders (after the standard library and site-packages, their ``.pth`` files read),
#: then the worker's `main`
_BOOTSTRAP = (
    "import site, sys\n"
    "for folder in sys.argv[1:]:\n"
    "    site.addsitedir(folder)\n"
    "del sys.argv[1:]\n"
    "from autograd_fix.verification.worker import main\n"
    "main()\n"
)


def tool_folders() -> list[str]:
    """The folders, besides the interpreter's own site-packages, that this process
    found autograd-fix (and its dependencies) in: the user site when it is on
    ``sys.path`` here, and the folder holding the ``autograd_fix`` package when that
    is a plain package folder (an install on ``PYTHONPATH``). An editable install
    needs neither: its finder is a ``.pth`` file in site-packages, which ``-I`` keeps."""
    import site

    import autograd_fix

    folders: list[str] = []
    user_site = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    if user_site and user_site in sys.path and os.path.isdir(user_site):
        folders.append(user_site)
    package = os.path.dirname(os.path.abspath(autograd_fix.__file__))
    if os.path.basename(package) == "autograd_fix":
        parent = os.path.dirname(package)
        if parent not in folders and parent not in site.getsitepackages():
            folders.append(parent)
    return folders


#: what another interpreter runs: its version checked first (in syntax any Python
#: reads), then the library folder first on ``sys.path``, its user site added, the worker
_FOREIGN_BOOTSTRAP = (
    "import sys\n"
    "if sys.version_info < OLDEST:\n"
    "    sys.stdout.write('{\"ready\": false, \"python\": \"%d.%d.%d\"}\\n' % tuple(sys.version_info[:3]))\n"
    "    sys.exit(0)\n"
    "import site\n"
    "sys.path.insert(0, sys.argv[1])\n"
    "for folder in sys.argv[2:]:\n"
    "    site.addsitedir(folder)\n"
    "del sys.argv[1:]\n"
    "from autograd_fix.verification.worker import main\n"
    "main()\n"
)
#: the library folder's name inside the scratch folder
LIBRARY = "worker-lib"


def worker_library(scratch: str) -> str:
    """A folder holding only an ``autograd_fix`` package for another interpreter: a
    short ``__init__`` and links to this installation's ``verification`` and
    ``codemods`` folders (the worker imports no third-party package but torch and,
    when present, numpy)."""
    import autograd_fix
    import autograd_fix.codemods
    import autograd_fix.compat
    import autograd_fix.verification

    library = os.path.join(scratch, LIBRARY)
    package = os.path.join(library, "autograd_fix")
    os.makedirs(package)
    with open(os.path.join(package, "__init__.py"), "w", encoding="utf-8") as handle:
        handle.write(f'"""autograd-fix\'s verification worker, outside its installation."""\n\n'
                     f"__version__ = {autograd_fix.__version__!r}\n")
    for module in (autograd_fix.verification, autograd_fix.codemods):
        os.symlink(os.path.dirname(os.path.abspath(module.__file__ or "")), os.path.join(package, module.__name__.split(".")[-1]))
    # what differs between Pythons (`tomllib`), imported by verification modules only
    # where they read TOML, inside the function: on 3.10 it needs `tomli`, which a
    # project's environment may lack, and the worker reads no TOML
    os.symlink(os.path.abspath(autograd_fix.compat.__file__ or ""), os.path.join(package, "compat.py"))
    return library


def worker_command(interpreter: "Interpreter | None" = None, library: str | None = None) -> list[str]:
    """The worker's command line: the chosen interpreter (this one by default) in
    isolated mode (``-I``), so that nothing of the current folder, ``PYTHONPATH`` or
    ``PYTHON*`` variables is imported or obeyed before the worker has set up the
    sandbox. Another interpreter also gets the `library` folder (`worker_library`)."""
    if interpreter is None or interpreter.own:
        return [sys.executable, "-I", "-c", _BOOTSTRAP, *tool_folders()]
    from .interpreter import OLDEST_PYTHON

    assert library is not None
    bootstrap = _FOREIGN_BOOTSTRAP.replace("OLDEST", repr(OLDEST_PYTHON))
    return [interpreter.path, "-I", "-c", bootstrap, library, *([interpreter.user_site] if interpreter.user_site else [])]


def _shutdown(proc: subprocess.Popen | None, scratch: str) -> None:
    try:
        if proc is not None and proc.poll() is None:
            try:
                if proc.stdin:
                    proc.stdin.close()
            except OSError:
                pass
            try:
                proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=3)
    finally:
        _remove(scratch)


def _remove(folder: str) -> None:
    """Remove `folder`; a run killed with its worker may still be dying (the kernel
    kills it on its parent's death), so a few tries a moment apart."""
    for _ in range(20):
        shutil.rmtree(folder, ignore_errors=True)
        if not os.path.exists(folder):
            return
        time.sleep(0.05)


class Verifier:
    """One warm worker; use as a context manager or call `close`.

    `interpreter` is the Python it runs under (`interpreter.choose`; by default
    autograd-fix's own); `for_project` chooses it for a project. An interpreter that
    cannot run it raises `InterpreterError`, whose message says why."""

    def __init__(self, *, debug: bool | None = None, interpreter: "Interpreter | None" = None) -> None:
        from .interpreter import own_interpreter
        from .isolation import worker_environment

        #: the Python the worker runs under
        self.interpreter = interpreter or own_interpreter()
        env = worker_environment(dict(os.environ))
        env.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
        env.setdefault("OMP_NUM_THREADS", "1")
        if debug is None:
            debug = bool(os.environ.get("AUTOGRAD_FIX_VERIFY_DEBUG"))
        #: the folder holding every temporary folder of this worker's runs
        self.scratch = tempfile.mkdtemp(prefix="agf-verify-")
        env["TMPDIR"] = self.scratch
        self._finalizer = weakref.finalize(self, _remove, self.scratch)
        library = None if self.interpreter.own else worker_library(self.scratch)
        self._proc = subprocess.Popen(
            worker_command(self.interpreter, library),
            cwd=self.scratch,  # never the user's folder (relative paths resolve here)
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None if debug else subprocess.DEVNULL,
            env=env,
            close_fds=True,
        )
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _shutdown, self._proc, self.scratch)
        self._buffer = b""
        self._next_id = 0
        self._pending: dict[int, dict[str, Any]] = {}
        try:
            ready = self._read_message(time.monotonic() + READY_TIMEOUT_S)
        except WorkerError:
            self.close()
            raise
        if not ready.get("ready"):
            self.close()
            raise self._not_ready(ready)
        if ready.get(VERSION_KEY) != PROTOCOL_VERSION:
            self.close()
            raise WorkerError(f"the verification worker speaks protocol version {ready.get(VERSION_KEY)!r}, this tool "
                              f"{PROTOCOL_VERSION}: they come from different autograd-fix installations")
        self.worker_pid = ready.get("pid")
        #: None when runs are isolated here, else why they cannot be
        self.isolation_unavailable: str | None = ready.get("isolation_unavailable")
        self._unisolated = False
        self._noticed = False

    @classmethod
    def for_project(cls, path: str | None, user: "UserSettings | None" = None, *, debug: bool | None = None,
                    choice: "ConfigChoice | None" = None) -> "Verifier":
        """A worker under the interpreter `interpreter.choose` picks for the project of
        `path` (a file or folder; None: the current folder), given the `user`'s settings
        (their configuration file when None)."""
        from .config import ConfigError, VerifyConfig, load_config
        from .interpreter import InterpreterError, choose
        from .shadow import project_root
        from .trust import load_user_settings

        user = user if user is not None else load_user_settings()
        start = os.path.abspath(path or os.getcwd())
        try:
            config = load_config(start, user=user, choice=choice)
        except ConfigError:
            config = VerifyConfig()  # the verdicts say what is wrong with the file
        try:
            interpreter = choose(user, config.python, project_root(start))
        except InterpreterError as error:
            raise InterpreterError(str(error), config.notes) from None
        return cls(debug=debug, interpreter=interpreter)

    def _not_ready(self, ready: dict[str, Any]) -> WorkerError:
        """The error of a worker that answered but could not serve: its Python too old,
        torch failing to import."""
        from .interpreter import InterpreterError, problem

        where = f"the Python chosen for verification, {self.interpreter.path} ({self.interpreter.origin})"
        if ready.get("python"):
            return InterpreterError(f"not run: {where}, {problem(ready['python'], None)}")
        if ready.get("torch_error"):
            return InterpreterError(f"not run: {where}, cannot import torch: {str(ready['torch_error'])[:300]}")
        return WorkerError(f"the verification worker did not start: {ready}")

    def ran_unisolated(self) -> None:
        """Note that a request with ``isolation = "auto"`` ran without namespaces."""
        self._unisolated = True

    def isolation_notice(self) -> str | None:
        """The warning that runs went unisolated, the first time only (once per run of
        the tool, which holds one Verifier); None when every run so far was isolated."""
        if self.isolation_unavailable is None or not self._unisolated or self._noticed:
            return None
        self._noticed = True
        from .isolation import notice

        return notice(self.isolation_unavailable)

    # -- lifecycle ----------------------------------------------------------------
    def close(self) -> None:
        self._finalizer()

    def __enter__(self) -> "Verifier":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def alive(self) -> bool:
        return self._proc.poll() is None

    # -- protocol -----------------------------------------------------------------
    def _send(self, message: dict[str, Any]) -> None:
        """One request on its line, stamped with this side's protocol version (typed
        requests carry it already; the doctor's and a ping get it here)."""
        assert self._proc.stdin is not None
        message = {VERSION_KEY: PROTOCOL_VERSION, **message}
        try:
            self._proc.stdin.write((json.dumps(message) + "\n").encode())
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise WorkerError("the verification worker is gone") from exc

    def _read_message(self, deadline: float) -> dict[str, Any]:
        assert self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WorkerError("the verification worker did not answer in time")
            ready, _, _ = select.select([fd], [], [], min(remaining, 1.0))
            if not ready:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise WorkerError("the verification worker exited unexpectedly")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def run_many(self, requests: Iterable[dict[str, Any]], *, jobs: int = 1, deadline_s: float | None = None) -> list[dict[str, Any]]:
        """Send requests with at most `jobs` in flight; answers in request order."""
        queue = list(requests)
        answers: dict[int, dict[str, Any]] = {}
        ids: list[int] = []
        in_flight = 0
        position = 0
        per_request = max((float(r.get("timeout", 20.0)) * 2 * max(1, len(r.get("units") or [None])) for r in queue), default=60.0)
        while position < len(queue) or in_flight:
            while position < len(queue) and in_flight < max(1, jobs):
                request = dict(queue[position])
                request["id"] = self._next_id
                self._next_id += 1
                ids.append(request["id"])
                self._send(request)
                in_flight += 1
                position += 1
            limit = deadline_s if deadline_s is not None else per_request + 60.0
            message = self._read_message(time.monotonic() + limit)
            if "id" in message and message["id"] in ids:
                answers[message["id"]] = message
                in_flight -= 1
        return [answers[i] for i in ids]

    def stream(
        self,
        feed: Callable[[], dict[str, Any] | None],
        on_answer: Callable[[dict[str, Any], dict[str, Any]], None],
        *,
        jobs: int = 1,
    ) -> None:
        """Keep up to `jobs` requests in flight until `feed` has nothing more: `feed()`
        gives the next request (None: none for now), `on_answer(request, answer)` hears
        of each answer as it arrives (and may let `feed` give more, such as a file's
        next patch). Unlike `run_many`, nothing waits for a whole batch."""
        in_flight: dict[int, tuple[dict[str, Any], float]] = {}
        while True:
            while len(in_flight) < max(1, jobs):
                request = feed()
                if request is None:
                    break
                request = dict(request, id=self._next_id)
                self._next_id += 1
                self._send(request)
                budget = float(request.get("timeout", 20.0)) * 2 * max(1, len(request.get("units") or [None])) + 60.0
                in_flight[request["id"]] = (request, budget)
            if not in_flight:
                return
            message = self._read_message(time.monotonic() + max(budget for _, budget in in_flight.values()))
            sent = in_flight.pop(message.get("id"), None) if "id" in message else None
            if sent is not None:
                on_answer(sent[0], message)

    def ping(self) -> bool:
        return self.run_many([{"op": "ping"}])[0].get("result") == "pong"
