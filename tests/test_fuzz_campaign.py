"""The fuzz campaign (benchmarks/fuzz_campaign.py) at a small budget: no crash, every
output parses, a second --apply changes nothing, and --diff | git apply == --apply.

The large run is a benchmark (benchmarks/FUZZ.md); this one keeps a fixed seed so a
regression shows up as the same failing program every time. The last two tests plant a
bug and check the campaign reports it, so a campaign that checks nothing cannot pass.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="the diff property needs git")


@pytest.fixture()
def fuzz(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location("fuzz_campaign", BENCHMARKS / "fuzz_campaign.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "fuzz_campaign", module)
    spec.loader.exec_module(module)
    return module


def _run(fuzz, tmp_path: Path, budget: int, git_sample: float, seed: int = 7):
    return fuzz.campaign(
        budget=budget,
        seconds=None,
        seed=seed,
        seed_dirs=[],
        git_sample=git_sample,
        hypothesmith_count=15,
        failures_dir=tmp_path / "failures",
    )


@pytest.mark.filterwarnings("ignore::SyntaxWarning")
def test_small_campaign_finds_nothing(fuzz, tmp_path: Path) -> None:
    tally = _run(fuzz, tmp_path, budget=100, git_sample=0.2)
    assert tally.tried == 100
    assert tally.fixed > 0 and tally.git_checked > 0  # the properties were exercised
    details = "\n\n".join(f"{f.prop}: {f.program.describe()}\n{f.detail}" for f in tally.failures)
    assert tally.failures == [], details


def test_campaign_reports_a_crash(fuzz, tmp_path: Path, monkeypatch) -> None:
    def broken(job):
        raise KeyError("planted")

    monkeypatch.setattr(fuzz, "check_file", broken)
    tally = _run(fuzz, tmp_path, budget=5, git_sample=0.0)
    assert tally.count()["crash"] == 5
    saved = sorted(p.name for p in (tmp_path / "failures").iterdir())
    assert "crash-0000.py" in saved and "crash-0000.txt" in saved
    assert "KeyError: 'planted'" in (tmp_path / "failures" / "crash-0000.txt").read_text()


EVAL_LOOP = b"""import torch

def evaluate(model, val_loader):
    model.eval()
    return [model(x) for x, _ in val_loader]
"""


def test_campaign_reports_a_diff_that_differs_from_apply(fuzz, tmp_path: Path, monkeypatch) -> None:
    from autograd_fix.codemods.engine import unified_diff

    program = fuzz.Program(data=EVAL_LOOP, origin="test")
    found, outcome = fuzz.check_program(program, fuzz.Options())
    assert found == [] and outcome.fixed is not None
    expected = fuzz.written_bytes(outcome)
    assert fuzz.check_diff_apply(program, fuzz.Options(), expected, tmp_path) == []

    def wrong(outcome):
        # a well-formed diff of another fix: git applies it, to other bytes than --apply
        return unified_diff(outcome.original, outcome.fixed, outcome.path).replace("+@torch.no_grad()", "+@torch.enable_grad()")

    from autograd_fix.cli import render

    monkeypatch.setattr(render, "file_diff", wrong)  # the command imports it when it prints a diff
    failures = fuzz.check_diff_apply(program, fuzz.Options(), expected, tmp_path)
    assert [f.prop for f in failures] == ["diff-apply"]
    assert "other bytes" in failures[0].detail
