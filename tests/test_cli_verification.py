"""`--diff` / `--apply` verify every patch first; verdicts decide what is applied."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autograd_fix.cli.app import app
from autograd_fix.cli.runner import FindingRecord
from autograd_fix.cli.verify_patches import CANNOT_COMPOSE, decide
from autograd_fix.verification.verdict import Verdict

SCRIPT = textwrap.dedent(
    """\
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 2))
    val_loader = [torch.randn(4, 8) for _ in range(6)]
    model.eval()
    outputs = []
    for batch in val_loader:
        outputs.append(model(batch))
    print(torch.cat(outputs).sum().item())
    """
)


def stub_stream(judge):
    """A stand-in for `verification.api.verify_stream` that judges each pair with `judge`."""

    def verify_stream(next_pair, on_verdict, **kwargs):
        while (item := next_pair()) is not None:
            key, pair = item
            on_verdict(key, judge(pair))

    return verify_stream


def record(applicability: str, verdict: str | None, reason: str = "r") -> FindingRecord:
    return FindingRecord(
        path="f.py", line=1, column=1, end_line=1, end_column=2, code="AGF001", name="n", message="m",
        fix_applicability=applicability, fix_applies=True, plan_id="AGF001@1:1",
        verification=None if verdict is None else Verdict(verdict, reason, "AGF001"),
    )


@pytest.mark.parametrize(
    ("applicability", "verdict", "unsafe", "unverified", "applied"),
    [
        ("safe", "accepted", False, False, True),
        ("safe", "unverified", False, False, False),  # only what verification accepted is written
        ("safe", "unverified", False, True, True),
        ("safe", "rejected", True, True, False),
        ("unsafe", "accepted", False, False, True),
        ("unsafe", "unverified", True, False, False),
        ("unsafe", "unverified", False, True, False),
        ("unsafe", "unverified", True, True, True),
        ("unsafe", "rejected", True, True, False),
    ],
)
def test_policy(applicability: str, verdict: str, unsafe: bool, unverified: bool, applied: bool) -> None:
    assert decide(record(applicability, verdict), unsafe, unverified) is applied


@pytest.mark.torch
def test_a_patch_that_cannot_be_composed_is_never_applied(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two safe AGF001 fixes; the second cannot be composed on top of the first: it gets
    an unverified verdict naming that, stays out of the final text, the first goes in."""
    from autograd_fix.verification import api as verification_api
    from autograd_fix.cli import verify_patches
    from autograd_fix.cli.runner import Job, check_file

    source = SCRIPT + SCRIPT.split("model.eval()\n", 1)[1].replace("outputs", "more")
    job = Job(path="evaluate.py", select=None, ignore=(), unsafe_fixes=False, compute_fix=False, fix_diffs=False,
              data=source.encode())
    outcome = check_file(job)
    first, second = [r.plan_id for r in outcome.findings]
    monkeypatch.setattr(verification_api, "verify_stream", stub_stream(lambda pair: Verdict("accepted", "stub", pair["rule"])))
    real_pair = verify_patches._FileQueue.pair
    monkeypatch.setattr(verify_patches._FileQueue, "pair", lambda self, r: None if r.plan_id == second else real_pair(self, r))
    (result,) = verify_patches.verify_and_compose([outcome], [job], verify_patches.VerifySettings(), False, None)
    by_id = {r.plan_id: r for r in result.findings}
    assert by_id[second].verification.reason == CANNOT_COMPOSE and not by_id[second].fix_applies
    assert by_id[first].fix_applies and result.fixed is not None
    assert result.fixed.count("with torch.no_grad():") == 1


def test_a_patch_never_verified_is_never_applied() -> None:
    assert decide(record("safe", None), True) is False


@pytest.fixture
def script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "evaluate.py"
    path.write_text(SCRIPT)
    return path


