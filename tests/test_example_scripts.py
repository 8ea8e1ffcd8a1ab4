"""The bundled example scripts show their bug when run, and run clean once fixed.

Each case: the script's output (or error) before the fix contains BEFORE; the rule's
fixes (unsafe ones included) make it exit 0 with AFTER in its output. FutureWarnings are
errors so that deprecated APIs count as a failure.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from autograd_fix.codemods.engine import FixOptions, check_source
from autograd_fix.codemods.registry import rule_by_code

CASES = [
    ("AGF008", "graph_break.py", "did not learn", "\nlearned"),
    ("AGF010", "hidden_state_not_detached.py", "backward through the graph a second time", "chunk 4"),
    ("AGF012", "deprecated_autograd_api.py", "FutureWarning", "step 10"),
    ("AGF013", "require_grad_typo.py", "backbone moved", "backbone frozen"),
    ("AGF014", "checkpoint_without_use_reentrant.py", "block got no gradient", "block trained"),
    ("AGF016", "imprecise_log_exp.py", "gradient has nan", "loss finite"),
    ("AGF018", "backward_branches_on_tensor.py", "ambiguous", "gradcheck passes"),
    ("AGF017", "anomaly_mode_or_empty_cache_in_training.py", "anomaly mode on", "anomaly mode off"),
    ("AGF019", "accumulation_without_loss_scaling.py", "4.00x the big batch's", "matches the big batch's"),
]


def _run(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-W", "error::FutureWarning", str(path)], capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(("code", "script", "before", "after"), CASES, ids=[case[0] for case in CASES])
@pytest.mark.torch
def test_example_script_is_repaired_by_the_fix(
    code: str, script: str, before: str, after: str, repo_root: Path, tmp_path: Path
) -> None:
    rule = rule_by_code(code)
    path = repo_root / "examples" / script
    original = _run(path)
    assert before in original.stdout + original.stderr
    result = check_source(path.read_text(), [rule], path=str(path), options=FixOptions(unsafe_fixes=True))
    assert any(f.code == code for f in result.findings) and result.fixed is not None
    fixed_path = tmp_path / script
    fixed_path.write_text(result.fixed)
    fixed = _run(fixed_path)
    assert fixed.returncode == 0, fixed.stderr[-1000:]
    assert after in fixed.stdout
