"""AGF003 / AGF009 behaviour the inline examples cannot express: real runs of the example
scripts before and after the fix, CRLF sources, interplay of the two rules."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from autograd_fix.codemods.engine import FixOptions, check_source
from autograd_fix.codemods.registry import rule_by_code

REPO = Path(__file__).resolve().parent.parent
UNSAFE = FixOptions(unsafe_fixes=True)


_DRIVER = """
import contextlib, io, runpy, sys, traceback
for path in sys.argv[1:]:
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(path, run_name="__main__")
        print("OK", out.getvalue().strip().replace(chr(10), " | "))
    except Exception as error:
        print("ERROR", type(error).__name__, str(error).splitlines()[0])
"""


def _run_both(original: Path, fixed: Path) -> tuple[str, str]:
    """Run both scripts in one interpreter (torch imported once): one result line each."""
    completed = subprocess.run(
        [sys.executable, "-c", _DRIVER, str(original), str(fixed)], capture_output=True, text=True, timeout=120
    )
    lines = completed.stdout.strip().splitlines()
    assert len(lines) == 2, completed.stderr[-2000:]
    return lines[0], lines[1]


def _fixed(text: str, *codes: str) -> str:
    rules = [rule_by_code(code) for code in codes]
    result = check_source(text, rules, options=UNSAFE)  # type: ignore[arg-type]
    assert result.fix_error is None and result.fixed is not None
    return result.fixed


@pytest.mark.torch
def test_inplace_example_raises_before_and_trains_after(tmp_path: Path) -> None:
    script = REPO / "examples" / "inplace_on_grad_tracked_tensor.py"
    fixed = tmp_path / "fixed.py"
    fixed.write_text(_fixed(script.read_text(), "AGF003"))
    before, after = _run_both(script, fixed)
    assert before.startswith("ERROR RuntimeError") and "modified by an inplace operation" in before
    assert after.startswith("OK final loss"), after
    assert float(after.split()[-1]) < 0.5


@pytest.mark.torch
def test_data_example_keeps_the_trained_weights(tmp_path: Path) -> None:
    script = REPO / "examples" / "data_attribute.py"
    fixed = tmp_path / "fixed.py"
    fixed.write_text(_fixed(script.read_text(), "AGF009"))
    assert ".data" not in fixed.read_text().split('"""', 2)[2]
    before, after = _run_both(script, fixed)
    assert before.startswith("OK accuracy") and before == after


def test_crlf_source_keeps_its_newlines() -> None:
    source = "import torch\r\n\r\nw = torch.randn(3, requires_grad=True)\r\nw.fill_(0.5)\r\n"
    fixed = _fixed(source, "AGF003")
    assert fixed == "import torch\r\n\r\nw = torch.randn(3, requires_grad=True)\r\nwith torch.no_grad():\r\n    w.fill_(0.5)\r\n"


def test_data_fix_then_inplace_rule_is_quiet() -> None:
    source = textwrap.dedent(
        """
        import torch

        def step(model, lr):
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-lr)
        """
    )
    fixed = _fixed(source, "AGF009", "AGF003")
    assert "with torch.no_grad():\n            p.add_(p.grad, alpha=-lr)" in fixed
    again = check_source(fixed, [rule_by_code("AGF003"), rule_by_code("AGF009")], options=UNSAFE)  # type: ignore[list-item]
    assert again.findings == []


def test_from_import_of_functional_and_two_findings_in_one_function() -> None:
    source = textwrap.dedent(
        """
        import torch
        from torch.nn.functional import relu

        def head(x, w):
            w = torch.randn(4, 4, requires_grad=True)
            h = torch.tanh(x @ w)
            relu(h, inplace=True)
            s = torch.exp(h)
            s.add_(1.0)
            return s
        """
    )
    result = check_source(source, [rule_by_code("AGF003")], options=UNSAFE)  # type: ignore[list-item]
    assert len(result.findings) == 2
    assert "h = relu(h)" in result.fixed and "s = s.add(1.0)" in result.fixed  # type: ignore[operator]


def test_nothing_on_the_safe_default_for_out_of_place() -> None:
    source = (REPO / "examples" / "inplace_on_grad_tracked_tensor.py").read_text()
    result = check_source(source, [rule_by_code("AGF003")], options=FixOptions())  # type: ignore[list-item]
    assert result.fixed is not None
    assert "gate.mul_(2.0)" in result.fixed  # unsafe: not applied without --unsafe-fixes
    assert "with torch.no_grad():" in result.fixed  # the safe leaf fix is


def test_statements_joined_by_semicolons_are_read_in_order() -> None:
    """A notebook-style line `w = leaf; w.add_(1)` raises when it runs: the leaf bound by
    the first statement is what the second changes in place. On a line that first
    rebinds the name to a computed tensor (`x = x * 2; x += 1`), the in-place change is
    on a non-leaf nothing saved, which autograd allows: silent, as on separate lines."""
    source = textwrap.dedent(
        """
        import torch
        w = torch.zeros(3, requires_grad=True); w.add_(1)
        x = torch.ones(2, requires_grad=True)
        x = x * 2; x += 1
        """
    )
    result = check_source(source, [rule_by_code("AGF003")], options=FixOptions())  # type: ignore[list-item]
    assert [(f.span.line, f.span.column) for f in result.findings] == [(3, 41)]
    assert "leaf" in result.findings[0].message
