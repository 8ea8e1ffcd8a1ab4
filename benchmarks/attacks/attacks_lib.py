"""The attack runner's bench: a project to verify code in, hostile repositories for the
command line, markers and listeners checked from outside, and the three results."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from autograd_fix.verification import Verifier, verify_pair


@dataclass(frozen=True)
class Result:
    status: str  # HELD | ESCAPED | LIMIT
    detail: str


def held(detail: str) -> Result:
    return Result("HELD", detail)


def escaped(detail: str) -> Result:
    return Result("ESCAPED", detail)


def limit(detail: str) -> Result:
    """A documented limit of this machine (not an escape the tool could have closed)."""
    return Result("LIMIT", detail)


#: a file the tool reports (AGF001: an eval loop without no_grad) and verifies a fix of
#: by running it: the hostile code sits at its top level, so both sides run it
MODEL = textwrap.dedent("""
    import torch
    from torch import nn
    {code}

    def evaluate(model, loader):
        model.eval()
        correct = 0
        for x, y in loader:
            out = model(x)
            correct += (out.argmax(1) == y).sum().item()
        return correct


    if __name__ == "__main__":
        torch.manual_seed(0)
        model = nn.Linear(4, 3)
        loader = [(torch.randn(8, 4), torch.randint(0, 3, (8,))) for _ in range(2)]
        print(evaluate(model, loader))
    """)


class Bench:
    """What the attacks share; removes everything it made on exit."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="agf-attacks-"))
        self.project = self.root / "proj"
        self.project.mkdir()
        (self.project / "pyproject.toml").write_text("[project]\nname = 'proj'\n")
        (self.project / "data.py").write_text("SIZE = 3\n")
        self.config_home = self.root / "xdg"  # an empty user configuration: nothing trusted
        self.config_home.mkdir()
        os.environ["XDG_CONFIG_HOME"] = str(self.config_home)
        self._verifier: Verifier | None = None
        self._markers: list[Path] = []

    def __enter__(self) -> "Bench":
        return self

    def __exit__(self, *exc: object) -> None:
        if self._verifier is not None:
            self._verifier.close()
        for marker in self._markers:
            with contextlib.suppress(OSError):
                marker.unlink()
        # rm, not shutil.rmtree: that recurses, and an attack nests 1,100 folders
        subprocess.run(["rm", "-rf", "--", str(self.root)], check=False)

    @property
    def verifier(self) -> Verifier:
        if self._verifier is None:
            self._verifier = Verifier()
        return self._verifier

    # -- code in a run ----------------------------------------------------------------------
    def verify(self, original: str, rewritten: str, timeout: float = 15, memory_mb: int = 4096, verifier: Verifier | None = None):
        script = self.project / "train.py"
        script.write_text(original)
        return verify_pair(original, rewritten, path=str(script), verifier=verifier or self.verifier, timeout=timeout,
                           memory_mb=memory_mb)

    def run_code(self, code: str, timeout: float = 15, memory_mb: int = 4096, fresh_worker: bool = False) -> str:
        """Run `code` on both sides of a harmless patch; what the two sides printed."""
        source = "import torch\nx = torch.ones(3)\ntotal = float(x.sum())\n" + textwrap.dedent(code)
        verifier = Verifier() if fresh_worker else None
        try:
            verdict = self.verify(source, source + "total = total * 1\n", timeout, memory_mb, verifier)
        finally:
            if verifier is not None:
                verifier.close()
        return "".join((unit.evidence.get(side) or {}).get("stdout_tail", "")
                       for unit in verdict.units for side in ("original", "rewritten")) + f"\n[{verdict.reason}]"

    # -- the command line on a hostile repository -------------------------------------------------
    def repo(self, script: str = "", pyproject: str | None = None) -> Path:
        folder = self.root / f"repo-{uuid.uuid4().hex[:8]}"
        folder.mkdir()
        (folder / "model.py").write_text(MODEL.format(code=script))
        if pyproject is not None:
            (folder / "pyproject.toml").write_text(pyproject)
        return folder

    def env(self) -> dict[str, str]:
        return {**os.environ, "XDG_CONFIG_HOME": str(self.config_home)}

    @staticmethod
    def cli_command(arguments: list[str]) -> list[str]:
        """The installed console script, as a user runs it (``python -m`` would put the
        current folder first on the tool's own ``sys.path``: the user's choice, not a hole)."""
        script = Path(sys.executable).parent / "autograd-fix"
        return [str(script), *arguments] if script.exists() else [sys.executable, "-m", "autograd_fix", *arguments]

    def cli(self, arguments: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 300):
        return subprocess.run(self.cli_command(arguments), cwd=cwd, env={**self.env(), **(env or {})},
                              capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)

    # -- what is checked from outside ----------------------------------------------------------------
    def marker(self) -> Path:
        """A path outside every project (in the host's /tmp) that must stay absent."""
        path = Path("/tmp") / f"agf-attack-marker-{uuid.uuid4().hex}"
        self._markers.append(path)
        return path

    def secret_file(self) -> Path:
        """A private key beside the project, as ~/.ssh/id_rsa is beside a checkout."""
        path = self.root / "dot-ssh" / "id_rsa"
        path.parent.mkdir(exist_ok=True)
        path.write_text("-----BEGIN OPENSSH PRIVATE KEY----- agf-attack\n")
        return path

    @contextlib.contextmanager
    def unix_listener(self, prefix: str) -> Iterator[tuple[str, object]]:
        """A listening Unix socket in the host's /tmp, as tmux's, and a count of the
        connections it got."""
        folder = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
        path = str(folder / "default")
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(path)
        os.chmod(path, 0o777)  # reachable by any uid that can see it: only the mounts hide it
        os.chmod(folder, 0o755)
        server.listen(8)
        server.settimeout(0.3)

        def accepted() -> int:
            count = 0
            while True:
                try:
                    server.accept()[0].close()
                    count += 1
                except OSError:
                    return count

        try:
            yield path, accepted
        finally:
            server.close()
            shutil.rmtree(folder, ignore_errors=True)
