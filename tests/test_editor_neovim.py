"""A real editor drives the language server: Neovim's built-in LSP client, headless.

The stdio tests (test_server, test_server_editor) speak the protocol as this project
reads it; an editor written by others is the check that the server speaks it as
editors do (capabilities, position encodings, edits it can apply). Neovim is installed
by CI where the machine's package manager allows it; elsewhere the test skips and says
why.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from test_cli import EVAL_LOOP, EVAL_LOOP_FIXED

SESSION = Path(__file__).parent / "editor" / "neovim_session.lua"
NVIM = shutil.which("nvim")

pytestmark = pytest.mark.skipif(NVIM is None, reason="Neovim (nvim) is not installed: .ci/run installs it with apt-get")


def test_neovim_shows_the_finding_its_documentation_and_applies_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text(EVAL_LOOP)
    out = tmp_path / "session.json"
    environment = {**os.environ, "AGF_OUT": str(out), "AGF_FILE": str(path), "AGF_PYTHON": sys.executable}
    subprocess.run(
        [str(NVIM), "--headless", "-u", "NONE", "-i", "NONE", "-n", "-c", f"luafile {SESSION}"],
        cwd=tmp_path, env=environment, timeout=180, check=True, capture_output=True,
    )
    seen = json.loads(out.read_text())
    assert seen["published"] is True
    (diagnostic,) = seen["diagnostics"]
    assert (diagnostic["code"], diagnostic["source"]) == ("AGF001", "autograd-fix")
    assert diagnostic["lnum"] == EVAL_LOOP.splitlines().index("    for x, y in val_loader:  # validation")
    assert seen["hover"].startswith("**AGF001**") and "## Why is this bad?" in seen["hover"]
    assert seen["actions"] == [
        "Fix AGF001: wrap the loop in `with torch.no_grad():` (safe)",
        "Suppress AGF001 with # noqa: AGF001",
        "Verify and apply all autograd-fix fixes in this file",
    ]
    assert seen["text"] == EVAL_LOOP_FIXED
