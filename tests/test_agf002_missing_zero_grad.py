"""AGF002 beyond the inline examples: real runs of the example script, CRLF, aliases."""

from __future__ import annotations

import textwrap

import torch

from autograd_fix.codemods.engine import FixOptions, check_source
from autograd_fix.codemods.rules.agf002_missing_zero_grad import MissingZeroGrad

UNSAFE = FixOptions(unsafe_fixes=True)


def _fix(source: str) -> str:
    result = check_source(source, [MissingZeroGrad], options=UNSAFE)
    assert result.fixed is not None, result.fix_error
    return result.fixed


def _run(source: str, capsys) -> str:
    exec(compile(source, "example.py", "exec"), {"__name__": "__main__"})
    return capsys.readouterr().out


def test_example_script_converges_after_the_fix(repo_root, capsys) -> None:
    source = (repo_root / "examples" / "missing_zero_grad.py").read_text()
    before = float(_run(source, capsys).split()[-1])
    after = float(_run(_fix(source), capsys).split()[-1])
    assert after < 0.1 < before


def test_each_step_sees_only_the_contributions_since_the_previous_step() -> None:
    """The contract, checked by hand on an accumulation loop: zeroing goes inside the `if`."""
    source = textwrap.dedent(
        """
        import torch
        seen = []
        w = torch.nn.Parameter(torch.ones(2))
        optimizer = torch.optim.SGD([w], lr=0.0)
        for i in range(6):
            (w * (i + 1)).sum().backward()
            if (i + 1) % 3 == 0:
                seen.append(w.grad.clone())
                optimizer.step()
        """
    ).lstrip()
    namespace: dict = {}
    exec(_fix(source), namespace)
    first, second = namespace["seen"]
    torch.testing.assert_close(first, torch.full((2,), 1.0 + 2 + 3))
    torch.testing.assert_close(second, torch.full((2,), 4.0 + 5 + 6))


def test_crlf_line_endings_are_kept() -> None:
    source = "for x, y in loader:\r\n    loss = crit(model(x), y)\r\n    loss.backward()\r\n    optimizer.step()\r\n"
    fixed = _fix(source)
    # the first candidate zeroes at the start of the iteration (CRLF kept on the new line)
    assert fixed == source.replace(":\r\n", ":\r\n    optimizer.zero_grad()\r\n", 1)


def test_aliased_no_grad_manual_update() -> None:
    source = textwrap.dedent(
        """
        import torch as T
        for _ in range(10):
            loss = (x @ w).sum()
            loss.backward()
            with T.no_grad():
                w.data.add_(w.grad, alpha=-0.1)
        """
    ).lstrip()
    assert _fix(source).endswith("        w.data.add_(w.grad, alpha=-0.1)\n        w.grad = None\n")


def test_gan_is_reported_without_a_fix_and_names_both_optimizers() -> None:
    source = MissingZeroGrad.examples().invalid[7].source
    result = check_source(textwrap.dedent(source).lstrip(), [MissingZeroGrad], options=UNSAFE)
    [finding] = result.findings
    assert finding.fix is None
    assert "`opt_d`" in finding.message and "`opt_g`" in finding.message