@pytest.mark.slow
@pytest.mark.torch
def test_diff_shows_verdict_and_git_apply_still_accepts_it(script: Path) -> None:
    result = CliRunner().invoke(app, ["--diff", "--color", "never", "evaluate.py"], catch_exceptions=False)
    assert result.exit_code == 1, result.output  # findings remain in --diff
    first = result.stdout.splitlines()[0]
    assert first.startswith("# AGF001 evaluate.py:9:1 accepted: ")
    assert "+    for batch in val_loader:" in result.stdout
    if shutil.which("git"):
        subprocess.run(["git", "init", "-q"], cwd=script.parent, check=True)
        (script.parent / "p.diff").write_text(result.stdout)
        subprocess.run(["git", "apply", "p.diff"], cwd=script.parent, check=True)
        assert "with torch.no_grad():" in script.read_text()


@pytest.mark.slow
@pytest.mark.torch
def test_apply_reports_verdicts_in_text_and_json(script: Path) -> None:
    result = CliRunner().invoke(app, ["--apply", "--format", "json", "evaluate.py"], catch_exceptions=False)
    document = json.loads(result.stdout)
    (finding,) = document["findings"]
    assert finding["verification"]["verdict"] == "accepted"
    assert document["summary"]["fixed"] == 1
    assert "with torch.no_grad():" in script.read_text()


@pytest.mark.slow
@pytest.mark.torch
def test_rejected_patch_is_not_applied(script: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever the rule claims, a patch verification rejects never reaches the file."""
    from autograd_fix import verification
    from autograd_fix.verification import Verdict

    reject_all = stub_stream(lambda pair: Verdict("rejected", "outputs differ: logits max abs diff 0.5", pair.get("rule"), ()))
    monkeypatch.setattr(verification.api, "verify_stream", reject_all)
    result = CliRunner().invoke(app, ["--apply", "evaluate.py"], catch_exceptions=False)
    assert script.read_text() == SCRIPT
    assert "rejected: outputs differ" in result.stdout
    assert "Fixed 0 findings in 0 files; 1 remaining; 1 rejected by verification." in result.stdout


@pytest.mark.slow
@pytest.mark.torch
def test_second_patch_is_verified_on_top_of_the_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, repo_root: Path) -> None:
    """The example has two in-place bugs; the second only shows once the first is fixed.
    Verified alone, the second patch would look like it leaves "the original's error"."""
    monkeypatch.chdir(tmp_path)
    shutil.copy(repo_root / "examples" / "inplace_on_grad_tracked_tensor.py", "inplace.py")
    result = CliRunner().invoke(app, ["--apply", "--unsafe-fixes", "--format", "json", "inplace.py"], catch_exceptions=False)
    document = json.loads(result.stdout)
    verdicts = [f["verification"]["verdict"] for f in document["findings"]]
    assert verdicts == ["accepted", "accepted"], [f["verification"]["reason"] for f in document["findings"]]
    completed = subprocess.run([sys.executable, "inplace.py"], capture_output=True, text=True)
    assert completed.returncode == 0, completed.stderr[-500:]


@pytest.mark.slow
@pytest.mark.torch
def test_an_unverified_safe_fix_is_written_only_with_unverified_fixes(script: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only what verification accepted is written: a safe fix whose runs could not
    decide (here: they needed the network) stays out, is listed with its reason and
    counted, and goes in only when the user asks for it."""
    from autograd_fix import verification
    from autograd_fix.verification import Verdict

    undecided = stub_stream(lambda pair: Verdict("unverified", "the run needs the network", pair.get("rule"), ()))
    monkeypatch.setattr(verification.api, "verify_stream", undecided)
    result = CliRunner().invoke(app, ["--apply", "evaluate.py"], catch_exceptions=False)
    assert script.read_text() == SCRIPT
    assert "unverified: the run needs the network" in result.stdout
    assert "Fixed 0 findings in 0 files; 1 remaining; 1 unverified, not written (--unverified-fixes writes it)." in result.stdout
    diff = CliRunner().invoke(app, ["--diff", "evaluate.py"], catch_exceptions=False)
    assert "+++ b/evaluate.py" not in diff.stdout and "--unverified-fixes shows it" in diff.stderr
    opted = CliRunner().invoke(app, ["--apply", "--unverified-fixes", "evaluate.py"], catch_exceptions=False)
    assert "with torch.no_grad():" in script.read_text()
    assert "Fixed 1 finding in 1 file; nothing left to fix." in opted.stdout
