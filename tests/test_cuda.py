"""CUDA end to end: the command line verifies a fix of a script that trains on the GPU,
inside the sandbox (its file system allowlist must let the run reach the device), and
measures CUDA memory. Skipped cleanly where there is no GPU (CI never has one)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from autograd_fix.cli.app import app

#: seen on an H200 machine (torch 2.11+cu130, driver 580), 2026-12-04: every verification
#: run fails at its first CUDA call with "cudaGetDeviceCount() ... Error 304: OS call
#: failed", with --isolation off too, while a fresh process in the same sandbox, and a
#: plain fork of a process that imported torch, initialise CUDA fine. Not understood yet;
#: the test stays so that a GPU machine shows when it is fixed.
KNOWN_CUDA_FAILURE = pytest.mark.xfail(reason="verification runs cannot initialise CUDA (error 304) on the H200 machine", strict=False)

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    KNOWN_CUDA_FAILURE,
]

GPU_SCRIPT = textwrap.dedent(
    """\
    import torch
    from torch import nn

    torch.manual_seed(0)
    device = torch.device("cuda")
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = [(torch.randn(32, 64, device=device), torch.randint(0, 10, (32,), device=device)) for _ in range(4)]


    def evaluate(model, batches):
        model.eval()
        correct = 0
        for x, y in batches:
            correct += (model(x).argmax(1) == y).sum().item()
        return correct


    if __name__ == "__main__":
        for x, y in batches:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
        print(evaluate(model, batches))
    """
)


def test_a_gpu_script_is_verified_on_the_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(GPU_SCRIPT)
    result = CliRunner().invoke(app, ["--diff", "--device", "cuda", "--format", "json", "train.py"], catch_exceptions=False)
    document = json.loads(result.stdout)
    (finding,) = [f for f in document["findings"] if f["code"] == "AGF001"]
    verification = finding["verification"]
    assert verification["verdict"] == "accepted", verification["reason"]
    assert "cuda max_memory_allocated" in json.dumps(verification.get("evidence")), verification
