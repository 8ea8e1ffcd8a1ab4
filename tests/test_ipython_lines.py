"""A notebook's IPython lines in verification: run through IPython's own transformer
where the verification interpreter has IPython (`%time out = model(xb)` defines `out`,
as in Jupyter), never a shell command; masked as `pass` without it, and the verdict says
which of the two happened."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from typer.testing import CliRunner

from autograd_fix.cli.app import app
from autograd_fix.cli.magics import mask_cell
from autograd_fix.verification import ipython_lines
from autograd_fix.verification.ipython_lines import MagicUnsupported, SandboxShell, ShellCommandRefused, runnable_source

HAS_IPYTHON = importlib.util.find_spec("IPython") is not None
needs_ipython = pytest.mark.skipif(not HAS_IPYTHON, reason="IPython is not installed (the `test` extra installs it)")

SETUP = "import torch\nfrom torch import nn\n\ntorch.manual_seed(0)\nmodel = nn.Linear(8, 2)\nval_batches = [torch.randn(4, 8) for _ in range(3)]"
EVAL = "model.eval()\nscores = []\nfor batch in val_batches:\n    scores.append(model(batch))\nprint(len(scores))"


# -- what the CLI hands verification --------------------------------------------------------
def test_each_line_magic_and_escape_is_runnable_with_its_own_text() -> None:
    masked = mask_cell("for x in range(2):\n    %time y = f(x)\nfiles = !ls data\n%matplotlib inline\n", "tok")
    assert sorted(masked.runnable.values()) == ["    %time y = f(x)", "%matplotlib inline", "files = !ls data"]
    assert set(masked.runnable) <= set(masked.restore)


def test_a_continued_magic_runs_as_one_input_from_its_first_line() -> None:
    masked = mask_cell("%time f(a, \\\n      b)\nprint(1)\n", "tok")
    assert list(masked.runnable.values()) == ["%time f(a, \\\n      b)"]
    assert len(masked.restore) == 2  # the continuation stays a placeholder of its own


def test_a_cell_magic_runs_with_its_body_unless_the_body_is_python() -> None:
    bash = mask_cell("%%bash\necho hi\nls -l", "tok")
    assert list(bash.runnable.values()) == ["%%bash\necho hi\nls -l"]
    timed = mask_cell("%%time\nfor x in y:\n    f(x)", "tok")
    assert timed.runnable == {}  # the body is the program's own lines; `%%time` is a no-op


# -- the run child's side ---------------------------------------------------------------------
@needs_ipython
def test_ipythons_transformer_makes_each_masked_line_python_in_place() -> None:
    masked = mask_cell("def g():\n    %time y = f(1)\n    return y\nfiles = !ls data\n", "tok")
    source, note = runnable_source(masked.text, masked.runnable)
    assert source.splitlines() == [
        "def g():",
        "    get_ipython().run_line_magic('time', 'y = f(1)')",
        "    return y",
        "files = get_ipython().getoutput('ls data')",
    ]
    assert note is not None and note.startswith("IPython ") and "transformed 2 IPython lines" in note


def test_without_ipython_the_lines_stay_masked_and_the_note_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ipython_lines, "_transformer", lambda: (None, None))
    masked = mask_cell("%time out = model(xb)\nprint(out)\n", "tok")
    source, note = runnable_source(masked.text, masked.runnable)
    assert source == masked.text
    assert note == "IPython is not installed in the verification interpreter: 1 IPython line ran as `pass` (masked), not as in Jupyter"


def test_a_program_without_ipython_lines_is_left_alone() -> None:
    assert runnable_source("x = 1\n", {"pass  # autograd-fix: masked IPython line t-1": "%time x"}) == ("x = 1\n", None)


def _run(code: str) -> dict:
    """`code` (what IPython's transformer writes) run at module level, with the sandbox
    shell as `get_ipython`."""
    shell = SandboxShell()
    namespace: dict = {"get_ipython": lambda: shell, "f": lambda v: v * 2}
    exec(compile(code, "cell", "exec"), namespace)  # noqa: S102
    return namespace


def test_time_runs_its_statement_in_the_cells_namespace_and_gives_an_expressions_value() -> None:
    found = _run("get_ipython().run_line_magic('time', 'out = f(21)')\nt = get_ipython().run_line_magic('time', 'f(2) + 1')\n")
    assert found["out"] == 42 and found["t"] == 5


def test_timeit_runs_its_statement_once_without_keeping_its_assignments() -> None:
    found = _run("calls = []\nget_ipython().run_line_magic('timeit', '-n 10 -r 3 calls.append(f(1))')\n"
                 "get_ipython().run_line_magic('timeit', 'kept = 1')\n")
    assert found["calls"] == [2] and "kept" not in found


@pytest.mark.parametrize("code", [
    "get_ipython().system('touch x')",
    "files = get_ipython().getoutput('ls')",
    "get_ipython().run_line_magic('pip', 'install torch')",
    "get_ipython().run_cell_magic('writefile', 'data.py', 'x = 1\\n')",
    "get_ipython().run_cell_magic('bash', '', 'rm -rf /\\n')",
])
def test_shell_commands_are_refused_never_run(code: str) -> None:
    with pytest.raises(ShellCommandRefused):
        _run(code)


def test_display_magics_do_nothing_and_others_are_a_named_cause(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGF_TEST_ENV", raising=False)
    _run("get_ipython().run_line_magic('matplotlib', 'inline')\nget_ipython().run_line_magic('pinfo', 'f')\n"
         "get_ipython().run_line_magic('env', 'AGF_TEST_ENV=on')\n")
    assert os.environ["AGF_TEST_ENV"] == "on"
    with pytest.raises(MagicUnsupported, match="%reset"):
        _run("get_ipython().run_line_magic('reset', '-f')")


# -- end to end ----------------------------------------------------------------------------------
@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _verdict(project: Path, *cells: str) -> dict:
    nbformat.write(new_notebook(cells=[new_code_cell(cell) for cell in cells]), str(project / "nb.ipynb"))
    result = CliRunner().invoke(app, ["--diff", "--format", "json", "nb.ipynb"], catch_exceptions=False)
    (finding,) = json.loads(result.stdout)["findings"]
    return finding["verification"]


@pytest.mark.torch
def test_a_time_magic_defines_what_the_cells_below_read(project: Path) -> None:
    """`%time out = model(...)`: with IPython the fix is verified (`out` exists, as in
    Jupyter); without it the masked line leaves `out` undefined and the verdict says why."""
    verification = _verdict(project, SETUP, "%time out = model(val_batches[0])", EVAL + "\nprint(out.shape)")
    if HAS_IPYTHON:
        assert verification["verdict"] == "accepted", verification["reason"]
        assert "IPython line; get_ipython() is sandboxed" in verification["reason"]
    else:
        assert verification["verdict"] == "unverified"
        assert "IPython is not installed in the verification interpreter: 1 IPython line ran as `pass`" in verification["reason"]


@pytest.mark.torch
@needs_ipython
def test_a_shell_escape_stops_the_run_with_a_named_cause_and_runs_nothing(project: Path) -> None:
    verification = _verdict(project, SETUP, "!touch shell-ran\nfiles = !ls", EVAL + "\nprint(files)")
    assert verification["verdict"] == "unverified"
    assert "reached a shell command (`!touch shell-ran`), which verification never runs" in verification["reason"]
    assert not list(project.rglob("shell-ran"))


@pytest.mark.torch
def test_the_verify_command_runs_a_notebooks_ipython_lines_too(project: Path) -> None:
    from autograd_fix.cli.verify_command import verify_app

    fixed = EVAL.replace("for batch in val_batches:\n    scores", "with torch.no_grad():\n    for batch in val_batches:\n        scores")
    for name, evaluation in (("a.ipynb", EVAL), ("b.ipynb", fixed)):
        cells = [SETUP, "%time out = model(val_batches[0])", evaluation + "\nprint(out.shape)"]
        nbformat.write(new_notebook(cells=[new_code_cell(cell) for cell in cells]), str(project / name))
    result = CliRunner().invoke(verify_app, ["--rule", "AGF001", "a.ipynb", "b.ipynb"], catch_exceptions=False)
    if HAS_IPYTHON:
        assert result.exit_code == 0, result.stdout
        assert "get_ipython() is sandboxed" in result.stdout
    else:
        assert result.exit_code == 3 and "IPython is not installed" in result.stdout
