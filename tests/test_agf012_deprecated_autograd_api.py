"""AGF012 deprecated-autograd-api: aliases, positional autocast arguments, a real run of the example script."""

from __future__ import annotations

import subprocess
import sys
import textwrap


from autograd_fix.codemods.engine import FixOptions, check_source
from autograd_fix.codemods.registry import rule_by_code

AGF012 = rule_by_code("AGF012")
RULE = AGF012
SCRIPT, BEFORE, AFTER = "deprecated_autograd_api.py", "FutureWarning", "step 10"


def test_amp_alias_and_two_findings_in_one_file() -> None:
    source = textwrap.dedent(
        """
        from torch.cuda.amp import autocast as ac, GradScaler as GS
        import torch.cuda.amp

        s = GS()
        with ac(False):
            pass
        with torch.cuda.amp.autocast(True, torch.float16, False):
            pass
        """
    ).lstrip()
    result = check_source(source, [AGF012])
    assert len(result.findings) == 3
    assert 's = torch.amp.GradScaler("cuda")' in result.fixed
    assert 'with torch.amp.autocast("cuda", enabled=False):' in result.fixed
    assert 'torch.amp.autocast("cuda", enabled=True, dtype=torch.float16, cache_enabled=False)' in result.fixed


def _run(path: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-W", "error::FutureWarning", path], capture_output=True, text=True, timeout=120)


def test_example_script_is_repaired_by_the_fix(repo_root, tmp_path) -> None:
    path = repo_root / "examples" / SCRIPT
    original = _run(str(path))
    assert BEFORE in original.stdout + original.stderr
    result = check_source(path.read_text(), [RULE], path=str(path), options=FixOptions(unsafe_fixes=True))
    assert any(f.code == RULE.code for f in result.findings) and result.fixed is not None
    fixed_path = tmp_path / SCRIPT
    fixed_path.write_text(result.fixed)
    fixed = _run(str(fixed_path))
    assert fixed.returncode == 0, fixed.stderr[-1000:]
    assert AFTER in fixed.stdout
