"""AGF004's unsafe padding, judged by a run: `backward` is short of a gradient for an input
that may be a tensor. Padding with None is right only when that input never requires grad;
the file's own training loop shows which, and only an accepted patch reaches the file."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autograd_fix.cli.app import app

SCRIPT = textwrap.dedent(
    '''\
    import torch
    from torch import nn


    class Projection(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, basis):
            ctx.save_for_backward(x, basis)
            return x.mm(basis)

        @staticmethod
        def backward(ctx, grad_output):
            x, basis = ctx.saved_tensors
            return grad_output.mm(basis.t())


    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Linear(6, 8)
            BASIS

        def forward(self, x):
            return Projection.apply(torch.tanh(self.encoder(x)), self.basis)


    if __name__ == "__main__":
        torch.manual_seed(0)
        model = Head()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(3):
            x, y = torch.randn(5, 6), torch.randn(5, 4)
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            print(step, loss.item())
    '''
)
#: a random-feature map: the basis is a buffer, so it never requires grad
FIXED_BASIS = SCRIPT.replace("BASIS", 'self.register_buffer("basis", torch.randn(8, 4))')
#: a learned basis: padding None would silently stop training it
LEARNED_BASIS = SCRIPT.replace("BASIS", "self.basis = nn.Parameter(torch.randn(8, 4))")
PADDED = "return grad_output.mm(basis.t()), None"


def _project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str) -> Path:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "projection.py"
    path.write_text(source)
    return path


@pytest.mark.slow
@pytest.mark.torch
def test_padding_an_input_that_never_requires_grad_is_accepted_and_applied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _project(tmp_path, monkeypatch, FIXED_BASIS)
    diff = CliRunner().invoke(app, ["--diff", "--color", "never", "projection.py"], catch_exceptions=False)
    assert "# AGF004 projection.py:14:9 accepted" in diff.stdout, diff.stdout
    assert "None for input(s) [1] (never required grad)" in diff.stdout
    assert f"+        {PADDED}" in diff.stdout
    applied = CliRunner().invoke(app, ["--apply", "--color", "never", "projection.py"], catch_exceptions=False)
    assert PADDED in path.read_text(), applied.stdout
    assert "Fixed 1 finding in 1 file" in applied.stdout
    completed = subprocess.run([sys.executable, "projection.py"], capture_output=True, text=True, cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr[-500:]


@pytest.mark.slow
@pytest.mark.torch
def test_padding_an_input_that_requires_grad_is_rejected_and_never_applied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _project(tmp_path, monkeypatch, LEARNED_BASIS)
    result = CliRunner().invoke(app, ["--apply", "--unsafe-fixes", "--color", "never", "projection.py"], catch_exceptions=False)
    assert "projection.py:14:9: AGF004" in result.stdout, result.stdout
    assert "[rejected: script driver (__main__)" in result.stdout
    assert "returns None for input 1, which required grad during the run" in result.stdout
    assert path.read_text() == LEARNED_BASIS


GATE = textwrap.dedent(
    '''\
    import torch
    from torch import nn


    class Gate(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, scale):
            ctx.save_for_backward(scale)
            ctx.open = scale > 0.5
            return x * scale

        @staticmethod
        def backward(ctx, g):
            scale, = ctx.saved_tensors
            return (g * scale if ctx.open else 0), None


    if __name__ == "__main__":
        torch.manual_seed(0)
        layer = nn.Linear(4, 4)
        optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
        for step in range(3):
            loss = Gate.apply(layer(torch.randn(2, 4)), SCALE).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    '''
)


@pytest.mark.slow
@pytest.mark.torch
def test_zero_behind_a_scalar_gate_becomes_none_once_the_run_accepts_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ctx.open` is a one-element tensor here: `None` is the zero gradient the 0 meant."""
    path = _project(tmp_path, monkeypatch, GATE.replace("SCALE", "torch.tensor(0.2)"))
    result = CliRunner().invoke(app, ["--apply", "--color", "never", "projection.py"], catch_exceptions=False)
    assert "[accepted: script driver (__main__)" in result.stdout and "): original RuntimeError gone" in result.stdout, result.stdout
    assert "return (g * scale if ctx.open else None), None" in path.read_text()
    completed = subprocess.run([sys.executable, "projection.py"], capture_output=True, text=True, cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr[-500:]


@pytest.mark.slow
@pytest.mark.torch
def test_zero_behind_an_elementwise_gate_is_judged_on_the_function_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`ctx.open` has four elements: the script's `if` on it raises on both sides, for a
    reason that is not the patch's (not an autograd error), so the Function is judged
    alone with inputs built from its forward; there `0 -> None` removes the original's
    autograd error and keeps its gradients, and the verdict says why the script did not
    decide."""
    source = GATE.replace("SCALE", "torch.rand(4)")
    path = _project(tmp_path, monkeypatch, source)
    result = CliRunner().invoke(app, ["--apply", "--color", "never", "projection.py"], catch_exceptions=False)
    assert "AGF004" in result.stdout and "[accepted: autograd.Function Gate with synthesized inputs" in result.stdout, result.stdout
    assert "the script driver (__main__) fails the same way on both sides" in result.stdout
    assert "Boolean value of Tensor with more than one value is ambiguous" in result.stdout
    assert "else None), None" in path.read_text()
