"""AGF010 hidden-state-not-detached: CRLF, fix applicability by state shape, a real run of the example script."""

from __future__ import annotations

import subprocess
import sys


from autograd_fix.codemods.engine import FixOptions, check_source
from autograd_fix.codemods.registry import rule_by_code

AGF010 = rule_by_code("AGF010")
RULE = AGF010
SCRIPT, BEFORE, AFTER = "hidden_state_not_detached.py", "backward through the graph a second time", "chunk 4"


def test_crlf_source_keeps_crlf() -> None:
    source = "import torch\r\nh = torch.zeros(2, 3)\r\nfor x in data:\r\n    h = cell(x, h)\r\n    h.sum().backward()\r\n"
    result = check_source(source, [AGF010], options=FixOptions())
    assert result.fixed == (
        "import torch\r\nh = torch.zeros(2, 3)\r\nfor x in data:\r\n    h = h.detach()\r\n"
        "    h = cell(x, h)\r\n    h.sum().backward()\r\n"
    )


def test_unknown_state_shape_fix_is_unsafe_and_known_shape_is_safe() -> None:
    unknown = "hidden = model.init_hidden(4)\nfor x in data:\n    out, hidden = model(x, hidden)\n    out.sum().backward()\n"
    known = "import torch\nhidden = torch.zeros(1, 4, 8)\nfor x in data:\n    out, hidden = model(x, hidden)\n    out.sum().backward()\n"
    assert check_source(unknown, [AGF010]).findings[0].fix.applicability.value == "unsafe"
    assert check_source(known, [AGF010]).findings[0].fix.applicability.value == "safe"


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
