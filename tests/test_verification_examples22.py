"""Issue 22: the README's first command (`autograd-fix --diff examples/`) shows every
example's fix accepted. Each test is the class of program an example stood for, judged
under its rule's own contract; each came back rejected or unverified before its fix
(see the docstrings).
"""

from __future__ import annotations

from pathlib import Path

from autograd_fix.codemods.registry import rule_by_code
from autograd_fix.verification import verify_pair


def judge(verifier, original: str, rewritten: str, rule: str, **kw):
    checks = tuple(rule_by_code(rule).contract.checks)
    return verify_pair(original, rewritten, checks=checks, rule=rule, verifier=verifier, timeout=60, **kw)


# -- AGF011: two backward passes over one graph merged into one -------------------------------
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
TWO_HEADS = (EXAMPLES / "unneeded_retain_graph.py").read_text()
SEPARATE = "        main_loss.backward(retain_graph=True)\n        aux_loss.backward()\n"


def test_merged_backward_passes_are_compared_on_the_losses_before_the_first_step(verifier):
    """`l1.backward(retain_graph=True); l2.backward()` -> `(l1 + l2).backward()`: the
    second point compared the first backward's loss (l1 against l1 + l2) and rejected
    the right fix. It compares the sum of the losses backpropagated before the first
    step; a merge that weighs a term differently still differs there."""
    right = judge(verifier, TWO_HEADS, TWO_HEADS.replace(SEPARATE, "        (main_loss + aux_loss).backward()\n"), "AGF011")
    assert right.verdict == "accepted", right.reason
    assert "at a second point too" in right.reason
    wrong = judge(verifier, TWO_HEADS, TWO_HEADS.replace(SEPARATE, "        (main_loss + 2 * aux_loss).backward()\n"), "AGF011")
    assert wrong.verdict == "rejected", wrong.reason
