"""An evaluation that once needed a suppression, and no longer does.

Bug (AGF100): the forward used to run with autograd on, and `# noqa: AGF001` silenced
the report; since the loop moved under `torch.no_grad()` the comment suppresses
nothing, and would hide a real AGF001 written on that line later.
Run it: `python examples/unused_noqa.py`.
"""

import torch
from torch import nn


@torch.no_grad()
def evaluate(model, batches):
    model.eval()
    correct = 0
    for x, y in batches:
        correct += (model(x).argmax(1) == y).sum().item()  # noqa: AGF001
    return correct


if __name__ == "__main__":
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
    batches = [(torch.randn(8, 4), torch.randint(0, 3, (8,))) for _ in range(5)]
    print(f"correct {evaluate(net, batches)}")
