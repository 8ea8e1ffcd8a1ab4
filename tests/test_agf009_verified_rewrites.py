"""AGF009's unsafe rewrites, judged by a run of the file's own driver: a `.data` change of
an activation autograd saved goes out of place; `weight.data = <computed>` becomes `copy_`
under no_grad. Each is applied by `--apply` (no `--unsafe-fixes`) only when accepted."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autograd_fix.cli.app import app
from autograd_fix.codemods.engine import FixOptions, check_source
from autograd_fix.codemods.model import Applicability
from autograd_fix.codemods.rules.agf009_data_attribute import DataAttribute

GATED = textwrap.dedent(
    '''\
    import torch
    from torch import nn


    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            h = torch.sigmoid(self.fc(x))
            BODY


    if __name__ == "__main__":
        torch.manual_seed(0)
        model = Scaled()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(3):
            loss = model(torch.randn(5, 4)).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    '''
)
#: sigmoid saved `h`; scaling it through `.data` makes backward use the scaled values
SCALED = GATED.replace("BODY", "h.data.mul_(2)\n        return h * x[:, :3]")
#: the view taken first still sees the scaling in the original, not after `h = h.mul(2)`
VIEWED = GATED.replace("BODY", "gate = h.view(-1, 3)\n        h.data.mul_(2)\n        return gate * x[:, :3]")

EMBEDDINGS = textwrap.dedent(
    '''\
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.manual_seed(0)
    pretrained = torch.randn(ROWS, 16)
    emb = nn.Embedding(100, 16)
    head = nn.Linear(16, 2)
    optimizer = torch.optim.Adam([*emb.parameters(), *head.parameters()], lr=0.01)
    emb.weight.data = F.normalize(pretrained, dim=1)
    for ids in torch.randint(0, ROWS, (3, 8)):
        loss = head(emb(ids)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    '''
)
COPIED = "with torch.no_grad():\n    emb.weight.copy_(F.normalize(pretrained, dim=1))\n"


def _apply(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str) -> tuple[str, str]:
    """`--apply` without `--unsafe-fixes`: what it printed, and the file afterwards."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "train.py"
    path.write_text(source)
    result = CliRunner().invoke(app, ["--apply", "--color", "never", "train.py"], catch_exceptions=False)
    return result.stdout, path.read_text()


def _runs(tmp_path: Path) -> None:
    completed = subprocess.run([sys.executable, "train.py"], capture_output=True, text=True, cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr[-500:]


@pytest.mark.slow
@pytest.mark.torch
def test_scaling_a_saved_activation_goes_out_of_place_once_gradients_are_shown_corrected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    printed, text = _apply(tmp_path, monkeypatch, SCALED)
    assert "[accepted: script driver (__main__)" in printed and "): gradients corrected" in printed, printed
    assert "forward values before the first backward equal" in printed
    assert "        h = h.mul(2)\n        return h * x[:, :3]\n" in text
    assert ".data" not in text
    _runs(tmp_path)


@pytest.mark.slow
@pytest.mark.torch
def test_out_of_place_is_rejected_when_a_view_still_held_the_old_tensor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    printed, text = _apply(tmp_path, monkeypatch, VIEWED)
    assert "[rejected: script driver (__main__)" in printed and "): forward values before the first backward differ" in printed, printed
    assert text == VIEWED


@pytest.mark.slow
@pytest.mark.torch
def test_weight_data_assignment_becomes_copy_when_the_shapes_match(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    printed, text = _apply(tmp_path, monkeypatch, EMBEDDINGS.replace("ROWS", "100"))
    assert "[accepted: script driver (top-level code)" in printed and "): outputs equal (at a second point too), gradients equal" in printed, printed
    assert COPIED in text
    _runs(tmp_path)


@pytest.mark.slow
@pytest.mark.torch
def test_weight_data_assignment_of_another_shape_is_rejected(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pretrained vectors cover a larger vocabulary: the original swaps the storage and
    trains; `copy_` raises, so the patch never reaches the file."""
    source = EMBEDDINGS.replace("ROWS", "120")
    printed, text = _apply(tmp_path, monkeypatch, source)
    assert "[rejected: script driver (top-level code)" in printed and "): rewritten raises RuntimeError: The size of tensor a (100)" in printed, printed
    assert "the original ran clean" in printed
    assert text == source


# -- what is offered to a run, and what stays report-only (static, fast) -----------------

FORWARD = textwrap.dedent(
    '''\
    import torch
    import torch.nn as nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            h = torch.softmax(self.fc(x), dim=-1)
            MUTATION
            return h * x
    '''
)


def _fixes(source: str):
    result = check_source(source, [DataAttribute], options=FixOptions(unsafe_fixes=True))
    return result, [f.fix for f in result.findings]


@pytest.mark.parametrize(
    ("mutation", "rewritten"),
    [
        ("h.data *= 0.5 + x.mean()  # damp", "h = h.mul(0.5 + x.mean())  # damp"),
        ("h.data.clamp_(min=1e-6).div_(2)", "h = h.clamp(min=1e-6).div(2)"),
        ("h.data -= 1", "h = h.sub(1)"),
    ],
)
def test_a_saved_activation_changed_through_data_is_rewritten_out_of_place_as_unsafe(mutation: str, rewritten: str) -> None:
    result, fixes = _fixes(FORWARD.replace("MUTATION", mutation))
    assert [f.applicability for f in fixes if f is not None] == [Applicability.UNSAFE]
    assert result.fixed == FORWARD.replace("MUTATION", rewritten)


@pytest.mark.parametrize(
    "mutation",
    [
        "h.data.round_()",  # straight-through: out of place the gradient would be zero
        "h.data.zero_()",  # overwrite
        "h.data[0] = 0",  # no out-of-place twin the rule writes
    ],
)
def test_straight_through_tricks_stay_report_only(mutation: str) -> None:
    result, fixes = _fixes(FORWARD.replace("MUTATION", mutation))
    assert result.findings and fixes == [None]


def test_weight_tying_through_data_stays_report_only() -> None:
    """`copy_` would copy once where the original shares one storage for good."""
    source = textwrap.dedent(
        """\
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        enc = nn.Embedding(50, 8)
        dec = nn.Linear(8, 50, bias=False)
        dec.weight.data = enc.weight.data
        optimizer = torch.optim.SGD([*enc.parameters(), *dec.parameters()], lr=0.1)
        loss = F.cross_entropy(dec(enc(torch.tensor([[1, 2]]))).reshape(-1, 50), torch.tensor([2, 3]))
        loss.backward()
        optimizer.step()
        """
    )
    result, fixes = _fixes(source)
    assert result.findings and all(f is None for f in fixes)
