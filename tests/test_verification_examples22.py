"""Issue 22: the README's first command (`autograd-fix --diff examples/`) shows every
example's fix accepted. Each test is the class of program an example stood for, judged
under its rule's own contract; each came back rejected or unverified before its fix
(see the docstrings).
"""

from __future__ import annotations

from autograd_fix.codemods.registry import rule_by_code
from autograd_fix.verification import verify_pair


def judge(verifier, original: str, rewritten: str, rule: str, **kw):
    checks = tuple(rule_by_code(rule).contract.checks)
    return verify_pair(original, rewritten, checks=checks, rule=rule, verifier=verifier, timeout=60, **kw)


# -- AGF011: two backward passes over one graph merged into one -------------------------------
TWO_HEADS = '''import torch
from torch import nn


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 16), nn.Tanh())
        self.main = nn.Linear(16, 1)
        self.aux = nn.Linear(16, 1)

    def forward(self, x):
        features = self.body(x)
        return self.main(features), self.aux(features)


def main():
    torch.manual_seed(0)
    model = TwoHeads()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for _ in range(3):
        x, y = torch.randn(8, 6), torch.randn(8, 1)
        optimizer.zero_grad()
        main_out, aux_out = model(x)
        main_loss = (main_out - y).pow(2).mean()
        aux_loss = 0.1 * (aux_out - y).abs().mean()
        main_loss.backward(retain_graph=True)
        aux_loss.backward()
        optimizer.step()
    print(f"final loss {main_loss.item():.4f}")


if __name__ == "__main__":
    main()
'''
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
